"""Unpacking downloaded artifacts without letting an archive reach outside its destination.

Every member of a tar or zip archive is checked before anything is written:
no absolute names, no ``..``, no device files or FIFOs, symbolic links only to
places inside the destination, hard links only to files the archive already
unpacked (they are copied, never linked, so nothing outside can be reached
through them), and writes never go through a link. The number of members and
the bytes actually written are capped. Unpacking goes into an empty directory
of the caller's; on any error the caller throws that directory away, so a bad
archive leaves nothing behind.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import shutil
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

CHUNK = 1 << 16

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
    """``max_size``: bytes written in all; ``max_files``: members of one archive."""

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
        if kind.container == "tar":
            mode = f"r|{kind.compression}" if kind.compression else "r|"
            with tarfile.open(archive, mode) as tar:  # type: ignore[call-overload]
                for member in tar:
                    writer.tar_member(tar, member)
        elif kind.container == "zip":
            with zipfile.ZipFile(archive) as zf:
                for info in zf.infolist():
                    writer.zip_member(zf, info)
        else:
            with _OPENERS[kind.compression](archive, "rb") as source:
                writer.file(kind.stem(name), source, 0o644)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, lzma.LZMAError, zlib.error, OSError) as exc:
        if isinstance(exc, ArchiveError):
            raise
        raise ArchiveError(f"not a valid {kind.suffix.lstrip('.')} archive: {exc}") from None
    writer.check_links()


class _Writer:
    """Writes members under ``root``, checking each, counting files and bytes."""

    def __init__(self, root: Path, limits: Limits) -> None:
        self.root = root
        self.real_root = os.path.realpath(root)
        self.limits = limits
        self.files = 0
        self.written = 0
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
        self.count(name)
        real_parent = os.path.realpath(target.parent)
        if not self.inside(real_parent):
            raise UnsafeArchive(f"member {name!r} would be written through a link out of the destination")
        os.makedirs(real_parent, exist_ok=True)
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            target.unlink()  # a later member replaces an earlier one, never writes through it

    def count(self, name: str) -> None:
        self.files += 1
        if self.files > self.limits.max_files:
            raise ArchiveError(f"more than {self.limits.max_files} members (the configured limit)")

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

    def file(self, name: str, source: IO[bytes], mode: int) -> None:
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


def merge_into(staged: Path, destination: Path) -> None:
    """Move everything under ``staged`` into ``destination``, merging directories.

    A link already in the destination is replaced, never written through, so
    a task that left ``local/x -> /etc`` behind cannot have an artifact put there.
    """
    destination.mkdir(parents=True, exist_ok=True)
    for entry in sorted(staged.iterdir()):
        target = destination / entry.name
        if entry.is_dir() and not entry.is_symlink() and target.is_dir() and not target.is_symlink():
            merge_into(entry, target)
            continue
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
        os.replace(entry, target)
