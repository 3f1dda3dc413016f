"""The plugins' tables as the front ends create them: plain JVMs are allowed where raw_exec is."""

from __future__ import annotations

from pathlib import Path

import pytest

from herder.app import agent_config, plugin_tables
from herder.client.config import Config


@pytest.mark.parametrize(("agent", "plugin", "disabled", "java"), [
    (False, {}, (), True),  # herder run: raw_exec is enabled
    (False, {"raw_exec": {"enabled": False}}, (), False),
    (False, {}, ("raw_exec",), False),
    (True, {}, (), False),  # the agent: raw_exec is off unless enabled
    (True, {"raw_exec": {"enabled": True}}, (), True),
    # An operator may allow plain JVMs on their own, or refuse them beside raw_exec.
    (True, {"java": {"allow_unisolated": True}}, (), True),
    (False, {"java": {"allow_unisolated": False}}, (), False),
])
def test_plain_jvms_are_allowed_where_raw_exec_is(tmp_path: Path, agent: bool, plugin: dict[str, dict[str, bool]],
                                                  disabled: tuple[str, ...], java: bool) -> None:
    config = Config(data_dir=tmp_path, plugin=plugin, disabled_plugins=frozenset(disabled))
    tables = plugin_tables(agent_config(config) if agent else config)
    assert tables["java"]["allow_unisolated"] is java
