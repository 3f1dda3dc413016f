"""The plugin's own side of the protocol, without Nomad: cty msgpack, config shapes, the go-plugin handshake."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import msgpack  # type: ignore[import-untyped]
import pytest

from herder_nomad import cty
from herder_nomad.driver import as_objects
from herder_nomad.plugin import MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE
from herder_nomad.wire import (
    base_pb2,
    base_pb2_grpc,
    driver_pb2,
    driver_pb2_grpc,
    grpc_controller_pb2,
    grpc_controller_pb2_grpc,
)
from tests.nomad.helpers import PLUGIN

TASK_TYPE: cty.CtyType = ["object", {"driver": "string", "config": "dynamic"}]


def test_a_dynamic_attribute_is_read_by_the_type_it_carries() -> None:
    data = cty.encode_object({"driver": ("string", "docker"),
                              "config": ("dynamic", {"image": "busybox", "args": ["-f", 1.5], "port_map": {"a": 80}})})
    assert cty.decode(data, TASK_TYPE) == {
        "driver": "docker", "config": {"image": "busybox", "args": ["-f", 1.5], "port_map": {"a": 80}}}


def test_a_value_encoded_by_its_concrete_type_is_read_as_is() -> None:
    # What Nomad sends for a task's config: the object's concrete type, no [type, value] wrapper.
    data = msgpack.packb({"driver": "raw_exec", "config": [{"command": "/bin/sh", "args": ["-c", "true"]}]})
    assert cty.decode(data, TASK_TYPE) == {"driver": "raw_exec",
                                           "config": [{"command": "/bin/sh", "args": ["-c", "true"]}]}


def test_numbers_beyond_64_bits_arrive_as_text() -> None:
    data = msgpack.packb({"n": "123456789012345678901234567890", "f": "1.5e400"})
    assert cty.decode(data, ["object", {"n": "number", "f": "number"}]) == {
        "n": 123456789012345678901234567890, "f": float("inf")}


def test_an_unknown_value_is_an_error_naming_it() -> None:
    data = msgpack.packb({"driver": msgpack.ExtType(0, b""), "config": None})
    with pytest.raises(cty.CtyError, match="driver is not known yet"):
        cty.decode(data, TASK_TYPE)


def test_absent_attributes_are_null() -> None:
    assert cty.decode(msgpack.packb({"driver": "x"}), TASK_TYPE) == {"driver": "x", "config": None}


def test_blocks_become_objects_where_the_schema_wants_objects() -> None:
    schema = {"type": "object", "properties": {
        "port_map": {"type": "object", "additionalProperties": {"type": "integer"}},
        "args": {"type": "array", "items": {"type": "string"}},
        "mounts": {"type": "array", "items": {"type": "object"}}}}
    config = {"port_map": [{"http": 80}, {"admin": 81}], "args": ["a"], "mounts": [{"target": "/x"}]}
    assert as_objects(config, schema) == {"port_map": {"http": 80, "admin": 81}, "args": ["a"],
                                          "mounts": [{"target": "/x"}]}


def test_without_the_magic_cookie_the_plugin_explains_itself() -> None:
    env = {k: v for k, v in os.environ.items() if k != MAGIC_COOKIE_KEY}
    result = subprocess.run([str(PLUGIN)], capture_output=True, text=True, env=env, timeout=30)
    assert result.returncode == 1
    assert "plugin" in result.stderr and result.stdout == ""


@pytest.fixture
def plugin(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], grpc.Channel]]:
    env = {**os.environ, MAGIC_COOKIE_KEY: MAGIC_COOKIE_VALUE, "PLUGIN_PROTOCOL_VERSIONS": "2",
           "PLUGIN_MIN_PORT": "10000", "PLUGIN_MAX_PORT": "10100"}
    process = subprocess.Popen([str(PLUGIN)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               env=env, cwd=tmp_path)
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        core, app, network, address, protocol = line.split("|")
        assert (core, app, network, protocol) == ("1", "2", "unix", "grpc")
        channel = grpc.insecure_channel(f"unix:{address}")
        yield process, channel
        channel.close()
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def test_the_handshake_the_base_plugin_and_shutdown(plugin: tuple[subprocess.Popen[str], grpc.Channel],
                                                    tmp_path: Path) -> None:
    process, channel = plugin
    base = base_pb2_grpc.BasePluginStub(channel)
    info = base.PluginInfo(base_pb2.PluginInfoRequest(), timeout=10)
    assert (info.type, list(info.plugin_api_versions), info.name) == (base_pb2.DRIVER, ["v0.1.0"], "herder")
    schema = base.ConfigSchema(base_pb2.ConfigSchemaRequest(), timeout=10).spec
    assert set(schema.object.attributes) == {"data_dir", "disabled_plugins", "plugin"}
    config = msgpack.packb({"data_dir": str(tmp_path / "herder"), "disabled_plugins": None,
                            "plugin": [{"raw_exec": [{"enabled": True}]}]})
    base.SetConfig(base_pb2.SetConfigRequest(msgpack_config=config, plugin_api_version="v0.1.0"), timeout=30)
    driver = driver_pb2_grpc.DriverStub(channel)
    task_schema = driver.TaskConfigSchema(driver_pb2.TaskConfigSchemaRequest(), timeout=10).spec
    assert task_schema.object.attributes["config"].Attr.type == "any"
    capabilities = driver.Capabilities(driver_pb2.CapabilitiesRequest(), timeout=10).capabilities
    assert capabilities.send_signals and capabilities.exec
    fingerprints = driver.Fingerprint(driver_pb2.FingerprintRequest(), timeout=30)
    first = next(fingerprints)
    assert first.health == driver_pb2.FingerprintResponse.HEALTHY
    assert first.attributes["driver.herder.raw_exec.healthy"].bool_val
    fingerprints.cancel()
    # The plugin leaves on its own (how fast: bench/nomad_plugin.py).
    grpc_controller_pb2_grpc.GRPCControllerStub(channel).Shutdown(grpc_controller_pb2.Empty(), timeout=10)
    assert process.wait(10) == 0


def test_a_bad_plugin_block_is_refused_with_its_path(plugin: tuple[subprocess.Popen[str], grpc.Channel]) -> None:
    _, channel = plugin
    config = msgpack.packb({"data_dir": None, "disabled_plugins": None, "plugin": [{"raw_exec": "yes"}]})
    with pytest.raises(grpc.RpcError) as raised:
        base_pb2_grpc.BasePluginStub(channel).SetConfig(base_pb2.SetConfigRequest(msgpack_config=config), timeout=30)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert 'plugin "herder" config.plugin' in (raised.value.details() or "")


def test_the_plugin_loader_is_answered_before_herder_is_imported() -> None:
    # Nomad's plugin loader starts the plugin twice only for these two calls: they must not wait for herder.
    probe = """
import sys
from herder_nomad.plugin import DeferredDriver
from herder_nomad.wire import base_pb2, driver_pb2
service = DeferredDriver()
info = service.PluginInfo(base_pb2.PluginInfoRequest(), None)
schema = service.ConfigSchema(base_pb2.ConfigSchemaRequest(), None)
print(info.name, sorted(schema.spec.object.attributes), "herder" in sys.modules)
task_schema = service.TaskConfigSchema(driver_pb2.TaskConfigSchemaRequest(), None)
print(sorted(task_schema.spec.object.attributes), "herder.app" in sys.modules)
service.close()
"""
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.splitlines() == ["herder ['data_dir', 'disabled_plugins', 'plugin'] False",
                                          "['config', 'driver'] True"]
