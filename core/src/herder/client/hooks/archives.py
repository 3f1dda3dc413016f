"""Unpacking downloaded artifacts without letting an archive reach outside its destination.

Every member of a tar or zip archive is checked before anything is written:
no absolute names, no ``..``, no device files or FIFOs, symbolic links only to
places inside the destination, hard links only to files the archive already
unpacked (they are copied, never linked, so nothing outside can be reached
through them), and writes never go through a link. Unpacking goes into an
empty directory of the caller's; on any error the caller throws that
directory away, so a bad archive leaves nothing behind.

What an archive may cost is bounded before it is paid. Every entry counts
against the member limit, header-only ones too (``./``, GNU long names, pax
headers), and no header payload over :data:`MAX_HEADER_PAYLOAD` is read into
memory; a chain of headers before one member is at most
:data:`MAX_HEADER_CHAIN` long; the decompressed stream and the bytes written
are capped at the size limit; a zip's central directory is checked (entries,
bytes, declared sizes) before :mod:`zipfile` reads it. Sparse tar members are
refused: their maps are read in full by :mod:`tarfile`.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import shutil
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO, Protocol

from herder.sdk.safefs import UnsafePathError, open_beneath, open_dir

CHUNK = 1 << 16
MAX_HEADER_PAYLOAD = 1 << 20
"""Bytes of one pax header or GNU long name/link: far more than any path or attribute needs."""
MAX_HEADER_CHAIN = 16
"""Headers in a row before one member (a global and an extended pax header, a long name and
a long link make four): :mod:`tarfile` reads a chain recursively."""
ZIP_DIRECTORY_PER_MEMBER = 1024
"""Central directory bytes allowed per allowed member (names and extra fields included)."""
_HEADER_TYPES = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE,
                 tarfile.SOLARIS_XHDTYPE)

# Longest suffix first: ``.tar.gz`` before ``.gz``.
_SUFFIXES: tuple[tuple[str, str, str], ...] = (
    (".tar.gz", "tar", "gz"), (".tgz", "tar", "gz"),
    (".tar.bz2", "tar", "bz2"), (".tbz2", "tar", "bz2"), (".tbz", "tar", "bz2"),
    (".tar.xz", "tar", "xz"), (".txz", "tar", "xz"),
    (".tar", "tar", ""), (".zip", "zip", ""),
    (".gz", "", "gz"), (".bz2", "", "bz2"), (".xz", "", "xz"),
)
_OPENERS: dict[str, Callable[[Path, str], IO[bytes]]] = {
    "gz": gzip.open, "bz2": bz2.open, "xz": lzma.open,  # type: ignore[dict-item]
}


class ArchiveError(Exception):
    """The archive cannot be unpacked: corrupt, or over a limit."""


class UnsafeArchive(ArchiveError):
    """A member would reach outside the destination, or is a device file."""


@dataclass(frozen=True)
class Limits:
    """``max_size``: bytes of the decompressed archive, and bytes written in all;
    ``max_files``: entries of one archive (headers included)."""

    max_size: int
    max_files: int


@dataclass(frozen=True)
class ArchiveKind:
    """``container`` is ``tar``, ``zip`` or "" (one compressed file); ``compression``
    ``gz``, ``bz2``, ``xz`` or ""; ``suffix`` is the file-name ending that told."""

    container: str
    compression: str
    suffix: str

    def stem(self, name: str) -> str:
        """The name of a single compressed file once decompressed."""
        return name[: -len(self.suffix)] or "file"


def archive_kind(name: str) -> ArchiveKind | None:
    """What the file name ``name`` says the file is, or None for a plain file."""
    lowered = name.lower()
    for suffix, container, compression in _SUFFIXES:
        if lowered.endswith(suffix):
            return ArchiveKind(container, compression, suffix)
    return None


def unpack(archive: Path, kind: ArchiveKind, into: Path, limits: Limits, name: str) -> None:
    """Unpack ``archive`` into the empty directory ``into``.

    ``name`` is the download's file name (a single compressed file becomes its stem).

    :raises UnsafeArchive: a member would escape ``into`` or is a special file.
    :raises ArchiveError: the archive is corrupt or over ``limits``.
    """
    writer = _Writer(into, limits)
    try:
        if kind.container == "zip":
            _check_zip_directory(archive, limits)
            with zipfile.ZipFile(archive) as zf:
                infos = zf.infolist()
                declared = sum(info.file_size for info in infos)
                if declared > limits.max_size:
                    raise ArchiveError(f"unpacks to {declared} bytes, more than {limits.max_size} bytes "
                                       f"(the configured limit)")
                for info in infos:
                    writer.zip_member(zf, info)
        else:
            with _decompressed(archive, kind.compression, limits.max_size) as stream:
                if kind.container == "tar":
                    _unpack_tar(stream, writer)
                else:
                    writer.count()
                    writer.file(kind.stem(name), stream, 0o644)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, lzma.LZMAError, zlib.error, OSError) as exc:
        raise ArchiveError(f"not a valid {kind.suffix.lstrip('.')} archive: {exc}") from None
    writer.check_links()


def unpack_tar_stream(stream: _Readable, into: Path, limits: Limits) -> None:
    """Unpack the uncompressed tar archive read from ``stream`` (a pipe will do) into the
    empty directory ``into``, with the checks and limits of :func:`unpack`.

    :raises UnsafeArchive: a member would escape ``into`` or is a special file.
    :raises ArchiveError: the archive is corrupt or over ``limits``.
    """
    writer = _Writer(into, limits)
    try:
        _unpack_tar(_Capped(stream, limits.max_size), writer)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ArchiveError(f"not a valid tar stream: {exc}") from None
    writer.check_links()


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class _Capped:
    """A readable stream that refuses to give more than ``limit`` bytes in all."""

    def __init__(self, stream: _Readable, limit: int) -> None:
        self.stream, self.limit, self.read_so_far = stream, limit, 0

    def read(self, size: int = -1) -> bytes:
        want = self.limit + 1 - self.read_so_far
        data = self.stream.read(want if size < 0 else min(size, want))
        self.read_so_far += len(data)
        if self.read_so_far > self.limit:
            raise ArchiveError(f"unpacks to more than {self.limit} bytes (the configured limit)")
        return data


@contextmanager
def _decompressed(archive: Path, compression: str, limit: int) -> Iterator[_Capped]:
    """The archive's bytes, decompressed, capped at ``limit``."""
    opener = _OPENERS.get(compression)
    with opener(archive, "rb") if opener else open(archive, "rb") as raw:
        yield _Capped(raw, limit)


