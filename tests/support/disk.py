"""A small filesystem of its own (a tmpfs), to run herder on a disk that fills up."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

needs_mount = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a tmpfs")

FILLER = "filler"


@contextmanager
def small_disk(path: Path, size: str = "4m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` (created), unmounted when the block ends, even on failure.

    Needs root, as every test here. If something still holds it open (a
    process the test failed to stop), it is detached lazily rather than left mounted.
    """
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "--lazy", str(path)], check=True)


def fill(disk: Path) -> Path:
    """Write a file on ``disk`` until no byte more fits; the file, to remove to make room again."""
    filler = disk / FILLER
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    chunk = bytes(1 << 16)
    try:
        while True:
            os.write(fd, chunk)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)
    return filler
