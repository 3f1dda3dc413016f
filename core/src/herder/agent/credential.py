"""The agent's credential when its configuration sets no ``token``: ``<data_dir>/agent.token``.

An agent on loopback is still reached by every account of the host and by every task that shares
the host's network, and it runs jobs as root: it needs a credential there too. Without a configured
``token`` it makes one at its first start (256 random bits, url-safe) and keeps it in a file of its
data dir that only its own user (root) can read; later starts use the same one, so clients keep
working. The command line run by that user finds the file itself (:func:`cli_token`), as ``docker``
finds its socket. Only ``[agent] insecure_no_token = true`` opens a loopback agent again.

A file rather than a socket only root can open: the Nomad-compatible listener, the web UI and remote
clients take a token anyway, and one credential serves them all.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import stat
from dataclasses import replace
from pathlib import Path

from herder.client.config import Config, default_data_dir, load_config
from herder.errors import ConfigError
from herder.sdk.safefs import UnsafePathError, open_file, safe_root

log = logging.getLogger("herder.agent")

TOKEN_FILE = "agent.token"
TOKEN_BYTES = 32
"""256 bits: ``secrets.token_urlsafe`` makes 43 characters of them."""
_TOKEN = re.compile(r"[A-Za-z0-9_-]{43,256}")
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
    try:
        return replace(config, token=agent_token(config.data_dir))
    except UnsafePathError as exc:
        raise ConfigError(f"{config.data_dir / TOKEN_FILE}: {exc.reason}; remove it, and the agent makes "
                          "a new token") from None
    except OSError as exc:
        raise ConfigError(f"{config.data_dir / TOKEN_FILE}: {exc.strerror or exc}") from None


def agent_token(data_dir: Path) -> str:
    """The token in ``data_dir``'s token file, made first if there is none.

    The file must be a regular file (not a link) of this process's user that no one else may read or
    write; a new one is written to a temporary name (``O_EXCL``, 0600) and linked into place, so a
    reader never sees a part of it and an agent starting at the same time keeps the one made first.

    :raises UnsafePathError: the file is a link, not a regular file, or another's, or open to others,
        or holds no token.
    """
    from herder.client.taskdir import make_data_dir  # the client's modules: the command line needs none

    make_data_dir(data_dir)
    with safe_root(data_dir) as fd:
        try:
            return _read(fd, check=True)
        except FileNotFoundError:
            pass
        token = secrets.token_urlsafe(TOKEN_BYTES)
        temp = f".{TOKEN_FILE}.{secrets.token_hex(6)}.tmp"
        file = open_file(fd, temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            try:
                os.fchmod(file, 0o600)
                os.write(file, token.encode() + b"\n")
                os.fsync(file)
            finally:
                os.close(file)
            os.link(temp, TOKEN_FILE, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
        except FileExistsError:
            return _read(fd, check=True)  # another start made one meanwhile
        finally:
            os.unlink(temp, dir_fd=fd)
        os.fsync(fd)
        log.info("made the agent's token: %s", data_dir / TOKEN_FILE)
        return token


def _read(dir_fd: int, *, check: bool) -> str:
    """The token in the token file of ``dir_fd``; with ``check``, refused unless the file is this user's alone."""
    fd = open_file(dir_fd, TOKEN_FILE)
    try:
        status = os.fstat(fd)
        if check and status.st_uid != os.geteuid():
            raise UnsafePathError(TOKEN_FILE, f"owned by uid {status.st_uid}, not by the agent's user "
                                              f"(uid {os.geteuid()})")
        if check and status.st_mode & 0o077:
            raise UnsafePathError(TOKEN_FILE, f"mode {stat.S_IMODE(status.st_mode):04o}: other users may "
                                              "read or change it (0600 is needed)")
        text = os.read(fd, 512).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    if not _TOKEN.fullmatch(text):
        raise UnsafePathError(TOKEN_FILE, "holds no token (43 to 256 characters of A-Z a-z 0-9 _ -)")
    return text


def read_token(data_dir: Path) -> str:
    """The token in ``data_dir`` if this user may read it, else ``""`` (the agent then says how to get it)."""
    try:
        with safe_root(data_dir) as fd:
            return _read(fd, check=False)
    except (OSError, UnsafePathError):
        return ""


def cli_token(config_path: Path | None) -> str:
    """The token the command line sends when ``HERDER_TOKEN`` is not set: the configured one of
    ``config_path`` if it sets one, else the one in its data dir, else in the agent's default data
    dir (``/var/lib/herder`` for root).

    :raises ConfigError: the configuration cannot be read.
    """
    if config_path is None:
        return read_token(default_data_dir(agent=True))
    config = load_config(config_path, agent=True)
    return config.token or read_token(config.data_dir)
