"""``[nomad_api]`` in the agent's configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from herder.client.config import load_config
from herder.errors import ConfigError


def config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agent.toml"
    path.write_text(text)
    return path


def test_the_nomad_listener_is_off_by_default(tmp_path: Path) -> None:
    assert load_config(config(tmp_path, "")).nomad_api.bind == ""


def test_the_nomad_listener_binds_where_told(tmp_path: Path) -> None:
    loaded = load_config(config(tmp_path, '[nomad_api]\nbind = "127.0.0.1:4656"\n'))
    assert loaded.nomad_api.bind == "127.0.0.1:4656"


@pytest.mark.parametrize(("text", "message"), [
    ('[nomad_api]\nbind = "localhost"\n', "[nomad_api] bind address 'localhost': expected HOST:PORT"),
    ('[nomad_api]\nbind = "127.0.0.1:99999"\n', "[nomad_api] bind address '127.0.0.1:99999': expected HOST:PORT"),
    ("[nomad_api]\nbind = 4646\n", "[nomad_api] bind must be a string HOST:PORT, not 4646"),
    ('[nomad_api]\nport = "4646"\n', "unknown key(s) at [nomad_api]: port"),
    ('nomad_api = "127.0.0.1:4646"\n', "[nomad_api] must be a table"),
])
def test_a_wrong_nomad_listener_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(config(tmp_path, text))
    assert message in str(raised.value) and str(tmp_path / "agent.toml") in str(raised.value)
