"""The supervisor daemon: one per data dir, owning the processes of every task of it.

It outlives the herder process that started it. It starts the tasks'
processes as its own children, each leading its own process group; moves
their stdout and stderr into the rotating log files; records how they exit;
signals and stops them on request; and tells the client that owns a process
when it exits. See :mod:`herder.supervisor.protocol` for the wire format and
:class:`herder.supervisor.Supervisor` for the operations.

One thread runs one event loop (:mod:`~herder.supervisor.loop`, with the
timers) over the listening socket, the client connections
(:mod:`~herder.supervisor.sessions`, whose requests go to
:mod:`~herder.supervisor.dispatch`), each child's two output pipes (a
:mod:`~herder.supervisor.pump` each) and a pidfd per child
(:mod:`~herder.supervisor.processes`). Output is spliced from the pipes into
the files; what is not goes through one shared buffer, so a task costs a few
small objects and file descriptors, never a buffer or a thread of its own.

Standard library only (and the supervisor's own stdlib-only modules): this
process stays small for as long as any task runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import logging.handlers
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from herder.supervisor.dispatch import Dispatcher
from herder.supervisor.loop import Loop
from herder.supervisor.processes import Proc, Processes
from herder.supervisor.protocol import (
    LOCK_NAME,
    SOCKET_NAME,
    Squatted,
    check_socket_name,
    log_path,
    open_state_dir,
    peer_credentials,
    socket_address,
    state_dir,
)
from herder.supervisor.sessions import Sessions

log = logging.getLogger("herder.supervisor")

START_GRACE = 1.0
"""How long a supervisor with nothing to do waits after starting for its first client."""

MAX_LOG_SIZE = 1024 * 1024
"""The size at which the supervisor's log is rotated (to ``supervisor.log.1``, and so on)."""

LOG_BACKUPS = 2
"""How many rotated supervisor logs are kept."""

STALE_PROBE_TIMEOUT = 1.0
"""How long a supervisor starting waits for a socket left at its name to answer (a dead one's refuses at once)."""


class Listener:
    """The supervisor's listening socket, with the lock and the directory that go with it."""

    def __init__(self, sock: socket.socket, dir_fd: int, lock_fd: int) -> None:
        self.sock = sock
        self._dir_fd = dir_fd
        self._lock_fd = lock_fd

    def close(self) -> None:
        """Stop listening and remove the socket, while the lock still keeps any other supervisor away."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(SOCKET_NAME, dir_fd=self._dir_fd)
        self.sock.close()
        os.close(self._lock_fd)
        os.close(self._dir_fd)


def bind(data_dir: Path) -> Listener | None:
    """Listen on ``data_dir``'s supervisor socket; None when another supervisor of it runs.

    The lock file, locked for as long as the supervisor lives (a killed one
    lets go of it with its last descriptor), makes it a singleton. A socket
    found at the name with the lock free is a dead supervisor's, and is
    replaced; anything else there is refused.

    :raises Squatted: when the directory or the socket's name is not this user's own, or something
        that is not a supervisor of the data dir listens there.
    """
    dir_fd = open_state_dir(data_dir)
    lock_fd = -1
    try:
        lock_fd = os.open(LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock_fd)
            os.close(dir_fd)
            return None
        if check_socket_name(dir_fd, data_dir):
            _remove_stale_socket(dir_fd, data_dir)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(socket_address(dir_fd))
            sock.listen(128)
        except BaseException:
            sock.close()
            raise
    except BaseException:
        if lock_fd >= 0:
            os.close(lock_fd)
        os.close(dir_fd)
        raise
    sock.setblocking(False)
    return Listener(sock, dir_fd, lock_fd)


def _remove_stale_socket(dir_fd: int, data_dir: Path) -> None:
    """Remove the socket a dead supervisor left, unless something listens on it all the same."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(STALE_PROBE_TIMEOUT)
        try:
            probe.connect(socket_address(dir_fd))
        except ConnectionRefusedError:
            os.unlink(SOCKET_NAME, dir_fd=dir_fd)
            return
        except TimeoutError:  # a backlog full of connections nobody accepts: a listener all the same
            pid = uid = None
        else:
            pid, uid, _ = peer_credentials(probe)
    raise Squatted(f"process {pid} of uid {uid} listens on {state_dir(data_dir) / SOCKET_NAME}, but it is not "
                   "the supervisor of this data dir (which holds its lock file): stop it or remove the socket")


