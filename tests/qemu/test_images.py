"""What QEMU is given of a task's images: the format herder pins, headers checked by ``qemu-img`` before QEMU
opens them, and the group that opens ``/dev/kvm`` to QEMU's user. Without booting anything."""

from __future__ import annotations

import grp
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from herder_qemu import images, kvm

from herder.sdk import TaskUser
from tests.support.require import require


@pytest.fixture
def qemu_img(qemu_driver: str) -> str:
    found = shutil.which("qemu-img")
    require("qemu", found is not None, "no qemu-img (Debian: qemu-utils)")
    assert found is not None
    return found


def create(qemu_img: str, image: Path, *options: str) -> None:
    subprocess.run([qemu_img, "create", "-f", "qcow2", *options, str(image), "1M"], check=True, capture_output=True,
                   timeout=30)


def test_a_self_contained_qcow2_passes_as_the_tasks_user(qemu_img: str, readable_dir: Path) -> None:
    create(qemu_img, readable_dir / "disk.qcow2")
    nobody = TaskUser.lookup("nobody")
    os.chown(readable_dir / "disk.qcow2", nobody.uid, nobody.gid)
    (readable_dir / "disk.qcow2").chmod(0o600)
    images.check_qcow2(qemu_img, "disk.qcow2", cwd=readable_dir, user=nobody)
    assert images.image_format(readable_dir / "disk.qcow2") == "qcow2"


@pytest.mark.parametrize(("option", "named"), [
    ("data_file={target}", "an external data file"),
    ("data_file={target},data_file_raw=on", "an external data file"),
    ("backing_file={target},backing_fmt=raw", "a backing file"),
])
def test_a_qcow2_naming_any_other_file_is_refused(qemu_img: str, tmp_path: Path, option: str, named: str) -> None:
    """Even a file in the same directory, readable by the task's user: no header names a file."""
    target = tmp_path / "other.img"
    target.write_bytes(b"\0" * 1024 * 1024)
    create(qemu_img, tmp_path / "disk.qcow2", "-o", option.format(target=target))
    with pytest.raises(ValueError, match=rf"disk\.qcow2 names {named} \({target}\): herder boots self-contained"):
        images.check_qcow2(qemu_img, "disk.qcow2", cwd=tmp_path, user=None)


def test_an_image_qemu_img_cannot_read_is_refused_with_its_message(qemu_img: str, tmp_path: Path) -> None:
    (tmp_path / "disk.qcow2").write_bytes(images.QCOW2_MAGIC + b"\0" * 60)  # no version qemu-img knows
    with pytest.raises(ValueError, match=r"qemu-img cannot read disk\.qcow2 as a qcow2 image: .*qcow2"):
        images.check_qcow2(qemu_img, "disk.qcow2", cwd=tmp_path, user=None)


def test_qemu_img_has_a_deadline(tmp_path: Path) -> None:
    stuck = tmp_path / "qemu-img"
    stuck.write_text("#!/bin/sh\nexec sleep 60\n")
    stuck.chmod(0o755)
    with pytest.raises(ValueError, match=r"qemu-img could not read disk\.qcow2's header within 0\.5s"):
        images.check_qcow2(str(stuck), "disk.qcow2", cwd=tmp_path, user=None, timeout=0.5)


def test_qemu_img_is_found_beside_the_emulator(tmp_path: Path) -> None:
    (tmp_path / "qemu-img").write_text("#!/bin/sh\n")
    (tmp_path / "qemu-img").chmod(0o755)
    assert images.find_qemu_img(str(tmp_path / "qemu-system-x86_64")) == str(tmp_path / "qemu-img")


def test_the_format_is_read_from_a_regular_file_only(tmp_path: Path) -> None:
    (tmp_path / "raw.img").write_bytes(b"\0" * 512)
    assert images.image_format(tmp_path / "raw.img") == "raw"
    (tmp_path / "link.img").symlink_to(tmp_path / "raw.img")
    with pytest.raises(ValueError, match=r"cannot open .*link\.img"):
        images.image_format(tmp_path / "link.img")
    os.mkfifo(tmp_path / "fifo.img")
    with pytest.raises(ValueError, match=r"fifo\.img is not a regular file"):
        images.image_format(tmp_path / "fifo.img")


@pytest.fixture
def device(tmp_path: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another group needs root")
    return tmp_path / "kvm"


def test_kvm_is_opened_by_its_group_not_by_root(device: Path) -> None:
    kvm_group = next((group.gr_gid for group in grp.getgrall() if group.gr_name == "kvm"), 4242)
    nobody = TaskUser.lookup("nobody")
    device.touch()
    device.chmod(0o660)
    os.chown(device, 0, kvm_group)
    assert kvm.device_groups(nobody.uid, nobody.groups, device) == (kvm_group,)
    assert kvm.device_groups(nobody.uid, (*nobody.groups, kvm_group), device) == ()  # already in it

    device.chmod(0o666)
    assert kvm.device_groups(nobody.uid, nobody.groups, device) == ()

    device.chmod(0o660)
    os.chown(device, 0, 0)
    with pytest.raises(ValueError, match=r"kvm is open to root only .*give .* a group of its own"):
        kvm.device_groups(nobody.uid, nobody.groups, device)

