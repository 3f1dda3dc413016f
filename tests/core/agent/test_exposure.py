"""Where the agent may listen, and with what certificate: settled before it binds."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from herder.agent.daemon import check_exposure, is_loopback, tls_context
from herder.client.config import Config, TlsConfig
from herder.errors import ConfigError
from tests.support.consul import free_ports
from tests.support.tls import make_certificates


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("192.0.2.2", False), ("fe80::1%lo", False), ("nowhere.invalid", False),
])
def test_loopback_is_127_0_0_0_8_and_1(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_name_is_loopback_only_if_everything_it_resolves_to_is(monkeypatch: pytest.MonkeyPatch) -> None:
    addresses = ["127.0.0.1", "192.0.2.7"]

    def resolve(host: str, *args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, 0)) for address in addresses]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    assert not is_loopback("agent.example")
    addresses.pop()
    assert is_loopback("agent.example")


def test_beyond_loopback_a_token_is_required(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ConfigError, match=r"refusing to listen on 0\.0\.0\.0:4646 without a token.*set token"):
        check_exposure(Config(data_dir=tmp_path, bind="0.0.0.0:4646"))
    with pytest.raises(ConfigError, match="expected HOST:PORT"):
        check_exposure(Config(data_dir=tmp_path, bind="0.0.0.0"))
    check_exposure(Config(data_dir=tmp_path, bind="127.0.0.1:4646"))
    check_exposure(Config(data_dir=tmp_path, bind="[::1]:4646"))
    assert not caplog.records
    check_exposure(Config(data_dir=tmp_path, bind="0.0.0.0:4646", token="t"))
    assert "without TLS" in caplog.text  # allowed, with a warning


def test_a_certificate_that_cannot_be_loaded_is_named(tmp_path: Path) -> None:
    certificates = make_certificates(tmp_path)
    assert tls_context(TlsConfig()) is None
    assert tls_context(TlsConfig(certificates.cert, certificates.key)) is not None
    for cert, key in ((tmp_path / "nothing.pem", certificates.key), (certificates.cert, certificates.ca)):
        with pytest.raises(ConfigError, match=re.escape(f"[tls] cert_file {cert}, key_file {key}: cannot load")):
            tls_context(TlsConfig(cert, key))


def test_the_agent_exits_1_on_a_bad_certificate_before_listening(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n[tls]\ncert_file = "{tmp_path}/no.pem"\n'
                      f'key_file = "{tmp_path}/no.key"\n')
    port = free_ports(1)[0]
    ran = subprocess.run([sys.executable, "-m", "herder", "agent", "--config", str(config), "--bind",
                          f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 1
    assert len(ran.stderr.strip().splitlines()) == 1 and "[tls] cert_file" in ran.stderr, ran.stderr
    assert not (tmp_path / "data").exists()
