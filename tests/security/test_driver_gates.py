"""What a driver grants a task only where the operator said so.

- qemu: ``args`` hand QEMU any option, ``-drive file=/dev/sda`` (the host's disk, to the guest) among
  them: refused unless ``[plugin.qemu] args_allowlist`` names the option.
- rkt: ``insecure_options`` run unsigned images and drop the pod's restrictions: refused unless
  ``[plugin.rkt] allow_insecure``.
- exec: the OCI bundle's ``config.json`` holds the task's environment, secrets included: no other
  user of the host may read it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from herder import DriverError
from herder.testing.plugin import HarnessFactory
from tests.support.require import require_driver


def test_qemu_args_reaching_a_host_disk_are_refused_by_default(driver_harness: HarnessFactory,
                                                               tmp_path: Path) -> None:
    require_driver("qemu")
    run = driver_harness("qemu").task({"image_path": "local/disk.img",
                                       "args": ["-drive", "file=/dev/sda,format=raw,if=virtio"]})
    run.local_file("disk.img").write_bytes(b"\0" * 512)  # a disk of its own, so only args stand in the way
    with pytest.raises(DriverError, match=r"config\.args: .*\[plugin\.qemu\] args_allowlist"):
        run.prestart()


def test_qemu_args_are_allowed_option_by_option(driver_harness: HarnessFactory) -> None:
    require_driver("qemu")
    harness = driver_harness("qemu", {"args_allowlist": ["-smp"]})
    run = harness.task({"image_path": "local/disk.img", "args": ["-smp", "1", "--drive", "file=/dev/sda"]})
    run.local_file("disk.img").write_bytes(b"\0" * 512)
    with pytest.raises(DriverError, match=r"config\.args: --drive not allowed by \[plugin\.qemu\] args_allowlist"):
        run.prestart()


def test_rkt_insecure_options_are_refused_by_default(driver_harness: HarnessFactory) -> None:
    require_driver("rkt", healthy=False)
    run = driver_harness("rkt").task({"image": "example.com/unsigned:1.0", "insecure_options": ["image", "all-run"]})
    with pytest.raises(DriverError, match=r"config\.insecure_options: .*\[plugin\.rkt\] allow_insecure = true"):
        run.prestart()


def test_the_exec_bundle_is_not_readable_by_other_users(driver_harness: HarnessFactory) -> None:
    require_driver("exec")
    old = os.umask(0o022)  # as a root daemon usually runs
    run = driver_harness("exec").task({"command": "/bin/sleep", "args": ["60"]}, env={"API_KEY": "s3cret"})
    run.start()
    try:
        bundles = [Path(value) for kind, value in run.ctx.created.items() if kind == "bundle"]
        assert bundles, run.ctx.created.items()
        config = bundles[0] / "config.json"
        assert b"s3cret" in config.read_bytes()
        assert stat.S_IMODE(bundles[0].stat().st_mode) == 0o700
        assert stat.S_IMODE(config.stat().st_mode) == 0o600
    finally:
        run.kill()
        os.umask(old)