class _CheckedTarInfo(tarfile.TarInfo):
    """Headers checked against the writer's limits before :mod:`tarfile` reads their payload.

    ``_proc_member`` is the hook tarfile's source names for subclasses to add
    header processing; every header block of the stream passes through it.
    """

    def _proc_member(self, tar: tarfile.TarFile) -> tarfile.TarInfo:
        writer: _Writer = tar.writer  # type: ignore[attr-defined]
        writer.count()
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise ArchiveError(f"member {self.name!r} is a sparse file (not supported)")
        if self.type in _HEADER_TYPES:
            writer.header(self.size)
        else:
            writer.headers_in_a_row = 0
        return super()._proc_member(tar)  # type: ignore[misc, no-any-return]

    def _proc_gnusparse_10(self, next: tarfile.TarInfo, pax_headers: dict[str, str],
                           tar: tarfile.TarFile) -> None:
        raise ArchiveError(f"member {next.name!r} is a sparse file (not supported)")


class _CheckedTarFile(tarfile.TarFile):
    """A tar stream read with :class:`_CheckedTarInfo` headers, counted by ``writer``."""

    tarinfo = _CheckedTarInfo

    def __init__(self, *args: object, writer: _Writer, **kwargs: object) -> None:
        self.writer = writer  # before the first header is read, in the base constructor
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]


def _unpack_tar(stream: _Capped, writer: _Writer) -> None:
    tar = _CheckedTarFile.open(fileobj=stream, mode="r|", writer=writer)  # type: ignore[call-overload]
    with tar:
        while (member := tar.next()) is not None:
            if member.sparse is not None:
                raise ArchiveError(f"member {member.name!r} is a sparse file (not supported)")
            writer.tar_member(tar, member)
            # A stream is read once: tarfile need not remember every member it passed.
            tar.members.clear()


def _check_zip_directory(archive: Path, limits: Limits) -> None:
    """Refuse a zip whose central directory is over the limits, before :mod:`zipfile`
    reads all of it into memory (its end record says how many entries, how many bytes)."""
    entries, size = _zip_directory(archive)
    if entries > limits.max_files:
        raise ArchiveError(f"more than {limits.max_files} members ({entries}; the configured limit)")
    if size > limits.max_files * ZIP_DIRECTORY_PER_MEMBER:
        raise ArchiveError(f"central directory of {size} bytes, more than {ZIP_DIRECTORY_PER_MEMBER} bytes a "
                           f"member for {limits.max_files} members (the configured limit)")


_EOCD = struct.Struct("<4s4H2LH")
_ZIP64_LOCATOR_SIZE = 20
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")


