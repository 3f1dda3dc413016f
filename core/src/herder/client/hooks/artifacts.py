"""Artifacts: what a task downloads into its directory before it starts.

A built-in lifecycle plugin. In ``herder_task_prestart`` it fetches each of
the task's ``artifact`` stanzas with the fetcher of its scheme (http and
https through httpx, ``file`` sources only under the directories
``[plugin.artifacts] file_dirs`` names, go-getter's ``git::`` sources with
the ``git`` command line, :mod:`.git`), checks the checksum, unpacks
archives by extension (:mod:`.archives`), and moves the result into the
destination, which must stay inside the task directory.

Everything happens in a staging directory first, so a failure at any step
leaves nothing in the destination. The staging directory is made in the
allocation's own directory (``allocs/<id>``, the parent of the shared
``alloc`` directory and of every task directory): herder made it and no task
can write it, yet it is on the filesystem of the destination, so the result
is renamed into place, not copied. The task can write the destination,
though: it is reached from the task (or shared) directory through directory
descriptors, one component at a time without following links
(:mod:`herder.sdk.safefs`), and the merge into it does the same. A task that
swaps a directory on the way for a link is refused, never followed.

An HTTP download has an overall deadline (``download_timeout``) besides the
timeout between two reads, so a server trickling bytes cannot hold a task's
start forever; redirects are followed by hand, at most :data:`MAX_REDIRECTS`,
and never from https to http.

Credentials a source carries (a URL's password, go-getter's ``sshkey``) are
shown nowhere: events and errors name the source as :func:`herder.sdk.redact.redact_url`
shows it, and any trace of a secret in what a fetcher said is replaced by
``redacted``. An http(s) download's credentials stay in herder's process
(httpx makes its ``Authorization`` header); git is given them by
:mod:`.git` without a command line. A task being stopped
(``ctx.stopping``) ends its download at once: git's processes are killed,
the HTTP response closed.

A failed download emits ``Failed Artifact Download`` and raises
:class:`herder.RecoverableError`, so the start is retried under the restart
policy; what retrying cannot fix (an unsafe archive, a source outside the
allowed directories, a limit) fails the task. Each artifact fetched is noted
in ``ctx.created`` (kind ``artifact``), which is kept with the task's state:
a restarted task does not fetch it again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import posixpath
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Coroutine
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import httpx

from herder import events, hookimpl
from herder.client.hooks import git
from herder.client.hooks.archives import (
    ArchiveError,
    ArchiveKind,
    Limits,
    UnsafeArchive,
    archive_kind,
    copy_capped,
    merge_into,
    unpack,
)
from herder.context import TaskContext
from herder.errors import ConfigError, HerderError, RecoverableError
from herder.jobspec.build import GIT_OPTIONS, GIT_SCHEMES
from herder.model import Artifact, Task
from herder.sdk.durations import format_duration, parse_duration
from herder.sdk.paths import ALLOC_SHARED, locate_in_task_dir
from herder.sdk.redact import redact, redact_url, secrets_of
from herder.sdk.safefs import UnsafePathError, open_beneath, safe_root

FETCHED = "artifact"
"""The ``ctx.created`` kind noting an artifact already in place."""

PROGRESS_INTERVAL = 0.5  # seconds between two progress events of one download
STOP_POLL = 0.2  # seconds between two checks of whether an HTTP download's task is being stopped
MAX_REDIRECTS = 10
"""Redirects one download follows, as Go's HTTP client (go-getter's) does."""
_CHUNK = 1 << 16
_HASHES = ("md5", "sha1", "sha256", "sha512")
_MB = 1 << 20


class ArtifactError(HerderError):
    """An artifact cannot be had; ``recoverable`` when trying again may help."""

    def __init__(self, message: str, recoverable: bool = True) -> None:
        super().__init__(message)
        self.recoverable = recoverable


@dataclass(frozen=True)
class ArtifactsConfig:
    """``[plugin.artifacts]``: where ``file`` sources may come from, the limits (bytes,
    members of one archive, seconds between two reads and for a whole download), and the
    only ssh host keys a ``git::ssh://`` source is trusted with."""

    file_dirs: tuple[Path, ...] = ()
    max_download_size: int = 1024 * _MB
    max_unpacked_size: int = 4096 * _MB
    max_files: int = 100_000
    timeout: float = 30.0
    download_timeout: float = 30 * 60.0  # as Nomad's artifact.http_read_timeout
    ssh_known_hosts: Path = Path("/etc/ssh/ssh_known_hosts")

    @classmethod
    def from_table(cls, table: dict[str, Any]) -> ArtifactsConfig:
        """The configuration from its TOML table.

        :raises ConfigError: an unknown key or a value of the wrong kind.
        """
        known = {"file_dirs", "max_download_size", "max_unpacked_size", "max_files", "timeout", "download_timeout",
                 "ssh_known_hosts"}
        unknown = sorted(set(table) - known)
        if unknown:
            raise ConfigError(f"unknown key(s) in [plugin.artifacts]: {', '.join(unknown)}")
        try:
            dirs = table.get("file_dirs", [])
            if not isinstance(dirs, list):
                raise TypeError("file_dirs must be a list of directories")
            config = cls(
                file_dirs=tuple(Path(str(d)).expanduser().absolute() for d in dirs),
                max_download_size=int(table.get("max_download_size", cls.max_download_size)),
                max_unpacked_size=int(table.get("max_unpacked_size", cls.max_unpacked_size)),
                max_files=int(table.get("max_files", cls.max_files)),
                timeout=parse_duration(table.get("timeout", cls.timeout)),
                download_timeout=parse_duration(table.get("download_timeout", cls.download_timeout)),
                ssh_known_hosts=Path(str(table.get("ssh_known_hosts", cls.ssh_known_hosts))).expanduser().absolute(),
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"[plugin.artifacts]: {exc}") from None
        if (min(config.max_download_size, config.max_unpacked_size, config.max_files) <= 0
                or min(config.timeout, config.download_timeout) <= 0):
            raise ConfigError("[plugin.artifacts]: limits and timeouts must be positive")
        return config


