#!/usr/bin/env python3
"""Build a tiny Linux guest for herder's qemu driver from what a Debian host has.

The guest is the host's kernel (``linux-image-amd64``: ``/boot/vmlinuz-*``)
and an initramfs holding the host's static busybox (``busybox-static``), the
kernel modules it asks for (with what ``modules.dep`` says they need) and
an ``/init`` script of your own::

    build-guest.py --init init.sh --out guest/ --module virtio_net --module virtio_pci

writes ``guest/kernel`` and ``guest/initrd`` for a task's ``kernel`` and
``initrd``. Without arguments it builds the example's guest (``init.sh``
beside this script, with the virtio network and the power button) into
``/tmp/herder-qemu-web``. The modules go to ``/lib/modules/`` in the initramfs, and
``/etc/modules`` lists their file names in an order ``insmod`` can load them.

When the kernel's payload is XZ (Debian's), ``kernel`` is the ELF ``vmlinux``
taken out of the compressed image: QEMU boots it directly (PVH) without
decompressing it in the emulated CPU, which is a few seconds faster under
TCG. Otherwise it is the compressed image itself.
"""

from __future__ import annotations

import argparse
import lzma
import os
import re
import stat
import sys
from pathlib import Path

BUSYBOX = Path("/bin/busybox")
HERE = Path(__file__).resolve().parent
DEFAULT_OUT = Path("/tmp/herder-qemu-web")
DEFAULT_MODULES = ["virtio_pci", "virtio_net", "button", "evdev"]
"""The virtio network card QEMU's user network gets, and what acpid needs to see the power button."""
XZ_MAGIC = b"\xfd7zXZ\x00"
DIRECTORIES = ("bin", "dev", "etc", "lib", "lib/modules", "proc", "sys", "tmp", "var", "www")


def newest_kernel(boot: Path = Path("/boot")) -> Path:
    kernels = sorted(boot.glob("vmlinuz-*"), key=lambda path: [int(n) for n in re.findall(r"\d+", path.name)])
    if not kernels:
        sys.exit(f"no kernel in {boot}: install linux-image-amd64")
    return kernels[-1]


def vmlinux(bzimage: bytes) -> bytes | None:
    """The ELF kernel inside a bzImage whose payload is XZ; None if it is not."""
    start = bzimage.find(XZ_MAGIC)
    if start < 0:
        return None
    try:
        elf = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(bzimage[start:])
    except lzma.LZMAError:
        return None
    return elf if elf[:4] == b"\x7fELF" else None


def module_files(modules_dir: Path, names: list[str]) -> list[Path]:
    """The modules named and those they depend on, dependencies first, from ``modules.dep``."""
    deps: dict[str, list[str]] = {}
    for line in (modules_dir / "modules.dep").read_text().splitlines():
        module, _, needs = line.partition(":")
        deps[module] = needs.split()
    by_name = {re.sub(r"\.ko(\.\w+)?$", "", Path(module).name).replace("-", "_"): module for module in deps}
    ordered: list[str] = []

    def visit(module: str) -> None:
        if module in ordered:
            return
        for need in reversed(deps.get(module, [])):  # modules.dep lists the nearest dependency first
            visit(need)
        ordered.append(module)

    for name in names:
        module = by_name.get(name.replace("-", "_"))
        if module is None:
            sys.exit(f"module {name} is not in {modules_dir / 'modules.dep'}")
        visit(module)
    return [modules_dir / module for module in ordered]


def module_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    return lzma.decompress(data) if path.suffix == ".xz" else data


class Cpio:
    """An uncompressed ``newc`` archive, as the kernel unpacks an initramfs."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.inode = 1

    def add(self, name: str, mode: int, body: bytes = b"") -> None:
        encoded = name.encode() + b"\0"
        header = "070701" + "".join(f"{value:08x}" for value in (
            self.inode, mode, 0, 0, 1, 0, len(body), 0, 0, 0, 0, len(encoded), 0))
        self.inode += 1
        self.data += header.encode() + encoded
        self.data += b"\0" * (-len(self.data) % 4) + body
        self.data += b"\0" * (-len(self.data) % 4)

    def close(self) -> bytes:
        self.add("TRAILER!!!", 0)
        return bytes(self.data)


def initramfs(init: bytes, modules: list[Path], busybox: Path = BUSYBOX) -> bytes:
    archive = Cpio()
    for directory in DIRECTORIES:
        archive.add(directory, stat.S_IFDIR | 0o755)
    archive.add("bin/busybox", stat.S_IFREG | 0o755, busybox.read_bytes())
    archive.add("bin/sh", stat.S_IFLNK | 0o777, b"busybox")
    archive.add("init", stat.S_IFREG | 0o755, init)
    names = []
    for module in modules:
        name = re.sub(r"\.xz$", "", module.name)
        archive.add(f"lib/modules/{name}", stat.S_IFREG | 0o644, module_bytes(module))
        names.append(name)
    archive.add("etc/modules", stat.S_IFREG | 0o644, "".join(f"{name}\n" for name in names).encode())
    return archive.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--init", type=Path, default=HERE / "init.sh", help="the guest's /init script")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the directory for kernel and initrd")
    parser.add_argument("--module", action="append", help="a kernel module to include (repeatable; default: "
                        + " ".join(DEFAULT_MODULES) + ")")
    parser.add_argument("--kernel", type=Path, help="the compressed kernel (default: the newest /boot/vmlinuz-*)")
    args = parser.parse_args()
    kernel = args.kernel or newest_kernel()
    if not BUSYBOX.is_file():
        sys.exit(f"{BUSYBOX} is missing: install busybox-static")
    release = kernel.name.removeprefix("vmlinuz-")
    modules = module_files(Path("/lib/modules") / release, args.module or DEFAULT_MODULES)
    image = kernel.read_bytes()
    args.out.mkdir(parents=True, exist_ok=True)
    # Written beside and renamed, so that a reader never sees half a file.
    for name, data in (("kernel", vmlinux(image) or image), ("initrd", initramfs(args.init.read_bytes(), modules))):
        partial = args.out / f".{name}.{os.getpid()}"
        partial.write_bytes(data)
        partial.replace(args.out / name)
    print(f"{args.out / 'kernel'} ({kernel.name}), {args.out / 'initrd'} ({len(modules)} modules)")


if __name__ == "__main__":
    main()
