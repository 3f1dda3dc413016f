"""The tests' guest: the host's kernel and a busybox initramfs, built by the example's builder at test time.

The guest's ``/init`` is the example's (``examples/qemu-web/init.sh``): given
a script after ``--`` on the kernel's command line, it runs it and ends as a
process would, QEMU exiting with the script's (odd) exit code through the
``isa-debug-exit`` device, or 0. Its first serial port is the console (the
task's stdout); a test can give it a second one, ``/dev/ttyS1``, written to a
host file.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import stat
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "qemu-web"
BUILDER = EXAMPLE / "build-guest.py"
INIT = EXAMPLE / "init.sh"
BUSYBOX = Path("/bin/busybox")
DEBUG_EXIT = ["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"]
"""Lets the guest end QEMU with an exit code of its choice (2n+1)."""
ARGS_ALLOWLIST = ["-device", "-serial"]
"""``[plugin.qemu] args_allowlist`` for the options the tests' tasks give QEMU (the debug-exit device,
the contract kit's readiness port)."""
APPEND = "console=ttyS0 quiet panic=-1"


def kernels() -> list[Path]:
    return sorted(Path("/boot").glob("vmlinuz-*"))


@contextmanager
def readable_tmp() -> Iterator[Path]:
    """A new directory that QEMU, as ``nobody``, may read (pytest's temporary directories are closed to
    other users): for images outside the task directory. Removed at the end of the block."""
    with tempfile.TemporaryDirectory(prefix="herder-qemu-images-") as made:
        directory = Path(made)
        directory.chmod(0o755)
        yield directory


def readable_cache() -> Path:
    """Where the guest is built once for every run: a directory of this user's in the system's temporary
    directory, that every user may pass through (QEMU runs as ``nobody``; pytest's own temporary
    directories are closed to other users).

    :raises RuntimeError: the name is taken by something that is not this user's own directory.
    """
    cache = Path(tempfile.gettempdir()) / f"herder-qemu-guest-{os.getuid()}"
    with suppress(FileExistsError):
        cache.mkdir(mode=0o755)
    found = cache.lstat()
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o022:
        raise RuntimeError(f"{cache} is not a directory of this user's that only it may write")
    cache.chmod(0o755)  # whatever the umask made of it
    return cache


@dataclass(frozen=True)
class Guest:
    """A built guest: ``kernel`` and ``initrd`` in ``directory``."""

    directory: Path

    @property
    def plugin_config(self) -> dict[str, Any]:
        """``[plugin.qemu]`` that lets tasks boot the guest from where it was built, with the options
        of :data:`ARGS_ALLOWLIST`."""
        return {"image_paths": [str(self.directory)], "args_allowlist": ARGS_ALLOWLIST}

    def config(self, script: str | None = None, *, args: tuple[str, ...] = (), **config: Any) -> dict[str, Any]:
        """A task config booting the guest; it runs ``script`` (no double quotes in it), or serves HTTP on 80."""
        append = APPEND if script is None else f'{APPEND} -- "{script}"'
        assert script is None or '"' not in script, "the kernel's command line cannot quote a double quote"
        return {"kernel": str(self.directory / "kernel"), "initrd": str(self.directory / "initrd"),
                "append": append, "args": [*DEBUG_EXIT, *args], **config}


def build_guest(cache: Path) -> Guest:
    """The guest for this kernel, busybox, init script and builder, built once into ``cache`` (shared by
    the test processes of one run: the first builds it under a lock, the others wait for it)."""
    inputs = hashlib.sha256()
    for path in (BUILDER, INIT, BUSYBOX, *kernels()):
        inputs.update(path.name.encode() + str(path.stat().st_mtime_ns).encode())
        if path.suffix in (".py", ".sh"):
            inputs.update(path.read_bytes())
    directory = cache / f"guest-{inputs.hexdigest()[:16]}"
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (directory / "initrd").is_file():
            subprocess.run([sys.executable, str(BUILDER), "--out", str(directory)], check=True, timeout=300,
                           capture_output=True)
            for path in (directory, *directory.iterdir()):  # readable by QEMU's user, whatever the umask
                path.chmod(0o755 if path.is_dir() else 0o644)
    return Guest(directory)


def boot_sector(text: bytes, exit_value: int) -> bytes:
    """A disk whose boot sector writes ``text`` to the first serial port and ends QEMU with
    ``2 * exit_value + 1`` through isa-debug-exit: 16-bit code SeaBIOS loads at 0x7c00."""
    message_at = 0x7C00 + 25
    code = (b"\xfa\x31\xc0\x8e\xd8\xfc"                      # cli; xor ax, ax; mov ds, ax; cld
            + b"\xbe" + struct.pack("<H", message_at)        # mov si, message
            + b"\xba\xf8\x03"                                # mov dx, 0x3f8
            + b"\xac\x84\xc0\x74\x03\xee\xeb\xf8"            # next: lodsb; test al, al; jz done; out dx, al; jmp next
            + b"\xb0" + bytes([exit_value]) + b"\xe6\xf4"    # done: mov al, exit_value; out 0xf4, al
            + b"\xf4")                                       # hlt
    assert len(code) == 25
    sector = code + text + b"\r\n\0"
    return sector.ljust(510, b"\0") + b"\x55\xaa" + b"\0" * (1024 * 1024 - 512)