@dataclass(frozen=True)
class _Source:
    """An artifact's source with go-getter's query options (``?checksum=...&archive=false``,
    and ``ref``, ``depth``, ``sshkey`` of a git source) taken out and merged under the
    stanza's own ``options``; ``getter`` is go-getter's forced getter (``git::...``) or ""."""

    url: str
    scheme: str
    name: str
    checksum: str
    archive: bool
    path: str  # of a file source, as written (a bare path) or from the URL
    getter: str = ""
    options: dict[str, str] = field(default_factory=dict)


def _source(artifact: Artifact) -> _Source:
    getter, url = "", artifact.source
    if "::" in url.split("://", 1)[0]:
        getter, url = url.split("::", 1)
        getter = getter.lower()
    taken = GIT_OPTIONS if getter == "git" else ("checksum", "archive")
    parts = urlsplit(url) if "://" in url else urlsplit("file://" + url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    options = {key: value for key, value in query if key in taken}
    options |= artifact.options
    rest = urlencode([(key, value) for key, value in query if key not in taken])
    clean = urlunsplit(parts._replace(query=rest))
    path = unquote(parts.path) if "://" in url else url.split("?", 1)[0]
    name = posixpath.basename(path.rstrip("/") if getter else path) or "download"
    if "://" in url:
        scheme = parts.scheme
    elif getter:  # not a URL, or one of git's own transports (``ext::``, ``fd::``)
        scheme = url.split("::", 1)[0] if "::" in url else ""
    else:  # a bare path
        scheme = "file"
    return _Source(clean, scheme.lower(), name, options.get("checksum", ""),
                   str(options.get("archive", "true")).lower() != "false", path, getter, options)


def artifact_key(artifact: Artifact) -> str:
    """Stable identity of an artifact stanza (after interpolation)."""
    fields = [artifact.source, artifact.destination, artifact.mode, sorted(artifact.options.items()),
              sorted(artifact.headers.items())]
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()[:32]


class Fetcher(Protocol):
    """Gets one source's bytes into a new file of herder's staging directory."""

    def fetch(self, source: _Source, headers: dict[str, str], target: Path, ctx: TaskContext) -> None:
        """Write the source to ``target``.

        :raises ArtifactError: it could not (``recoverable`` if trying again may help).
        """


class ArtifactsPlugin:
    """The built-in ``artifacts`` lifecycle plugin."""

    name = "artifacts"

    def __init__(self, config: ArtifactsConfig | None = None) -> None:
        self.config = config or ArtifactsConfig()
        http = HttpFetcher(self.config)
        self.fetchers: dict[str, Fetcher] = {"file": FileFetcher(self.config), "http": http, "https": http}

    def start(self) -> None:
        """Nothing runs in the background."""

    def close(self) -> None:
        """Nothing is kept between downloads."""

    @hookimpl
    def herder_task_prestart(self, task: Task, ctx: TaskContext) -> None:
        fetched = {value for kind, value in ctx.created.items() if kind == FETCHED}
        pending = [(index, a) for index, a in enumerate(task.artifacts) if artifact_key(a) not in fetched]
        if not pending:
            return
        ctx.emit_event(events.DOWNLOADING_ARTIFACTS, "Client is downloading artifacts")
        for index, artifact in pending:
            shown = redact_url(artifact.source)
            try:
                if ctx.stopping.is_set():
                    raise ArtifactError("the task is being stopped")
                self.fetch(artifact, ctx)
            except ArtifactError as exc:
                if ctx.stopping.is_set():  # not a failure of the download: no event, nothing to retry
                    raise RecoverableError(f"stopped while downloading artifact {index} ({shown})") from None
                message = f"artifact {index} ({shown}): {redact(str(exc), artifact_secrets(artifact))}"
                ctx.emit_event(events.FAILED_ARTIFACT_DOWNLOAD, message, source=shown,
                               recoverable=exc.recoverable)
                if exc.recoverable:
                    raise RecoverableError(message) from None
                raise ArtifactError(message, recoverable=False) from None
            ctx.created.add(FETCHED, artifact_key(artifact))

    def fetch(self, artifact: Artifact, ctx: TaskContext) -> None:
        """Fetch one artifact into place.

        :raises ArtifactError: nothing of it was put in place (its message may quote the
            source's credentials: show it through :func:`artifact_secrets`).
        """
        source = _source(artifact)
        fetcher = self.fetchers.get(source.scheme)
        if source.getter == "git":
            if artifact.mode == "file":
                raise ArtifactError("mode file cannot fetch a git repository (use mode any or dir)",
                                    recoverable=False)
        elif source.getter:
            raise ArtifactError(f"herder cannot fetch go-getter's {source.getter}:: sources", recoverable=False)
        elif fetcher is None:
            raise ArtifactError(f"herder cannot fetch {source.scheme!r} sources", recoverable=False)
        try:
            root, destination = locate_in_task_dir(ctx.task_dir, artifact.destination)
        except ValueError as exc:
            raise ArtifactError(f"destination: {exc}", recoverable=False) from None
        # The allocation's directory: herder's, not writable by any task, on the destination's filesystem.
        staging = Path(tempfile.mkdtemp(prefix=".herder-artifact-", dir=ctx.task_dir.alloc_dir.parent))
        try:
            (staging / "in").mkdir()
            out = staging / "out"
            out.mkdir()
            if source.getter == "git":
                self._fetch_git(source, staging / "in", out, ctx)
            else:
                assert fetcher is not None
                download = staging / "in" / source.name
                fetcher.fetch(source, artifact.headers, download, ctx)
                if source.checksum:
                    _verify(download, source.checksum)
                kind = archive_kind(source.name) if source.archive else None
                self._unpack(artifact, source, kind, download, out)
            with safe_root(root) as root_fd, safe_root(out) as out_fd:
                _place(artifact, root_fd, destination, out_fd)
        except UnsafePathError as exc:
            # The path as the job file writes it: beneath the shared directory, it starts with alloc/.
            shown = f"{ALLOC_SHARED}/{exc.path}" if root == ctx.task_dir.alloc_dir else exc.path
            raise ArtifactError(f"destination {artifact.destination}: {shown}: {exc.reason}; not followed") from None
        except UnsafeArchive as exc:
            raise ArtifactError(f"unsafe archive: {exc}", recoverable=False) from None
        except ArchiveError as exc:
            raise ArtifactError(str(exc), recoverable=False) from None
        except git.GitError as exc:
            raise ArtifactError(str(exc), exc.recoverable) from None
        except OSError as exc:
            raise ArtifactError(f"{type(exc).__name__}: {exc}") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _fetch_git(self, source: _Source, work: Path, out: Path, ctx: TaskContext) -> None:
        """Put the tree of a ``git::`` source's ref into the empty directory ``out``
        (:func:`.git.fetch_tree`, working in the private directory ``work``)."""
        url = source.url
        if source.scheme not in GIT_SCHEMES:
            raise ArtifactError(f"git sources are fetched over {', '.join(GIT_SCHEMES)}, not "
                                f"{source.scheme or 'a URL without a scheme'!r}", recoverable=False)
        if source.scheme == "file":
            url = _allowed_file(self.config, Path(source.path)).as_uri()
        depth = source.options.get("depth", "0")
        if not depth.isdigit():
            raise ArtifactError(f"options.depth {depth!r} is not a number of commits", recoverable=False)
        repository = git.GitSource(url, source.scheme, source.options.get("ref", ""), int(depth),
                                   source.options.get("sshkey", ""))
        limits = git.GitLimits(
            max_download_size=self.config.max_download_size,
            unpacked=Limits(max_size=self.config.max_unpacked_size, max_files=self.config.max_files),
            deadline=time.monotonic() + self.config.download_timeout,
            known_hosts=self.config.ssh_known_hosts,
            stop=ctx.stopping,
        )
        progress = _Progress(ctx, source.name, None, unit="objects")

        def report(current: int, total: int) -> None:
            progress.total, progress.current = total, current
            progress.report(final=current == total)

        git.fetch_tree(repository, work, out, limits, report)

    def _unpack(self, artifact: Artifact, source: _Source, kind: ArchiveKind | None, download: Path,
                out: Path) -> None:
        """Put what goes into the destination into the empty directory ``out``: the unpacked
        archive, the file under its own name, or (mode ``file``) the one file as ``out/file``."""
        limits = Limits(max_size=self.config.max_unpacked_size, max_files=self.config.max_files)
        if artifact.mode == "file":
            if kind is not None and kind.container:
                raise ArtifactError(f"mode file cannot unpack a {kind.suffix} archive (use mode any or dir, or "
                                    f"options.archive = false)", recoverable=False)
            if kind is not None:
                unpack(download, kind, out, limits, source.name)
                download = out / kind.stem(source.name)
            download.replace(out / _FILE)
        elif kind is not None:
            unpack(download, kind, out, limits, source.name)
        elif artifact.mode == "dir":
            raise ArtifactError(f"mode dir needs an archive; {source.name!r} is not one", recoverable=False)
        else:
            download.replace(out / source.name)


_FILE = "file"
"""The name of a mode ``file`` artifact in its staging directory."""


def artifact_secrets(artifact: Artifact) -> tuple[str, ...]:
    """What must never be shown of ``artifact``: its source's secrets (:func:`~herder.sdk.redact.secrets_of`)
    and an ``sshkey`` given in its ``options``."""
    key = artifact.options.get("sshkey", "")
    return (*secrets_of(artifact.source), *((key,) if key else ()))


def _place(artifact: Artifact, root: int, destination: str, out: int) -> None:
    """Move what ``out`` holds to ``destination`` beneath ``root``, missing directories made
    0755 on the way, following no link (:class:`UnsafePathError`)."""
    if artifact.mode != "file":
        with open_beneath(root, destination, create=0o755) as target:
            merge_into(out, target, destination)
        return
    directory, _, name = destination.rpartition("/")
    if not name:
        raise ArtifactError(f"mode file: the destination {artifact.destination!r} names no file",
                            recoverable=False)
    with open_beneath(root, directory, create=0o755) as parent:
        try:
            existing = os.lstat(name, dir_fd=parent).st_mode
        except FileNotFoundError:
            existing = 0
        if stat.S_ISDIR(existing):  # a file or a link there is replaced by the rename, not followed
            raise ArtifactError(f"mode file: the destination {artifact.destination!r} is a directory",
                                recoverable=False)
        os.rename(_FILE, name, src_dir_fd=out, dst_dir_fd=parent)


class FileFetcher:
    """``file`` sources: copies of files under ``[plugin.artifacts] file_dirs``."""

    def __init__(self, config: ArtifactsConfig) -> None:
        self.config = config

    def fetch(self, source: _Source, headers: dict[str, str], target: Path, ctx: TaskContext) -> None:
        path = Path(source.path)
        real = _allowed_file(self.config, path)
        if not real.is_file():
            raise ArtifactError(f"file source {path} is not a file")
        with open(real, "rb") as data:
            copy_capped(data, target, self.config.max_download_size)


def _allowed_file(config: ArtifactsConfig, path: Path) -> Path:
    """The real path of the file source ``path``, if it is under ``file_dirs``.

    :raises ArtifactError: it is not (or is not absolute).
    """
    if not path.is_absolute():
        raise ArtifactError(f"file source {path} must be an absolute path", recoverable=False)
    real = path.resolve()
    if not any(real.is_relative_to(d.resolve()) for d in config.file_dirs):
        allowed = ", ".join(str(d) for d in config.file_dirs) or "none configured"
        raise ArtifactError(f"file source {path} is not under a directory [plugin.artifacts] file_dirs allows "
                            f"({allowed})", recoverable=False)
    return real


class HttpFetcher:
    """``http`` and ``https`` sources, within ``download_timeout`` in all.

    httpx's timeouts bound each connect and read, not a whole exchange: the
    download runs as a coroutine under :func:`asyncio.timeout`, which cancels
    whatever it waits for (connecting, the headers, the next bytes) once the
    deadline has passed, or once the task is being stopped (the response is
    then closed on the way out). Redirects are followed here rather than by
    httpx, to refuse one from https to http and count them (httpx drops the
    ``Authorization`` header of a redirect to another origin).
    """

    def __init__(self, config: ArtifactsConfig) -> None:
        self.config = config

    def fetch(self, source: _Source, headers: dict[str, str], target: Path, ctx: TaskContext) -> None:
        try:
            asyncio.run(_until_stopped(ctx.stopping, self._fetch(source, headers, target, ctx)))
        except TimeoutError:
            raise ArtifactError(f"GET {source.url}: not done within {format_duration(self.config.download_timeout)} "
                                f"([plugin.artifacts] download_timeout)") from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise ArtifactError(f"GET {source.url}: {type(exc).__name__}: {exc}") from None

    async def _fetch(self, source: _Source, headers: dict[str, str], target: Path, ctx: TaskContext) -> None:
        async with (asyncio.timeout(self.config.download_timeout),
                    httpx.AsyncClient(timeout=self.config.timeout, headers={"User-Agent": "herder"}) as client):
            request = client.build_request("GET", source.url, headers=headers)
            for _ in range(MAX_REDIRECTS + 1):
                response = await client.send(request, stream=True)
                try:
                    if response.next_request is None:
                        await self._save(response, source, target, ctx)
                        return
                    request = _redirect(response.request, response.next_request)
                finally:
                    await response.aclose()
            raise ArtifactError(f"GET {source.url}: more than {MAX_REDIRECTS} redirects")

    async def _save(self, response: httpx.Response, source: _Source, target: Path, ctx: TaskContext) -> None:
        limit = self.config.max_download_size
        if response.status_code >= 400:
            raise ArtifactError(f"GET {response.url}: HTTP {response.status_code} {response.reason_phrase}")
        length = response.headers.get("Content-Length", "")
        total = int(length) if length.isdigit() else None
        if total is not None and total > limit:
            raise ArtifactError(f"{source.name} is {total} bytes, over the limit of {limit}", recoverable=False)
        progress = _Progress(ctx, source.name, total)
        with open(target, "xb") as out:
            async for chunk in response.aiter_bytes():  # as the bytes come: a chunk size would wait for it
                progress.current += len(chunk)
                if progress.current > limit:
                    raise ArtifactError(f"{source.name} is over the limit of {limit} bytes", recoverable=False)
                out.write(chunk)
                progress.report()
        progress.report(final=True)
        if total is not None and progress.current != total:
            raise ArtifactError(f"{source.name}: got {progress.current} of {total} bytes")


async def _until_stopped(stop: threading.Event, download: Coroutine[Any, Any, None]) -> None:
    """Await ``download``, cancelled as soon as ``stop`` is set.

    :raises ArtifactError: ``stop`` was set.
    """
    task = asyncio.ensure_future(download)
    while not stop.is_set():
        done, _ = await asyncio.wait({task}, timeout=STOP_POLL)
        if done:
            return task.result()
    task.cancel()
    with suppress(asyncio.CancelledError):
        await task
    raise ArtifactError("the task is being stopped")


def _redirect(previous: httpx.Request, following: httpx.Request) -> httpx.Request:
    """The request a redirect asks for, unless it leaves https for http."""
    if previous.url.scheme == "https" and following.url.scheme != "https":
        raise ArtifactError(f"{previous.url} redirects to {following.url}: herder does not follow a redirect "
                            f"from https to {following.url.scheme}", recoverable=False)
    return following


class _Progress:
    """``Downloading Artifacts`` events with ``progress = {current, total}``, at most
    every :data:`PROGRESS_INTERVAL` seconds, so the live table shows a bar; counted in
    bytes, or in ``unit`` (a git fetch's objects)."""

    def __init__(self, ctx: TaskContext, name: str, total: int | None, unit: str = "") -> None:
        self.ctx, self.name, self.total, self.unit = ctx, name, total, unit
        self.current = 0
        self._last = time.monotonic()

    def report(self, final: bool = False) -> None:
        now = time.monotonic()
        if self.total is None or (not final and now - self._last < PROGRESS_INTERVAL):
            return
        self._last = now
        done = (f"{self.current} of {self.total} {self.unit}" if self.unit
                else f"{_size(self.current)} of {_size(self.total)}")
        self.ctx.emit_event(events.DOWNLOADING_ARTIFACTS, f"Downloading {self.name}: {done}",
                            progress={"current": self.current, "total": self.total})


def _size(n: int) -> str:
    if n >= _MB:
        return f"{n / _MB:.1f} MB"
    return f"{n / 1024:.1f} KB" if n >= 1024 else f"{n} B"


def _verify(path: Path, checksum: str) -> None:
    kind, _, expected = checksum.partition(":")
    if kind not in _HASHES:
        raise ArtifactError(f"unknown checksum type {kind!r} (one of {', '.join(_HASHES)})", recoverable=False)
    digest = hashlib.new(kind)
    with open(path, "rb") as data:
        for chunk in iter(lambda: data.read(_CHUNK), b""):
            digest.update(chunk)
    if digest.hexdigest() != expected.lower():
        raise ArtifactError(f"checksum mismatch: expected {kind}:{expected.lower()}, got {kind}:{digest.hexdigest()}")