def _zip_directory(archive: Path) -> tuple[int, int]:
    """A zip's entry count and central directory size, from its end records (zip64 too)."""
    with open(archive, "rb") as data:
        data.seek(0, os.SEEK_END)
        length = data.tell()
        tail_start = max(0, length - _EOCD.size - 0xFFFF)  # the record, then a comment of up to 64 KiB
        data.seek(tail_start)
        tail = data.read()
        # The last signature whose comment length reaches the end of the file exactly: a
        # comment may itself contain the signature.
        at = len(tail)
        while True:
            at = tail.rfind(b"PK\x05\x06", 0, at)
            if at < 0:
                raise zipfile.BadZipFile("no end of central directory record")
            if len(tail) - at < _EOCD.size:
                continue
            *_, entries, size, _, comment = _EOCD.unpack_from(tail, at)
            if at + _EOCD.size + comment == len(tail):
                break
        if entries != 0xFFFF and size != 0xFFFFFFFF:
            return entries, size
        locator = tail_start + at - _ZIP64_LOCATOR_SIZE
        if locator < 0:
            raise zipfile.BadZipFile("no zip64 end of central directory locator")
        data.seek(locator)
        signature = data.read(4)
        # The zip64 record right before its locator, where zipfile looks for it too (the locator's
        # offset is wrong in an archive with data before it, such as a self-extracting one).
        data.seek(max(0, locator - _ZIP64_EOCD.size))
        record = data.read(_ZIP64_EOCD.size)
        if signature != b"PK\x06\x07" or len(record) < _ZIP64_EOCD.size or record[:4] != b"PK\x06\x06":
            raise zipfile.BadZipFile("bad zip64 end of central directory")
        fields = _ZIP64_EOCD.unpack(record)
        return fields[7], fields[8]


