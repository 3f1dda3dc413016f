"""The configuration file: every mistake is a ConfigError naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from herder.client.config import ClientConfig, load_config
from herder.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "herder.toml"
    path.write_text(text)
    return path


def test_defaults_without_a_file(tmp_path: Path) -> None:
    config = load_config(None, data_dir=tmp_path)
    assert (config.data_dir, config.ports.min, config.ports.max) == (tmp_path, 20000, 32000)
    assert config.services_backend == "local" and config.plugin == {}
    assert config.tls.cert_file is None


def test_a_full_file(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, f"""
data_dir = "{tmp_path}/d"
token = "s3cret"
[ports]
min = 2000
max = 3000
reserved = "2001,2010-2012"
[services]
backend = "consul"
[consul]
address = "127.0.0.1:8500"
[plugins]
disabled = ["rkt"]
[client]
allow_file_outside = true
[plugin.raw_exec]
enabled = false
[tls]
cert_file = "{tmp_path}/agent.pem"
key_file = "~/agent-key.pem"
"""), disabled=("docker",))
    assert config.data_dir == tmp_path / "d"
    assert (config.tls.cert_file, config.tls.key_file) == (tmp_path / "agent.pem", Path.home() / "agent-key.pem")
    assert config.ports.reserved == {2001, 2010, 2011, 2012}
    assert config.disabled_plugins == {"rkt", "docker"}
    assert config.plugin == {"raw_exec": {"enabled": False}}
    assert config.services_backend == "consul"
    assert config.client.allow_file_outside and not load_config(None, data_dir=tmp_path).client.allow_file_outside


@pytest.mark.parametrize(("text", "message"), [
    ("[ports\nmin = 1", "herder.toml"),
    ("colour = 'blue'", "unknown key(s) at top level: colour"),
    ("[ports]\nminimum = 2000", "unknown key(s) at [ports]: minimum"),
    ("[ports]\nreserved = 'abc'", "invalid port or port range 'abc'"),
    ("[ports]\nmin = 5000\nmax = 4000", "0 < min <= max"),
    ("[ports]\nmin = 'low'", "herder.toml"),
    ("ports = 3", "[ports] must be a table"),
    ("[services]\nbackend = 'etcd'", "services.backend"),
    ("plugin = 1", "[plugin.NAME] entries must be tables"),
    ("[client]\nallow_file_outside = 'yes'", "[client] allow_file_outside must be true or false"),
    ("[client]\nallow_files = true", "unknown key(s) at [client]: allow_files"),
    ("[tls]\ncert_file = 'a.pem'", "[tls] cert_file and key_file are set together"),
    ("[tls]\nca_file = 'ca.pem'", "unknown key(s) at [tls]: ca_file"),
    ("[client]\nmax_kill_timeout = 'forever'", "[client] max_kill_timeout 'forever' is not a duration"),
    ("[client]\nuser_denylist = 'root'", "[client] user_denylist must be a list of names"),
    ("[client]\nuser_checked_drivers = [1]", "[client] user_checked_drivers must be a list of names"),
    ("[client]\nuser_allowlist = []", "unknown key(s) at [client]: user_allowlist"),
    ("[client]\ngc_interval = 'often'", "[client] gc_interval 'often' is not a duration"),
    ("[client]\ngc_interval = '0s'", "[client] gc_interval must be longer than 0s"),
    ("[client]\ngc_max_allocs = -1", "[client] gc_max_allocs must be a number from 0"),
    ("[client]\ngc_max_allocs = 2.5", "[client] gc_max_allocs must be a whole number, not 2.5"),
    ("[client]\ngc_disk_usage_threshold = 120", "[client] gc_disk_usage_threshold must be a number from 0 to 100"),
    ("[client]\ngc_disk_usage_threshold = '80%'", "[client] gc_disk_usage_threshold must be a number"),
    ("[client]\njob_gc_threshold = '4 hours'", "[client] job_gc_threshold '4 hours' is not a duration"),
    ("[telemetry]\ncollection_interval = '0s'", "[telemetry] collection_interval must be longer than 0s"),
    ("[telemetry]\ncollection_interval = 'now'", "[telemetry] collection_interval 'now' is not a duration"),
    ("[telemetry]\nprometheus_metrics = true", "unknown key(s) at [telemetry]: prometheus_metrics"),
    ("[agent]\nallowed_hosts = 'herder.example.com'", "[agent] allowed_hosts must be a list of names"),
])
def test_mistakes_are_config_errors(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    assert message in str(caught.value)
    assert str(caught.value).startswith(str(tmp_path / "herder.toml"))


def test_the_client_table(tmp_path: Path) -> None:
    assert load_config(None, data_dir=tmp_path).client == ClientConfig(
        max_kill_timeout=30.0, user_denylist=frozenset({"root"}),
        user_checked_drivers=frozenset({"exec", "java", "qemu"}))
    config = load_config(write(tmp_path, """
[client]
max_kill_timeout = "2m"
user_denylist = []
user_checked_drivers = ["exec", "raw_exec"]
"""))
    assert config.client == ClientConfig(max_kill_timeout=120.0, user_denylist=frozenset(),
                                         user_checked_drivers=frozenset({"exec", "raw_exec"}))


def test_the_allowed_hosts(tmp_path: Path) -> None:
    assert load_config(None, data_dir=tmp_path).agent.allowed_hosts == frozenset()
    config = load_config(write(tmp_path, '[agent]\nallowed_hosts = ["Herder.example.com", "10.0.0.5"]'))
    assert config.agent.allowed_hosts == frozenset({"herder.example.com", "10.0.0.5"})


def test_the_collection_interval(tmp_path: Path) -> None:
    assert load_config(None, data_dir=tmp_path).telemetry.collection_interval == 1.0
    config = load_config(write(tmp_path, '[telemetry]\ncollection_interval = "250ms"'))
    assert config.telemetry.collection_interval == 0.25


def test_the_garbage_collection_keys(tmp_path: Path) -> None:
    defaults = load_config(None, data_dir=tmp_path).client
    assert (defaults.gc_interval, defaults.gc_max_allocs, defaults.gc_disk_usage_threshold,
            defaults.job_gc_threshold) == (60.0, 50, 80.0, 4 * 3600.0)
    config = load_config(write(tmp_path, """
[client]
gc_interval = "30s"
gc_max_allocs = 0
gc_disk_usage_threshold = 92.5
job_gc_threshold = "1h30m"
"""))
    assert (config.client.gc_interval, config.client.gc_max_allocs, config.client.gc_disk_usage_threshold,
            config.client.job_gc_threshold) == (30.0, 0, 92.5, 5400.0)


def test_a_relative_data_dir_becomes_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every path herder hands a driver is absolute (Docker takes a relative bind source for a volume name)."""
    monkeypatch.chdir(tmp_path)
    config = load_config(None, data_dir=Path("data"))
    assert config.data_dir == tmp_path / "data"
    assert config.data_dir.is_absolute()
