"""``git::`` artifact sources, fetched with the ``git`` command line and unpacked like an archive.

herder runs git as root on a URL a job's author chose, so git runs with
nothing of the host's: no system or global configuration
(``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL=/dev/null``, ``HOME`` an empty
directory of its own), no inherited environment (no ``SSH_AUTH_SOCK``, no
``GIT_*``), no terminal prompt, no hooks (``core.hooksPath=/dev/null``), no
submodules, and only the transport of the source's own scheme
(``protocol.allow=never`` and ``protocol.<scheme>.allow=always``), so
``ext::`` and every other remote helper is refused by git itself and an https
source cannot be redirected to http.

The repository is fetched into a bare repository in herder's staging
directory: git never checks out a work tree, so no path, link or attribute
of the repository is ever written by git. The commit's tree is then streamed
by ``git archive`` as a tar archive into :func:`~.archives.unpack_tar_stream`,
which checks every member as it does a downloaded archive (links only inside
the destination, limits on bytes and members). The archive is made of the
tree, not the commit, so ``export-subst`` attributes expand nothing. ``.git``
is not part of the result.

Credentials never reach git's command line, where every user of the host
reads them (``/proc/<pid>/cmdline``, ``ps``), nor the repository's files: the
user information of an http(s) source is taken out of the URL git is given
(and every URL git prints, in errors or in ``FETCH_HEAD``) and handed over by
a credential helper, a shell function in git's configuration that prints
variables of git's environment (``/proc/<pid>/environ`` is readable only by
the process's owner, root) and answers only for the source's own protocol,
host and port, so a redirect elsewhere gets nothing. The job's ssh key is a
0600 file of the staging directory, named in ``GIT_SSH_COMMAND``. git runs
with no ``GIT_TRACE*`` variable, which could print a request's headers.

Every git process runs in a process group of its own, killed when the
artifact's deadline passes, when the fetched repository grows over the
download limit, or when the task is being stopped (:attr:`GitLimits.stop`).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from herder.client.hooks.archives import Limits, unpack_tar_stream
from herder.errors import HerderError

WATCH_INTERVAL = 0.2  # seconds between two checks of a git process's deadline and size
PROGRESS_POLL = 0.5  # seconds between two progress reports of a fetch
_PROGRESS = re.compile(rb"Receiving objects:\s+\d+% \((\d+)/(\d+)\)")
_STDERR_KEPT = 4096
_ABBREVIATED = re.compile(r"[0-9a-fA-F]{4,39}")
CREDENTIAL_HELPER = (
    '!f() { test "$1" = get || return 0; '
    'while IFS= read -r line && test -n "$line"; do case "$line" in '
    'protocol=*) protocol=${line#protocol=} ;; host=*) host=${line#host=} ;; esac; done; '
    'test "$protocol://$host" = "$HERDER_GIT_ORIGIN" || return 0; '
    "printf 'username=%s\\npassword=%s\\n' \"$HERDER_GIT_USERNAME\" \"$HERDER_GIT_PASSWORD\"; }; f"
)
"""git's ``credential.helper``: the source's user and password from git's environment, for the
source's origin only (git gives a helper its question on stdin: ``protocol=``, ``host=``, ...)."""


class GitError(HerderError):
    """A git source cannot be had; ``recoverable`` when trying again may help."""

    def __init__(self, message: str, recoverable: bool = True) -> None:
        super().__init__(message)
        self.recoverable = recoverable


@dataclass(frozen=True)
class GitSource:
    """A ``git::`` source: the repository's URL (options taken out) and go-getter's options."""

    url: str
    scheme: str
    ref: str = ""
    depth: int = 0
    sshkey: str = ""  # base64 of a private key


@dataclass(frozen=True)
class GitLimits:
    """What one fetch may cost: bytes of the fetched repository, the unpacked tree's
    :class:`~.archives.Limits`, the monotonic time by which all of it is done, and the
    event that ends it at once (the task is being stopped)."""

    max_download_size: int
    unpacked: Limits
    deadline: float
    known_hosts: Path
    stop: threading.Event = field(default_factory=threading.Event)


Progress = Callable[[int, int], None]
"""Told (objects received, objects in all) as the fetch goes."""