class _Writer:
    """Writes members under ``root``, checking each, counting files and bytes."""

    def __init__(self, root: Path, limits: Limits) -> None:
        self.root = root
        self.real_root = os.path.realpath(root)
        self.limits = limits
        self.files = 0
        self.written = 0
        self.headers_in_a_row = 0
        self.unpacked: set[Path] = set()

    # -- checks ---------------------------------------------------------------

    def target(self, name: str) -> Path | None:
        """The path of member ``name``; None for the root itself."""
        text = name.replace("\\", "/")
        if text.startswith("/") or (len(text) > 1 and text[1] == ":"):
            raise UnsafeArchive(f"member {name!r} has an absolute path")
        parts = [part for part in text.split("/") if part not in ("", ".")]
        if ".." in parts:
            raise UnsafeArchive(f"member {name!r} has '..' in its path")
        if not parts:
            return None
        return self.root.joinpath(*parts)

    def inside(self, path: str) -> bool:
        return path == self.real_root or path.startswith(self.real_root + os.sep)

    def parent_of(self, name: str, target: Path) -> None:
        """Create ``target``'s directory; refuse one reached through a link out."""
        real_parent = os.path.realpath(target.parent)
        if not self.inside(real_parent):
            raise UnsafeArchive(f"member {name!r} would be written through a link out of the destination")
        os.makedirs(real_parent, exist_ok=True)
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            target.unlink()  # a later member replaces an earlier one, never writes through it

    def count(self) -> None:
        """One more entry of the archive, whatever it is."""
        self.files += 1
        if self.files > self.limits.max_files:
            raise ArchiveError(f"more than {self.limits.max_files} members (the configured limit)")

    def header(self, size: int) -> None:
        """A pax header or GNU long name/link of ``size`` bytes, about to be read into memory."""
        self.headers_in_a_row += 1
        if self.headers_in_a_row > MAX_HEADER_CHAIN:
            raise ArchiveError(f"more than {MAX_HEADER_CHAIN} headers in a row before a member "
                               f"(the limit of a tar archive)")
        if size > MAX_HEADER_PAYLOAD:
            raise ArchiveError(f"a header of {size} bytes, more than {MAX_HEADER_PAYLOAD} (the limit of a "
                               f"tar archive)")
        self.add_bytes(size)

    def add_bytes(self, n: int) -> None:
        self.written += n
        if self.written > self.limits.max_size:
            raise ArchiveError(f"unpacks to more than {self.limits.max_size} bytes (the configured limit)")

    # -- members -------------------------------------------------------------

    def directory(self, name: str) -> None:
        target = self.target(name)
        if target is None:
            return
        self.parent_of(name, target)
        if not target.is_dir():
            target.mkdir()

    def file(self, name: str, source: _Readable, mode: int) -> None:
        target = self.target(name)
        if target is None:
            raise UnsafeArchive(f"member {name!r} names the destination itself")
        self.parent_of(name, target)
        if target.is_dir():
            raise ArchiveError(f"member {name!r} is a file where the archive made a directory")
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as out:
            for chunk in iter(lambda: source.read(CHUNK), b""):
                self.add_bytes(len(chunk))
                out.write(chunk)
        # Permission bits only: never setuid, setgid or sticky from an archive.
        os.chmod(target, (mode & 0o777) or 0o644)
        self.unpacked.add(target)

    def symlink(self, name: str, link: str) -> None:
        target = self.target(name)
        if target is None:
            raise UnsafeArchive(f"member {name!r} names the destination itself")
        if link.startswith("/"):
            raise UnsafeArchive(f"link {name!r} points to the absolute path {link!r}")
        self.parent_of(name, target)
        if target.is_dir():
            raise ArchiveError(f"member {name!r} is a link where the archive made a directory")
        pointed = os.path.realpath(os.path.join(os.path.realpath(target.parent), link))
        if not self.inside(pointed):
            raise UnsafeArchive(f"link {name!r} points out of the destination ({link!r})")
        os.symlink(link, target)

    def hardlink(self, name: str, link: str) -> None:
        source = self.target(link)
        if source is None or source not in self.unpacked or source.is_symlink():
            raise UnsafeArchive(f"hard link {name!r} points to {link!r}, not a file unpacked before it")
        with open(source, "rb") as data:
            self.file(name, data, source.stat().st_mode)

    def tar_member(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        if member.isdir():
            self.directory(member.name)
        elif member.isreg():
            data = tar.extractfile(member)
            assert data is not None
            with data:
                self.file(member.name, data, member.mode)
        elif member.issym():
            self.symlink(member.name, member.linkname)
        elif member.islnk():
            self.hardlink(member.name, member.linkname)
        else:
            what = "device file" if (member.ischr() or member.isblk()) else "special file"
            raise UnsafeArchive(f"member {member.name!r} is a {what}")

    def zip_member(self, zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> None:
        self.count()
        mode = info.external_attr >> 16
        if info.is_dir():
            self.directory(info.filename)
        elif stat.S_ISLNK(mode):
            if info.file_size > 4096:
                raise UnsafeArchive(f"link {info.filename!r} has a target of {info.file_size} bytes")
            self.symlink(info.filename, zf.read(info).decode("utf-8", "surrogateescape"))
        elif stat.S_IFMT(mode) not in (0, stat.S_IFREG):  # 0: written without a file type
            raise UnsafeArchive(f"member {info.filename!r} is a special file")
        else:
            with zf.open(info) as data:
                self.file(info.filename, data, mode & 0o777 or 0o644)

    def check_links(self) -> None:
        """Every link, resolved now that the whole archive is out, stays inside:
        no chain of links made one at a time reaches out."""
        for link in _links(self.root):
            if not self.inside(os.path.realpath(link)):
                raise UnsafeArchive(f"link {link.relative_to(self.root)} points out of the destination")


def _links(root: Path) -> Iterator[Path]:
    for directory, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            path = Path(directory, name)
            if path.is_symlink():
                yield path


def copy_capped(source: BinaryIO, target: Path, limit: int) -> int:
    """Copy ``source`` into the new file ``target``, at most ``limit`` bytes; the bytes copied."""
    copied = 0
    with open(target, "xb") as out:
        for chunk in iter(lambda: source.read(CHUNK), b""):
            copied += len(chunk)
            if copied > limit:
                raise ArchiveError(f"is larger than {limit} bytes (the configured limit)")
            out.write(chunk)
    return copied


def merge_into(staged: int, destination: int, shown: str) -> None:
    """Move everything in the directory ``staged`` into ``destination``, merging directories.

    Both are directory descriptors; ``shown`` names the destination in errors.
    Nothing is reached by a path from the top: each directory is opened from
    its parent's descriptor without following links, so a task that swaps a
    directory of the destination for a link while this runs gets an
    :class:`~herder.sdk.UnsafePathError`, not a write elsewhere. A link (or
    file) the task left where an entry goes is replaced, never written
    through: ``rename`` and ``unlink`` act on the name itself.
    """
    for name in sorted(os.listdir(staged)):
        entry = os.lstat(name, dir_fd=staged)
        try:
            existing: os.stat_result | None = os.lstat(name, dir_fd=destination)
        except FileNotFoundError:
            existing = None
        if existing is not None and stat.S_ISDIR(existing.st_mode) and stat.S_ISDIR(entry.st_mode):
            with _open_beneath_named(destination, name, shown) as target, open_beneath(staged, name) as inner:
                merge_into(inner, target, f"{shown}/{name}")
            continue
        if existing is not None and stat.S_ISDIR(existing.st_mode):
            shutil.rmtree(name, dir_fd=destination)  # by descriptors: links inside are removed, not followed
        elif existing is not None:
            os.unlink(name, dir_fd=destination)
        os.rename(name, name, src_dir_fd=staged, dst_dir_fd=destination)


@contextmanager
def _open_beneath_named(dir_fd: int, name: str, shown: str) -> Iterator[int]:
    """:func:`~herder.sdk.open_beneath` for one entry, an error naming it as ``shown/name``."""
    try:
        fd = open_dir(dir_fd, name)
    except UnsafePathError as exc:
        raise UnsafePathError(f"{shown}/{name}", exc.reason) from None
    try:
        yield fd
    finally:
        os.close(fd)
