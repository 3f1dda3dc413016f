"""The rkt driver's plugin configuration: defaults and refusals (herder reports a refused table as the
plugin failing to load)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.require import require

try:
    from herder_rkt.config import PluginConfig, TaskConfig, Volume
except ImportError:
    PluginConfig = None  # type: ignore[assignment, misc]


@pytest.fixture(autouse=True)
def _installed() -> None:
    require("rkt", PluginConfig is not None, "herder-rkt is not installed")


def test_defaults() -> None:
    config = PluginConfig.from_mapping({})
    assert (config.rkt, config.stage1_path, config.stage1_name, config.volumes_enabled, config.start_timeout) == \
        ("rkt", "", "", False, 5.0)
    assert not config.allow_insecure
    assert PluginConfig.from_mapping({"allow_insecure": True}).allow_insecure
    assert PluginConfig.from_mapping({"start_timeout": "1m30s"}).start_timeout == 90.0


@pytest.mark.parametrize(("table", "message"), [
    ({"bogus": 1}, "unknown [plugin.rkt] key(s): bogus"),
    ({"stage1_path": "/a.aci", "stage1_name": "b"}, "stage1_path and stage1_name exclude each other"),
    ({"start_timeout": "soon"}, "[plugin.rkt] start_timeout 'soon' is not a duration"),
    ({"start_timeout": 0}, "start_timeout must be longer than 0s"),
    ({"volumes_enabled": "yes"}, "volumes_enabled must be true or false"),
    ({"allow_insecure": 1}, "allow_insecure must be true or false"),
    ({"rkt": 5}, "[plugin.rkt] rkt must be a string"),
])
def test_refused(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        PluginConfig.from_mapping(table)
    assert message in str(raised.value)


def test_task_config() -> None:
    config = TaskConfig.from_mapping({"image": "x.aci", "net": ["host"], "volumes": ["data:/data:ro", "/a:/b"]})
    assert config.host_network
    assert config.volumes == (Volume("data", "/data", True), Volume("/a", "/b", False))
    assert not TaskConfig.from_mapping({"image": "x", "net": ["default"]}).host_network
