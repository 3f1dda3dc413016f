"""The qemu driver's fingerprint: QEMU's version, and whether KVM really runs a guest here."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from herder_qemu import kvm

from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins
from tests.support.waiting import TIMEOUT


def test_reports_the_version_of_qemu_and_whether_kvm_works(qemu_driver: str) -> None:
    fingerprint = Hooks(load_plugins()).fingerprint("qemu")
    said = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, text=True, check=True).stdout
    version = fingerprint.attributes["driver.qemu.version"]
    assert f"QEMU emulator version {version}" in said.splitlines()[0]
    assert fingerprint.attributes["driver.qemu.kvm"] in ("true", "false")
    works, why = kvm.probe()
    assert fingerprint.attributes["driver.qemu.kvm"] == str(works).lower()
    assert why in fingerprint.description


def test_without_qemu_the_driver_is_not_detected(qemu_driver: str) -> None:
    fingerprint = Hooks(load_plugins({"qemu": {"emulator": "/nonexistent/qemu"}})).fingerprint("qemu")
    assert (fingerprint.detected, fingerprint.healthy) == (False, False)
    assert "QEMU not found: /nonexistent/qemu" in fingerprint.description


def test_the_kvm_probe_runs_a_guest_within_its_deadline(qemu_driver: str) -> None:
    """The probe itself, even where the cheap checks already say no: it ends in time and says why."""
    started = time.monotonic()
    works, why = kvm.probe(timeout=kvm.PROBE_TIMEOUT, skip_precheck=True)
    assert time.monotonic() - started < TIMEOUT  # a hang-stopper: the probe's own deadline is PROBE_TIMEOUT
    assert why
    if kvm.precheck() is not None:
        assert not works, f"KVM cannot work here ({kvm.precheck()}), yet the probe says: {why}"


def test_the_precheck_needs_hardware_virtualisation(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu vme de pse tsc msr pae\n")
    reason = kvm.precheck(cpuinfo, tmp_path)
    if kvm.DEVICE.exists():
        assert reason is not None and "no vmx or svm" in reason
    else:
        assert reason == f"{kvm.DEVICE} does not exist"
