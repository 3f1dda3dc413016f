"""The agent's credential when its configuration sets no ``token``: ``<data_dir>/agent.token``.

An agent on loopback is still reached by every account of the host and by every task that shares
the host's network, and it runs jobs as root: it needs a credential there too. Without a configured
``token`` it makes one at its first start (256 random bits, url-safe) and keeps it in a file of its
data dir that only its own user (root) can read; later starts use the same one, so clients keep
working. The command line run by that user finds the file itself (:func:`herder.credential.cli_token`), as ``docker``
finds its socket. Only ``[agent] insecure_no_token = true`` opens a loopback agent again.

A file rather than a socket only root can open: the Nomad-compatible listener, the web UI and remote
clients take a token anyway, and one credential serves them all.
"""

from __future__ import annotations

import logging
import os
import secrets
from dataclasses import replace
from pathlib import Path

from herder.client.config import Config
from herder.client.taskdir import make_data_dir
from herder.credential import TOKEN_FILE, token_of
from herder.errors import ConfigError
from herder.sdk.safefs import UnsafePathError, open_file, publish_once, safe_root

log = logging.getLogger("herder.agent")

TOKEN_BYTES = 32
"""256 bits: ``secrets.token_urlsafe`` makes 43 characters of them."""
INSECURE_WARNING = ("[agent] insecure_no_token = true: the agent takes requests without a token; every user "
                    "and every task of this host can run jobs through it, as root")


def with_token(config: Config) -> Config:
    """``config`` with the token every request must carry: the configured one, else the data dir's
    (made at the first start); unchanged, with a warning, under ``[agent] insecure_no_token``.

    :raises ConfigError: the token file cannot be made, or is not one to trust (naming why).
    """
    if config.token:
        return config
    if config.agent.insecure_no_token:
        log.warning("%s", INSECURE_WARNING)
        return config
    where = config.data_dir / TOKEN_FILE
    try:
        return replace(config, token=agent_token(config.data_dir))
    except (UnsafePathError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, UnsafePathError) else str(exc)
        raise ConfigError(f"{where}: {reason}; remove it, and the agent makes a new token") from None
    except OSError as exc:
        raise ConfigError(f"{where}: {exc.strerror or exc}") from None


def agent_token(data_dir: Path) -> str:
    """The token in ``data_dir``'s token file, made first if there is none.

    The file must be a regular file (not a link) of this process's user that no one else may read or
    write; a new one is written to a temporary name (``O_EXCL``, 0600) and linked into place, so a
    reader never sees a part of it and an agent starting at the same time keeps the one made first.

    :raises UnsafePathError: the file is a link or not a regular file.
    :raises ValueError: the file is another's, or open to others, or holds no token.
    """
    make_data_dir(data_dir)
    with safe_root(data_dir) as fd:
        try:
            return _read(fd)
        except FileNotFoundError:
            pass
        token = secrets.token_urlsafe(TOKEN_BYTES)
        if not publish_once(fd, TOKEN_FILE, token.encode() + b"\n"):
            return _read(fd)  # another start made one meanwhile
        log.info("made the agent's token: %s", data_dir / TOKEN_FILE)
        return token


def _read(dir_fd: int) -> str:
    fd = open_file(dir_fd, TOKEN_FILE)
    try:
        return token_of(fd, own=True)
    finally:
        os.close(fd)
