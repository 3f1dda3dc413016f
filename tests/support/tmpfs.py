"""A small filesystem that fills up: a tmpfs mounted for the length of a test (needs root)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

needs_mount = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a tmpfs")


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str = "3m") -> Iterator[Path]:
    """A tmpfs of ``size`` (``mount -o size=``) at ``path``, an existing directory, unmounted at the end."""
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)
