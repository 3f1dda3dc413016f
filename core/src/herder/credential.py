"""Where this host's agent keeps its token, read as the command line reads it.

The agent makes and checks the file (:mod:`herder.agent.credential`); the command line only reads
it, and imports nothing of the agent or the client for that: its commands start in tens of
milliseconds.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path

from herder.errors import ConfigError

TOKEN_FILE = "agent.token"
_TOKEN = re.compile(r"[A-Za-z0-9_-]{43,256}")


def default_data_dir(agent: bool = False) -> Path:
    """``/var/lib/herder`` for the agent as root, else ``$XDG_DATA_HOME/herder``."""
    if agent and os.geteuid() == 0:
        return Path("/var/lib/herder")
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "herder"


def token_of(fd: int, *, own: bool) -> str:
    """The token in the open token file ``fd``; with ``own``, only if the file is this user's alone.

    :raises ValueError: naming why the file is refused.
    """
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        raise ValueError("not a regular file")
    if own and status.st_uid != os.geteuid():
        raise ValueError(f"owned by uid {status.st_uid}, not by the agent's user (uid {os.geteuid()})")
    if own and status.st_mode & 0o077:
        raise ValueError(f"mode {stat.S_IMODE(status.st_mode):04o}: other users may read or change it "
                         "(0600 is needed)")
    text = os.read(fd, 512).decode("ascii", "replace").strip()
    if not _TOKEN.fullmatch(text):
        raise ValueError("holds no token (43 to 256 characters of A-Z a-z 0-9 _ -)")
    return text


def read_token(data_dir: Path) -> str:
    """The token in ``data_dir`` if this user may read it, else ``""`` (the agent then says how to get it).
    A link there is not followed."""
    try:
        fd = os.open(data_dir / TOKEN_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        return token_of(fd, own=False)
    except (OSError, ValueError):
        return ""
    finally:
        os.close(fd)


def cli_token(config_path: Path | None) -> str:
    """The token the command line sends when ``HERDER_TOKEN`` is not set: the one the configuration
    ``config_path`` sets, else the one in its data dir, else in the agent's default data dir
    (``/var/lib/herder`` for root), as the agent computes it.

    :raises ConfigError: the configuration cannot be read.
    """
    if config_path is None:
        return read_token(default_data_dir(agent=True))
    try:
        raw = tomllib.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{config_path}: cannot read: {exc}") from None
    data_dir = Path(str(raw.get("data_dir") or default_data_dir(agent=True))).expanduser().absolute()
    return str(raw.get("token") or "") or read_token(data_dir)