class Server:
    """The supervisor: its processes, the sessions of its clients, and the loop that serves them.

    :meth:`run` returns once it is idle. Each process goes into a cgroup of
    its own under ``cgroups`` (a writable cgroup hierarchy), or, with None,
    is tracked by session and parentage.
    """

    def __init__(self, data_dir: Path, listener: Listener, cgroups: Path | None = None) -> None:
        self._listener = listener
        self._loop = Loop()
        self._procs = Processes(self._loop, data_dir, cgroups, ended=self._ended)
        self._sessions = Sessions(self._loop, listener.sock, self._procs, data_dir, Dispatcher(self._procs).handle)
        self._started = time.monotonic()

    def run(self) -> None:
        """Serve until there is no process, no exit record and no client left."""
        self._loop.call_later(START_GRACE, lambda: None)  # wakes the loop to see whether a client came
        while not self._idle():
            self._loop.run_once()
        self._sessions.close()
        self._loop.close()
        self._listener.close()
        self._procs.close()

    def _idle(self) -> bool:
        return (self._procs.idle and not self._sessions.conns
                and time.monotonic() - self._started >= START_GRACE)

    def _ended(self, proc: Proc) -> None:
        self._sessions.process_ended(proc)


def serve(data_dir: Path, cgroups: Path | None = None) -> int:
    """Run the supervisor of ``data_dir`` (``python -m herder.supervisor DATA_DIR``).

    Its processes get cgroups under ``cgroups`` (see :class:`Server`).

    Returns once the socket listens (a detached child serves from then on),
    or at once, with 0, when another supervisor of ``data_dir`` is running:
    whoever started it can connect as soon as this returns. Returns 1, saying
    why on stderr, when a name of the supervisor is squatted.
    """
    data_dir = data_dir.resolve()
    try:
        listener = bind(data_dir)
    except Squatted as err:
        print(f"herder supervisor: {err}", file=sys.stderr)
        return 1
    if listener is None:
        return 0
    if os.fork() > 0:
        os._exit(0)
    os.setsid()  # leave the starter's session: no terminal, no signal meant for its process group
    os.chdir("/")
    _setup_logging(data_dir)
    # Tasks must outlive a Ctrl-C or a hangup that hits the whole process group that started us.
    # Handlers, unlike SIG_IGN, are reset by exec: the tasks get these signals' defaults, even when
    # whoever started us ignored them (nohup ignores SIGHUP, and a shell's trap could not undo it).
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _ignore_signal)
    log.info("supervisor of %s started", data_dir)
    Server(data_dir, listener, cgroups).run()
    log.info("supervisor of %s exits: nothing left to supervise", data_dir)
    return 0


def _ignore_signal(signum: int, _frame: object) -> None:
    log.info("ignored signal %d", signum)


class LogFile(logging.handlers.RotatingFileHandler):
    """The supervisor's log, rotated at :data:`MAX_LOG_SIZE`, :data:`LOG_BACKUPS` old ones kept.

    The descriptors ``follow`` (stdout and stderr: what Python prints of a
    crash goes there) are pointed at each new file, so that no output goes
    on growing a rotated one.
    """

    def __init__(self, path: Path, follow: tuple[int, ...] = ()) -> None:
        self._follow = follow
        super().__init__(path, maxBytes=MAX_LOG_SIZE, backupCount=LOG_BACKUPS)

    def _open(self) -> Any:
        stream = super()._open()
        for fd in self._follow:
            os.dup2(stream.fileno(), fd)
        return stream


def _setup_logging(data_dir: Path) -> None:
    """Log to the data dir's supervisor log, with stdin from /dev/null and stdout, stderr to the log too."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    handler = LogFile(log_path(data_dir), follow=(1, 2))
    handler.setFormatter(logging.Formatter("%(asctime)s supervisor[%(process)d] %(levelname)s %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