def fetch_tree(source: GitSource, work: Path, out: Path, limits: GitLimits, progress: Progress) -> None:
    """Fetch ``source`` into a bare repository under ``work`` (a private, empty directory of
    herder's) and unpack the tree of its ``ref`` (default: the remote's HEAD) into ``out``.

    :raises GitError: git failed, was killed at a limit, or ``source`` is invalid.
    :raises ArchiveError: the tree breaks a limit or holds a link out (:mod:`.archives`).
    """
    git = _Git(source, work, limits)
    git.run("init", "--bare", "--quiet", "--template=", str(git.repo))  # no sample hooks, no templates
    fetch = ["--git-dir", str(git.repo), "fetch", "--progress", "--no-tags", "--no-recurse-submodules"]
    if source.depth:
        fetch.append(f"--depth={source.depth}")
    if source.ref and _ABBREVIATED.fullmatch(source.ref) and not source.depth:
        # An abbreviated commit cannot be asked for by name: fetch every branch and tag, find it here.
        git.fetch(*fetch, "--", git.url, "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*",
                  progress=progress)
        wanted = source.ref
    else:
        git.fetch(*fetch, "--", git.url, source.ref or "HEAD", progress=progress)
        wanted = "FETCH_HEAD"
    tree = git.output("--git-dir", str(git.repo), "rev-parse", "--verify", "--quiet", "--end-of-options",
                      f"{wanted}^{{tree}}")
    if not tree:
        raise GitError(f"{git.url}: no commit {source.ref!r}", recoverable=False)
    with git.process("--git-dir", str(git.repo), "archive", "--format=tar", tree, stdout=True) as archive:
        assert archive.stdout is not None
        unpack_tar_stream(archive.stdout, out, limits.unpacked)
        # What follows the archive's end marker is padding: read it so git can exit.
        while archive.stdout.read(1 << 16):
            pass


def ssh_command(key: Path | None, known_hosts: Path) -> str:
    """``GIT_SSH_COMMAND``: ssh with none of root's own configuration, keys or agent, the job's
    key if it gave one, and only hosts ``known_hosts`` already knows."""
    options = {
        "BatchMode": "yes",
        "IdentitiesOnly": "yes",
        "IdentityAgent": "none",
        "IdentityFile": str(key) if key else "none",
        "StrictHostKeyChecking": "yes",
        "UserKnownHostsFile": str(known_hosts),
        "GlobalKnownHostsFile": str(known_hosts),
        "UpdateHostKeys": "no",
    }
    return shlex.join(["ssh", "-F", "/dev/null", *(arg for name, value in options.items()
                                                    for arg in ("-o", f"{name}={value}"))])


def without_credentials(url: str) -> tuple[str, dict[str, str]]:
    """``url`` without its user information, and the variables :data:`CREDENTIAL_HELPER` reads
    to give it to git (none when ``url`` has none). An ssh source keeps its user, which is no
    secret, and may not have a password: ssh would never use it (the job gives a key).

    :raises GitError: the user information cannot be handed over as it is written.
    """
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, {}
    user, colon, password = userinfo.partition(":")
    if parts.scheme == "ssh":
        if colon:
            raise GitError("an ssh source takes a key (options.sshkey), not a password in its URL",
                           recoverable=False)
        return url, {}
    username, password = unquote(user), unquote(password)
    if any(c in value for value in (username, password) for c in "\0\n"):
        raise GitError("the source's user or password holds a line break or a NUL, which git cannot be given",
                       recoverable=False)
    clean = urlunsplit(parts._replace(netloc=host))
    return clean, {"HERDER_GIT_ORIGIN": f"{parts.scheme}://{host}", "HERDER_GIT_USERNAME": username,
                   "HERDER_GIT_PASSWORD": password}


