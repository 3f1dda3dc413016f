"""The agent's own token (``<data_dir>/agent.token``): made once, kept, refused when it is not the
agent's alone; and how the command line finds it. (The attacks: tests/security/test_closed_by_default.py.)"""

from __future__ import annotations

import logging
import os
import re
import stat
from pathlib import Path

import pytest

from herder.agent.credential import agent_token, with_token
from herder.cli.client import local_token
from herder.client.config import AgentConfig, Config, load_config
from herder.credential import TOKEN_FILE, cli_token, default_data_dir, read_token
from herder.errors import ConfigError


def test_the_first_start_makes_a_token_that_later_starts_keep(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    token = agent_token(data_dir)
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", token)  # 256 bits, url-safe
    status = (data_dir / TOKEN_FILE).lstat()
    assert stat.S_ISREG(status.st_mode) and stat.S_IMODE(status.st_mode) == 0o600
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    assert os.listdir(data_dir) == [TOKEN_FILE]  # no temporary file left
    assert agent_token(data_dir) == token
    assert agent_token(tmp_path / "other") != token


def test_a_configured_token_wins_and_no_file_is_made(tmp_path: Path) -> None:
    config = with_token(Config(data_dir=tmp_path / "data", token="configured"))
    assert config.token == "configured" and not (tmp_path / "data").exists()
    assert with_token(Config(data_dir=tmp_path / "data")).token == read_token(tmp_path / "data") != ""


def test_insecure_no_token_leaves_the_agent_open_and_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "herder.agent"):
        config = with_token(Config(data_dir=tmp_path / "data", agent=AgentConfig(insecure_no_token=True)))
    assert config.token == "" and not (tmp_path / "data" / TOKEN_FILE).exists()
    assert caplog.records[0].levelno == logging.WARNING
    assert "insecure_no_token" in caplog.text and "every user and every task" in caplog.text


@pytest.mark.parametrize(("spoil", "reason"), [
    (lambda path: path.chmod(0o644), "mode 0644: other users may read or change it"),
    (lambda path: path.chmod(0o620), "mode 0620"),
    (lambda path: os.chown(path, 65534, 65534), "owned by uid 65534, not by the agent's user"),
    (lambda path: path.write_text("short\n"), "holds no token"),
    (lambda path: (path.unlink(), path.symlink_to(path.parent / "elsewhere")), "a link"),
    (lambda path: (path.unlink(), path.mkdir()), "not a regular file"),
])
def test_a_token_file_that_is_not_the_agents_alone_is_refused(tmp_path: Path, spoil: object, reason: str) -> None:
    if "owned" in reason and os.geteuid() != 0:
        pytest.skip("giving a file away needs root")
    data_dir = tmp_path / "data"
    agent_token(data_dir)
    (data_dir / "elsewhere").write_text("x" * 43)
    spoil(data_dir / TOKEN_FILE)  # type: ignore[operator]
    with pytest.raises(ConfigError) as refused:
        with_token(Config(data_dir=data_dir))
    message = str(refused.value)
    assert message.startswith(f"{data_dir / TOKEN_FILE}: ") and reason in message, message
    assert message.endswith("remove it, and the agent makes a new token")


def test_the_agent_config_table(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text("[agent]\ninsecure_no_token = true\n")
    assert load_config(path).agent.insecure_no_token is True
    assert load_config(None).agent.insecure_no_token is False
    for text, error in (('[agent]\ninsecure_no_token = "yes"\n', "[agent] insecure_no_token must be true or false"),
                        ("[agent]\nopen = true\n", "unknown key(s) at [agent]: open"),
                        ('token = "t"\n[agent]\ninsecure_no_token = true\n', "with a token: choose one")):
        path.write_text(text)
        with pytest.raises(ConfigError, match=re.escape(error)):
            load_config(path)


def test_the_command_line_reads_the_token_of_its_configuration(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n')
    assert cli_token(config) == ""  # no agent started yet: the agent will say how to get it
    token = agent_token(tmp_path / "data")
    assert cli_token(config) == token
    config.write_text(f'data_dir = "{tmp_path / "data"}"\ntoken = "configured"\n')
    assert cli_token(config) == "configured"
    config.write_text("data_dir = \n")
    with pytest.raises(ConfigError, match=re.escape(f"{config}: cannot read: ")):
        cli_token(config)


def test_without_a_configuration_the_command_line_reads_the_default_data_dir(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert default_data_dir(agent=True) == Path("/var/lib/herder")  # root's agent, as the agent computes it
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_data_dir(agent=True) == tmp_path / "herder"
    assert cli_token(None) == ""
    token = agent_token(tmp_path / "herder")
    assert cli_token(None) == token
    assert local_token("127.0.0.1") == local_token("::1") == local_token("localhost") == token
    # A token found on this host goes to this host's agent only.
    assert local_token("192.0.2.7") == local_token("agent.example") == ""


def test_the_token_file_is_read_as_a_token_not_followed(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o700)
    (tmp_path / "planted").write_text("A" * 43)
    (data_dir / TOKEN_FILE).symlink_to(tmp_path / "planted")
    assert read_token(data_dir) == ""
