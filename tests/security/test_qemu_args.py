"""A qemu task's ``args`` where the operator allowed some options: a word that is no option's value.

QEMU reads a word standing alone on its command line as a disk image (as
``-hda``) and opens and probes it itself: a qcow2 image of the task's naming a
host file as its backing file gives the guest that file, past herder's check of
``image_path``'s header. Only options ``args_allowlist`` names, and the value
after each, may be given.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from herder import DriverError
from herder.testing.plugin import HarnessFactory
from tests.support.require import require_driver


def test_a_word_alone_in_args_is_refused(driver_harness: HarnessFactory, tmp_path: Path) -> None:
    require_driver("qemu")
    harness = driver_harness("qemu", {"args_allowlist": ["-smp"]})
    run = harness.task({"image_path": "local/disk.img", "drive_interface": "virtio",
                        "args": ["-smp", "1", "local/evil.qcow2"]})
    run.local_file("disk.img").write_bytes(b"\0" * 512)
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", "/etc/hostname", "-F", "raw",
                    str(run.local_file("evil.qcow2"))], check=True)
    with pytest.raises(DriverError, match=r"config\.args: local/evil\.qcow2 not allowed by \[plugin\.qemu\] "
                                          r"args_allowlist .*a word alone as a disk image"):
        run.prestart()


def test_an_allowed_option_keeps_its_value(driver_harness: HarnessFactory) -> None:
    require_driver("qemu")
    run = driver_harness("qemu", {"args_allowlist": ["-smp"]}).task(
        {"image_path": "local/disk.img", "args": ["-smp", "1"]})
    run.local_file("disk.img").write_bytes(b"\0" * 512)
    run.prestart()