class _Git:
    """git processes for one fetch, with its private environment and configuration."""

    def __init__(self, source: GitSource, work: Path, limits: GitLimits) -> None:
        self.source, self.limits, self.work = source, limits, work
        self.url, credentials = without_credentials(source.url)
        self.repo = work / "repo.git"
        home = work / "home"
        home.mkdir(mode=0o700)
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": str(home),
            "LC_ALL": "C",  # progress lines are read in English
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_SSH_COMMAND": ssh_command(self._key(source, work), limits.known_hosts),
            **credentials,
        }
        # The certificate authorities herder's own HTTPS downloads trust (OpenSSL's variables, which httpx reads).
        for openssl, git in (("SSL_CERT_FILE", "GIT_SSL_CAINFO"), ("SSL_CERT_DIR", "GIT_SSL_CAPATH")):
            if openssl in os.environ:
                self.env[git] = os.environ[openssl]
        self.config = [
            "protocol.allow=never", f"protocol.{source.scheme}.allow=always",
            "core.hooksPath=/dev/null", "core.fsmonitor=false",
            "credential.helper=", *([f"credential.helper={CREDENTIAL_HELPER}"] if credentials else []),
            "submodule.recurse=false", "fetch.recurseSubmodules=false",
            "fetch.unpackLimit=1",  # one pack, received by index-pack, which reports progress
            "tar.umask=022",  # files 0644, executables 0755 (git archive's default leaves them group-writable)
        ]

    @staticmethod
    def _key(source: GitSource, work: Path) -> Path | None:
        """The job's private key in a 0600 file of herder's staging directory, or None."""
        if not source.sshkey:
            return None
        try:
            key = base64.b64decode(source.sshkey, validate=True)
        except (binascii.Error, ValueError):
            raise GitError("options.sshkey is not base64", recoverable=False) from None
        path = work / "sshkey"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(key if key.endswith(b"\n") else key + b"\n")  # ssh wants the key's last line ended
        return path

    def run(self, *args: str) -> None:
        with self.process(*args):
            pass

    def output(self, *args: str) -> str:
        with self.process(*args, stdout=True, check=False) as proc:
            assert proc.stdout is not None
            text = proc.stdout.read(4096).decode().strip()
        return text if proc.returncode == 0 else ""

    def fetch(self, *args: str, progress: Progress) -> None:
        """``git fetch``, watched: the repository may not grow over the download limit."""
        with self.process(*args, watch=True) as proc:
            while True:
                try:
                    proc.wait(PROGRESS_POLL)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if proc.progress:
                    progress(*proc.progress)
        if proc.progress:
            progress(*proc.progress)
        if _size(self.repo) > self.limits.max_download_size:  # what arrived since the watchdog last looked
            raise self._too_big()

    def _too_big(self) -> GitError:
        return GitError(f"the repository is over the limit of {self.limits.max_download_size} bytes "
                        f"([plugin.artifacts] max_download_size)", recoverable=False)

    @contextmanager
    def process(self, *args: str, stdout: bool = False, watch: bool = False,
                check: bool = True) -> Iterator[_Process]:
        """A git process; killed (its whole group) if the body fails, the deadline passes,
        or (``watch``) the repository grows over the limit.

        :raises GitError: git failed (``check``), or was killed at a limit.
        """
        command = ["git", *(arg for setting in self.config for arg in ("-c", setting)), *args]
        proc = _Process(command, self.env, self.work, stdout)
        watchdog = threading.Thread(target=self._watch, args=(proc, watch), daemon=True)
        reader = threading.Thread(target=proc.read_stderr, daemon=True)
        watchdog.start()
        reader.start()
        try:
            yield proc
            proc.wait()
        except BaseException:
            proc.kill_group()
            if proc.stopped is None:
                raise
        finally:
            proc.kill_if_running()
            proc.done.set()
            reader.join()
            watchdog.join()
            if proc.stdout is not None:
                proc.stdout.close()
        if proc.stopped is not None:
            raise proc.stopped
        if check and proc.returncode != 0:
            raise GitError(f"git {args[2] if args[0] == '--git-dir' else args[0]} {self.url}: "
                           f"{proc.last_error() or f'exit status {proc.returncode}'}")

    def _watch(self, proc: _Process, watch: bool) -> None:
        while not proc.done.wait(WATCH_INTERVAL):
            if self.limits.stop.is_set():
                proc.stop(GitError("the task is being stopped"))
            elif time.monotonic() > self.limits.deadline:
                proc.stop(GitError("not done within the artifact's deadline ([plugin.artifacts] download_timeout)"))
            elif watch and _size(self.repo) > self.limits.max_download_size:
                proc.stop(self._too_big())


class _Process(subprocess.Popen[bytes]):
    """A git process, why it was killed, the end of what it said, its progress."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path, stdout: bool) -> None:
        super().__init__(command, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE if stdout else subprocess.DEVNULL, stderr=subprocess.PIPE,
                         start_new_session=True)
        self.done = threading.Event()
        self.stopped: GitError | None = None
        self.progress: tuple[int, int] | None = None
        self._stderr = b""

    def stop(self, reason: GitError) -> None:
        self.stopped = reason
        self.kill_group()
        self.done.set()

    def kill_group(self) -> None:
        """The whole group: git's helpers (``git-remote-https``, ssh) die with it."""
        with suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)

    def kill_if_running(self) -> None:
        if self.poll() is None:
            self.kill_group()
        self.wait()

    def read_stderr(self) -> None:
        assert self.stderr is not None
        with self.stderr:
            for chunk in iter(lambda: os.read(self.stderr.fileno(), 4096), b""):  # type: ignore[union-attr]
                self._stderr = (self._stderr + chunk)[-_STDERR_KEPT:]
                if found := _PROGRESS.findall(chunk):
                    current, total = found[-1]
                    self.progress = (int(current), int(total))

    def last_error(self) -> str:
        lines = [line.strip() for line in re.split(rb"[\r\n]", self._stderr) if line.strip()]
        errors = [line for line in lines if line.startswith((b"fatal:", b"error:"))]
        # The first error is the cause ("dubious ownership"), later ones its consequences.
        return (errors[:1] or lines[-1:] or [b""])[0].decode(errors="replace")


def _size(path: Path) -> int:
    """Bytes of the files under ``path`` (gone files, removed as git works, count for nothing)."""
    total = 0
    for directory, _, files in os.walk(path):
        for name in files:
            with suppress(FileNotFoundError):
                total += os.lstat(os.path.join(directory, name)).st_size
    return total
