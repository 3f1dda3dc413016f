"""The agent's view of the configuration: what runs without isolation is off unless asked for."""

from __future__ import annotations

from pathlib import Path

import pytest

from herder.agent.agent import agent_config
from herder.client.config import Config


@pytest.mark.parametrize(("plugin", "raw_exec", "java"), [
    ({}, False, False),
    ({"raw_exec": {"enabled": True}}, True, True),
    # An operator may allow plain JVMs on their own, or refuse them beside raw_exec.
    ({"java": {"allow_unisolated": True}}, False, True),
    ({"raw_exec": {"enabled": True}, "java": {"allow_unisolated": False}}, True, False),
])
def test_plain_jvms_are_allowed_where_raw_exec_is(tmp_path: Path, plugin: dict[str, dict[str, bool]],
                                                  raw_exec: bool, java: bool) -> None:
    config = agent_config(Config(data_dir=tmp_path, plugin=plugin))
    assert config.plugin["raw_exec"]["enabled"] is raw_exec
    assert config.plugin["java"]["allow_unisolated"] is java
