"""The disk images a task boots: their format, pinned by herder, and headers that name no other file.

QEMU told to probe an image's format, or to follow what a qcow2 header says,
opens the files the header names: a backing file, an external data file
(``data-file``), each possibly a host file (``/etc/shadow``, ``/dev/sda``),
which the guest then reads or writes. herder therefore decides the format
itself (qcow2 by its magic, else raw, which has no header) and gives it to
QEMU, and inspects a qcow2 image with ``qemu-img info`` (as the task's user,
bounded in time and output) before QEMU opens it: an image that names a
backing file or a data file is refused. herder boots self-contained images.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from herder.sdk import TaskUser, run_capped

QCOW2_MAGIC = b"QFI\xfb"
QEMU_IMG = "qemu-img"
INFO_TIMEOUT = 10.0
"""How long ``qemu-img info`` has to read an image's header."""


def image_format(path: Path) -> str:
    """``qcow2`` for an image with qcow2's magic, else ``raw``.

    :raises ValueError: it is not a regular file (a link planted after the path was checked, a device).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ValueError(f"cannot open {path}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path} is not a regular file")
        return "qcow2" if os.pread(fd, len(QCOW2_MAGIC), 0) == QCOW2_MAGIC else "raw"
    finally:
        os.close(fd)


def find_qemu_img(emulator: str) -> str | None:
    """``qemu-img`` beside the emulator, else on PATH."""
    beside = Path(emulator).with_name(QEMU_IMG)
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(QEMU_IMG)


def check_qcow2(qemu_img: str, image: str, *, cwd: Path, user: TaskUser | None,
                timeout: float = INFO_TIMEOUT) -> None:
    """Check that the qcow2 image ``image`` (a path relative to ``cwd``, or absolute) names no other file.

    ``qemu-img info`` opens the image as ``user`` (when given), format
    pinned, without its backing chain; a data file it cannot open as that
    user fails it, and so refuses the image as well.

    :raises ValueError: the image names a backing file or a data file, or ``qemu-img`` cannot read it.
    """
    argv = [qemu_img, "info", "--output=json", "-f", "qcow2", image]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    try:
        done = run_capped(argv, env=env, cwd=cwd, timeout=timeout, user=user)
    except TimeoutError:
        raise ValueError(f"qemu-img could not read {image}'s header within {timeout:g}s") from None
    except OSError as exc:
        raise ValueError(f"cannot run {qemu_img}: {exc}") from None
    output = done.output.decode(errors="replace")
    if done.exit_code != 0:
        raise ValueError(f"qemu-img cannot read {image} as a qcow2 image: {_last_line(output)}")
    info = _json_object(output)
    if info is None:
        raise ValueError(f"qemu-img said no JSON about {image}: {_last_line(output)}")
    backing = info.get("backing-filename")
    if backing:
        raise ValueError(f"{image} names a backing file ({backing}): herder boots self-contained images only "
                         f"(qemu-img convert makes one)")
    specific = info.get("format-specific")
    data = specific.get("data") if isinstance(specific, dict) else None
    data_file = data.get("data-file") if isinstance(data, dict) else None
    if data_file:
        raise ValueError(f"{image} names an external data file ({data_file}): herder boots self-contained images "
                         f"only (qemu-img convert makes one)")


def _json_object(output: str) -> dict[str, Any] | None:
    """The JSON object in ``qemu-img``'s output (a warning on stderr may come before it)."""
    start = output.find("{")
    if start < 0:
        return None
    try:
        found, _ = json.JSONDecoder().raw_decode(output, start)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _last_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1][:500] if lines else "no output"
