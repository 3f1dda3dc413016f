"""Artifacts: what a task downloads into its directory before it starts.

A built-in lifecycle plugin. In ``herder_task_prestart`` it fetches each of
the task's ``artifact`` stanzas (http and https through httpx, ``file``
sources only under the directories ``[plugin.artifacts] file_dirs`` names),
checks the checksum, unpacks archives by extension (:mod:`.archives`), and
moves the result into the destination, which must stay inside the task
directory. Everything happens in a staging directory first: a failure at any
step leaves nothing in the destination.

A failed download emits ``Failed Artifact Download`` and raises
:class:`herder.RecoverableError`, so the start is retried under the restart
policy; what retrying cannot fix (an unsafe archive, a source outside the
allowed directories, a limit) fails the task. Each artifact fetched is noted
in ``ctx.created`` (kind ``artifact``), which is kept with the task's state:
a restarted task does not fetch it again.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import httpx

from herder import events, hookimpl
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
from herder.model import Artifact, Task
from herder.sdk.paths import resolve_in_task_dir

FETCHED = "artifact"
"""The ``ctx.created`` kind noting an artifact already in place."""

PROGRESS_INTERVAL = 0.5  # seconds between two progress events of one download
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
    """``[plugin.artifacts]``: where ``file`` sources may come from, and the limits
    (bytes, and members of one archive)."""

    file_dirs: tuple[Path, ...] = ()
    max_download_size: int = 1024 * _MB
    max_unpacked_size: int = 4096 * _MB
    max_files: int = 100_000
    timeout: float = 30.0

    @classmethod
    def from_table(cls, table: dict[str, Any]) -> ArtifactsConfig:
        """The configuration from its TOML table.

        :raises ConfigError: an unknown key or a value of the wrong kind.
        """
        known = {"file_dirs", "max_download_size", "max_unpacked_size", "max_files", "timeout"}
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
                timeout=float(table.get("timeout", cls.timeout)),
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"[plugin.artifacts]: {exc}") from None
        if min(config.max_download_size, config.max_unpacked_size, config.max_files) <= 0 or config.timeout <= 0:
            raise ConfigError("[plugin.artifacts]: limits and timeout must be positive")
        return config


@dataclass(frozen=True)
class _Source:
    """An artifact's source with go-getter's query options (``?checksum=...&archive=false``)
    taken out and merged under the stanza's own ``options``."""

    url: str
    scheme: str
    name: str
    checksum: str
    archive: bool
    path: str  # of a file source, as written (a bare path) or from the URL

