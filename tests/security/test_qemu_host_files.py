"""A qemu task reaching the host's files through QEMU: QEMU ran as root whatever the task's ``user``, and
opened whatever its paths and its images' headers named.

- ``initrd = "local/x,/etc/shadow"``, a real file of that name (a template made it) that passes the path
  check: QEMU's multiboot loader splits the value at the comma and loads ``/etc/shadow`` as a module.
- A qcow2 image in the task dir whose header names a host file as its external data file, or as its
  backing file: the guest reads (and writes) that file, as root.
- A root-only image among the operator's ``image_paths``, a link in the task dir to a host file.

QEMU now runs as the task's user (default ``nobody``), images with a header are inspected before QEMU
opens them, and paths holding QEMU's separators are refused.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from herder import DriverError
from herder.errors import JobError
from herder.testing.plugin import HarnessFactory
from tests.qemu.helpers import DEBUG_EXIT, boot_sector, readable_tmp
from tests.support.require import require, require_driver
from tests.support.waiting import wait_for

SECRET = b"host-secret: the canary's content"
NOBODY = pwd.getpwnam("nobody")
PLUGIN = {"args_allowlist": ["-device"]}
"""The guest ends QEMU through isa-debug-exit, so that a boot that reads the canary is seen at once."""


@pytest.fixture(autouse=True)
def qemu() -> None:
    require_driver("qemu")


@pytest.fixture
def canary() -> Iterator[Path]:
    """A root-only host file outside any task dir: a disk whose boot sector prints :data:`SECRET`."""
    with readable_tmp() as directory:
        yield directory / "canary"


def seal(canary: Path) -> tuple[bytes, os.stat_result]:
    """Give the canary its content, root's and 0600; what it holds and its status, to compare after."""
    canary.write_bytes(boot_sector(SECRET, 1))
    os.chown(canary, 0, 0)
    canary.chmod(0o600)
    return canary.read_bytes(), canary.stat()


def untouched(canary: Path, before: tuple[bytes, os.stat_result]) -> None:
    content, status = before
    after = canary.stat()
    assert canary.read_bytes() == content
    assert (after.st_size, after.st_mtime_ns, after.st_uid, after.st_mode) == (
        status.st_size, status.st_mtime_ns, status.st_uid, status.st_mode)


def qemu_img(*args: str) -> None:
    require("qemu", shutil.which("qemu-img") is not None, "no qemu-img (Debian: qemu-utils)")
    subprocess.run(["qemu-img", *args], check=True, capture_output=True, timeout=30)


def test_a_comma_in_initrd_does_not_load_a_host_file_as_a_multiboot_module(driver_harness: HarnessFactory) -> None:
    harness = driver_harness("qemu")
    attack = "local/x,/etc/shadow"
    run = harness.task({"kernel": "local/kernel", "initrd": attack})
    (run.ctx.task_dir.dir / attack).parent.mkdir(parents=True)
    (run.ctx.task_dir.dir / attack).write_bytes(b"a template's output")  # passes the path check
    run.local_file("kernel").write_bytes(b"a multiboot kernel")
    with pytest.raises(JobError, match=r"config\.initrd: must not hold a comma"):
        run.prestart()

    # The same path made by a variable that a prestart step gave its value, after the schema was checked.
    run = harness.task({"kernel": "local/kernel", "initrd": "local/x${SEP}/etc/shadow"}, env={"SEP": "-"})
    (run.ctx.task_dir.dir / "local/x-/etc").mkdir(parents=True)
    (run.ctx.task_dir.dir / "local/x-/etc/shadow").write_bytes(b"a template's output")
    run.local_file("kernel").write_bytes(b"a multiboot kernel")
    run.prestart()
    run.ctx.env["SEP"] = ","
    with pytest.raises(DriverError, match=r"\.config\.initrd: 'local/x,/etc/shadow' must not hold a comma"):
        run.start()


@pytest.mark.parametrize("header", ["data_file", "backing_file"])
def test_a_qcow2_header_naming_a_host_file_is_refused(driver_harness: HarnessFactory, canary: Path,
                                                     header: str) -> None:
    run = driver_harness("qemu", PLUGIN).task({"image_path": "local/disk.qcow2", "args": DEBUG_EXIT})
    image = run.local_file("disk.qcow2")
    if header == "data_file":  # the guest's disk is the host file itself, read and written through
        qemu_img("create", "-f", "qcow2", "-o", f"data_file={canary},data_file_raw=on", str(image), "1M")
    else:  # what the guest has not written is read from the host file
        canary.write_bytes(b"")
        qemu_img("create", "-f", "qcow2", "-b", str(canary), "-F", "raw", str(image), "1M")
    before = seal(canary)
    run.prestart()
    named = "an external data file" if header == "data_file" else "a backing file"
    with pytest.raises(DriverError, match=rf"config\.image_path: local/disk\.qcow2 names {named} "
                                          rf"\({re.escape(str(canary))}\)"):
        run.start()
    assert SECRET not in run.output()
    untouched(canary, before)


def test_qemu_runs_as_the_tasks_user_not_root(driver_harness: HarnessFactory) -> None:
    """A disk that halts at once: QEMU runs on until it is stopped."""
    run = driver_harness("qemu").task({"image_path": "local/disk.img"})
    run.local_file("disk.img").write_bytes(boot_sector(b"halted", 0))
    run.start()
    try:
        assert run.handle is not None
        status = dict(line.split(":", 1) for line in Path(f"/proc/{run.handle.pid}/status").read_text().splitlines())
        assert "qemu-system" in Path(f"/proc/{run.handle.pid}/cmdline").read_text()
        assert status["Uid"].split() == [str(NOBODY.pw_uid)] * 4
        assert status["Gid"].split() == [str(NOBODY.pw_gid)] * 4
        assert set(map(int, status["Groups"].split())) == set(os.getgrouplist("nobody", NOBODY.pw_gid))
        assert status["CapEff"].strip() == "0" * 16
        wait_for(lambda: b"halted" in run.output(), 30, "the guest's line")
    finally:
        run.kill()


def test_a_root_only_image_in_image_paths_is_not_opened(driver_harness: HarnessFactory, canary: Path) -> None:
    """The kernel's permission check stands behind the path check: QEMU cannot open what its user cannot."""
    harness = driver_harness("qemu", {**PLUGIN, "image_paths": [str(canary.parent)]})
    before = seal(canary)
    run = harness.task({"image_path": str(canary), "args": DEBUG_EXIT})
    run.prestart()
    with pytest.raises(DriverError, match=r"QEMU could not start the machine: .*Permission denied"):
        run.start()
    assert SECRET not in run.output()
    untouched(canary, before)


@pytest.mark.parametrize("target", ["/dev/sda", "/etc/shadow"])
def test_a_link_in_the_task_dir_to_a_host_file_is_refused(driver_harness: HarnessFactory, target: str) -> None:
    run = driver_harness("qemu").task({"image_path": "local/disk.img"})
    run.local_file("disk.img").symlink_to(target)
    with pytest.raises(DriverError, match=r"config\.image_path: local/disk\.img is outside the task directory"):
        run.prestart()
