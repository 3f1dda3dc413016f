"""Under Nomad, the host volumes Nomad's client resolved for a task reach the herder driver as ``ctx.mounts``."""

from __future__ import annotations

import io
from pathlib import Path

from herder import HostMount
from herder_nomad.tasks import build_context
from herder_nomad.wire import driver_pb2

from .test_one_script import task_config


def test_nomads_mounts_become_the_tasks_host_mounts(tmp_path: Path) -> None:
    config = task_config(tmp_path)
    config.mounts.append(driver_pb2.Mount(task_path="/srv/data", host_path=str(tmp_path / "pg"), readonly=True))
    ctx = build_context(config, None, lambda event: None, outputs=(io.BytesIO(), io.BytesIO()))
    assert ctx.mounts == [HostMount(source=tmp_path / "pg", destination="/srv/data", read_only=True)]