def _source(artifact: Artifact) -> _Source:
    url = artifact.source
    parts = urlsplit(url) if "://" in url else urlsplit("file://" + url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    options = {key: value for key, value in query if key in ("checksum", "archive")}
    options |= artifact.options
    rest = urlencode([(key, value) for key, value in query if key not in ("checksum", "archive")])
    clean = urlunsplit(parts._replace(query=rest))
    path = unquote(parts.path) if "://" in url else url.split("?", 1)[0]
    name = posixpath.basename(path) or "download"
    return _Source(clean, parts.scheme.lower(), name, options.get("checksum", ""),
                   str(options.get("archive", "true")).lower() != "false", path)


def artifact_key(artifact: Artifact) -> str:
    """Stable identity of an artifact stanza (after interpolation)."""
    fields = [artifact.source, artifact.destination, artifact.mode, sorted(artifact.options.items()),
              sorted(artifact.headers.items())]
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()[:32]


class ArtifactsPlugin:
    """The built-in ``artifacts`` lifecycle plugin."""

    name = "artifacts"

    def __init__(self, config: ArtifactsConfig | None = None) -> None:
        self.config = config or ArtifactsConfig()
        self._http: httpx.Client | None = None

    def start(self) -> None:
        """Nothing runs in the background: the HTTP client is made on first use."""

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    @property
    def http(self) -> httpx.Client:
        if self._http is None:
            self._http = httpx.Client(follow_redirects=True, timeout=self.config.timeout,
                                      headers={"User-Agent": "herder"})
        return self._http

    @hookimpl
    def herder_task_prestart(self, task: Task, ctx: TaskContext) -> None:
        fetched = {value for kind, value in ctx.created.items() if kind == FETCHED}
        pending = [(index, a) for index, a in enumerate(task.artifacts) if artifact_key(a) not in fetched]
        if not pending:
            return
        ctx.emit_event(events.DOWNLOADING_ARTIFACTS, "Client is downloading artifacts")
        for index, artifact in pending:
            try:
                self.fetch(artifact, ctx)
            except ArtifactError as exc:
                message = f"artifact {index} ({artifact.source}): {exc}"
                ctx.emit_event(events.FAILED_ARTIFACT_DOWNLOAD, message, source=artifact.source,
                               recoverable=exc.recoverable)
                if exc.recoverable:
                    raise RecoverableError(message) from None
                raise ArtifactError(message, recoverable=False) from None
            ctx.created.add(FETCHED, artifact_key(artifact))

    def fetch(self, artifact: Artifact, ctx: TaskContext) -> None:
        """Fetch one artifact into place.

        :raises ArtifactError: nothing of it was put in place.
        """
        source = _source(artifact)
        try:
            destination = resolve_in_task_dir(ctx.task_dir, artifact.destination)
        except ValueError as exc:
            raise ArtifactError(f"destination: {exc}", recoverable=False) from None
        staging = Path(tempfile.mkdtemp(prefix=".herder-artifact-", dir=ctx.task_dir.dir))
        try:
            download = staging / source.name
            if source.scheme == "file":
                self._copy_file(source, download)
            elif source.scheme in ("http", "https"):
                self._download(source, artifact.headers, download, ctx)
            else:
                raise ArtifactError(f"herder cannot fetch {source.scheme!r} sources", recoverable=False)
            if source.checksum:
                _verify(download, source.checksum)
            kind = archive_kind(source.name) if source.archive else None
            self._place(artifact, source, kind, download, staging / ".out", destination)
        except UnsafeArchive as exc:
            raise ArtifactError(f"unsafe archive: {exc}", recoverable=False) from None
        except ArchiveError as exc:
            raise ArtifactError(str(exc), recoverable=False) from None
        except OSError as exc:
            raise ArtifactError(f"{type(exc).__name__}: {exc}") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _limits(self) -> Limits:
        return Limits(max_size=self.config.max_unpacked_size, max_files=self.config.max_files)

    def _place(self, artifact: Artifact, source: _Source, kind: ArchiveKind | None, download: Path,
               out: Path, destination: Path) -> None:
        out.mkdir()
        if artifact.mode == "file":
            if kind is not None and kind.container:
                raise ArtifactError(f"mode file cannot unpack a {kind.suffix} archive (use mode any or dir, or "
                                    f"options.archive = false)", recoverable=False)
            if kind is not None:
                unpack(download, kind, out, self._limits(), source.name)
                download = out / kind.stem(source.name)
            if destination.is_symlink() or destination.is_file():
                destination.unlink()
            elif destination.is_dir():
                raise ArtifactError(f"mode file: the destination {artifact.destination!r} is a directory",
                                    recoverable=False)
            destination.parent.mkdir(parents=True, exist_ok=True)
            download.replace(destination)
            return
        if kind is None:
            if artifact.mode == "dir":
                raise ArtifactError(f"mode dir needs an archive; {source.name!r} is not one", recoverable=False)
            download.replace(out / source.name)
        else:
            unpack(download, kind, out, self._limits(), source.name)
        merge_into(out, destination)

    def _copy_file(self, source: _Source, target: Path) -> None:
        path = Path(source.path)
        if not path.is_absolute():
            raise ArtifactError(f"file source {path} must be an absolute path", recoverable=False)
        real = path.resolve()
        if not any(real.is_relative_to(d.resolve()) for d in self.config.file_dirs):
            allowed = ", ".join(str(d) for d in self.config.file_dirs) or "none configured"
            raise ArtifactError(f"file source {path} is not under a directory [plugin.artifacts] file_dirs allows "
                                f"({allowed})", recoverable=False)
        if not real.is_file():
            raise ArtifactError(f"file source {path} is not a file")
        with open(real, "rb") as data:
            copy_capped(data, target, self.config.max_download_size)

    def _download(self, source: _Source, headers: dict[str, str], target: Path, ctx: TaskContext) -> None:
        limit = self.config.max_download_size
        try:
            with self.http.stream("GET", source.url, headers=headers) as response:
                if response.status_code >= 400:
                    raise ArtifactError(f"GET {source.url}: HTTP {response.status_code} {response.reason_phrase}")
                length = response.headers.get("Content-Length", "")
                total = int(length) if length.isdigit() else None
                if total is not None and total > limit:
                    raise ArtifactError(f"{source.name} is {total} bytes, over the limit of {limit}",
                                        recoverable=False)
                progress = _Progress(ctx, source.name, total)
                with open(target, "xb") as out:
                    for chunk in response.iter_bytes(_CHUNK):
                        progress.current += len(chunk)
                        if progress.current > limit:
                            raise ArtifactError(f"{source.name} is over the limit of {limit} bytes",
                                                recoverable=False)
                        out.write(chunk)
                        progress.report()
                progress.report(final=True)
                if total is not None and progress.current != total:
                    raise ArtifactError(f"{source.name}: got {progress.current} of {total} bytes")
        except httpx.HTTPError as exc:
            raise ArtifactError(f"GET {source.url}: {type(exc).__name__}: {exc}") from None


class _Progress:
    """``Downloading Artifacts`` events with ``progress = {current, total}``, at most
    every :data:`PROGRESS_INTERVAL` seconds, so the live table shows a bar."""

    def __init__(self, ctx: TaskContext, name: str, total: int | None) -> None:
        self.ctx, self.name, self.total = ctx, name, total
        self.current = 0
        self._last = time.monotonic()

    def report(self, final: bool = False) -> None:
        now = time.monotonic()
        if self.total is None or (not final and now - self._last < PROGRESS_INTERVAL):
            return
        self._last = now
        self.ctx.emit_event(events.DOWNLOADING_ARTIFACTS,
                            f"Downloading {self.name}: {_size(self.current)} of {_size(self.total)}",
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
