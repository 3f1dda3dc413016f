"""Host volumes in java tasks: an isolated JVM sees them in its container; a plain JVM cannot mount them."""

from __future__ import annotations

import pytest

from herder import DriverError, HostMount
from herder.testing.plugin import HarnessFactory

from .helpers import PLAIN, app


def test_an_isolated_jvm_sees_its_host_volume(java_driver: str, java_app: None, isolated: dict[str, str],
                                              driver_harness: HarnessFactory) -> None:
    harness = driver_harness("java", isolated)
    assert harness.hooks.capabilities("java").volume_mounts
    volume = harness.data_dir.parent / "volume"
    volume.mkdir()
    (volume / "given").write_text("from the operator\n")
    run = harness.task(app("exists", "/srv/data/given", "/srv/data/absent"))
    run.ctx.mounts.append(HostMount(source=volume, destination="/srv/data", read_only=True))
    run.start()
    result = run.wait(60)
    assert result is not None and result.exit_code == 0, run.output("stderr")
    assert run.output("stdout").decode().splitlines() == ["/srv/data/given yes", "/srv/data/absent no"]


def test_a_plain_jvm_cannot_mount_host_volumes(java_driver: str, driver_harness: HarnessFactory) -> None:
    harness = driver_harness("java", PLAIN)
    assert not harness.hooks.capabilities("java").volume_mounts
    run = harness.task(app("env"))
    run.ctx.mounts.append(HostMount(source=harness.data_dir, destination="/srv/data"))
    with pytest.raises(DriverError, match="driver java cannot mount host volumes"):
        run.start()
