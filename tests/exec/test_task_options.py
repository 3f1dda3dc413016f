"""Nomad 1.x exec options: ``pid_mode``, ``ipc_mode``, ``cap_add``/``cap_drop``, ``work_dir``, with the
plugin configuration that allows them (``allow_pid_mode_host``, ``allow_ipc_mode_host``, ``allow_caps``)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from herder import DriverError
from herder.testing import DriverHarness
from herder.testing.plugin import HarnessFactory

from .helpers import sh

NAMESPACES = 'echo "$(readlink /proc/self/ns/pid) $(readlink /proc/self/ns/ipc)"'


def _bit(name: str) -> int:
    return 1 << {"chown": 0, "net_raw": 13, "sys_chroot": 18, "kill": 5}[name]


def _run(harness: DriverHarness, config: dict[str, Any], **fields: Any) -> str:
    run = harness.task(config, **fields)
    run.start()
    result = run.wait(30)
    assert result is not None and result.successful, (result, run.output("stderr"))
    return run.output().decode()


def _effective_capabilities(harness: DriverHarness, **config: Any) -> int:
    out = _run(harness, sh("grep CapEff /proc/self/status") | config, user="root")
    return int(out.split()[1], 16)


def test_private_namespaces_by_default_and_the_hosts_where_allowed(exec_driver: str,
                                                                     driver_harness: HarnessFactory) -> None:
    host = f"{os.readlink('/proc/self/ns/pid')} {os.readlink('/proc/self/ns/ipc')}"
    private = _run(driver_harness("exec", {}), sh(NAMESPACES)).split()
    assert private[0] != host.split()[0] and private[1] != host.split()[1]
    allowed = driver_harness("exec", {"allow_pid_mode_host": True, "allow_ipc_mode_host": True})
    shared = _run(allowed, sh(NAMESPACES) | {"pid_mode": "host", "ipc_mode": "host"})
    assert shared.split() == host.split()


@pytest.mark.parametrize("key", ["pid_mode", "ipc_mode"])
def test_host_namespaces_are_refused_unless_the_plugin_allows_them(exec_driver: str, key: str,
                                                                     driver_harness: HarnessFactory) -> None:
    run = driver_harness("exec", {}).task(sh("exit 0") | {key: "host"})
    with pytest.raises(DriverError, match=f"allow_{key}_host"):
        run.start()


def test_cap_add_and_cap_drop_change_the_tasks_capabilities(exec_driver: str,
                                                            driver_harness: HarnessFactory) -> None:
    default = driver_harness("exec", {})
    baseline = _effective_capabilities(default)
    assert baseline & _bit("chown") and not baseline & _bit("net_raw")
    assert _effective_capabilities(default, cap_drop=["chown"]) == baseline & ~_bit("chown")
    assert _effective_capabilities(default, cap_drop=["all"], cap_add=["kill"]) == _bit("kill")
    allowing = driver_harness("exec", {"allow_caps": ["all"]})
    assert _effective_capabilities(allowing, cap_add=["NET_RAW"]) == baseline | _bit("net_raw")


def test_a_capability_the_plugin_does_not_allow_is_refused(exec_driver: str, driver_harness: HarnessFactory) -> None:
    run = driver_harness("exec", {}).task(sh("exit 0") | {"cap_add": ["net_raw"]})
    with pytest.raises(DriverError, match=r"net_raw not allowed by \[plugin.exec\] allow_caps"):
        run.start()


def test_work_dir_is_the_tasks_working_directory(exec_driver: str, driver_harness: HarnessFactory) -> None:
    assert _run(driver_harness("exec", {}), sh("pwd") | {"work_dir": "/local"}) == "/local\n"


def test_capabilities_follow_nomads_rules(exec_driver: str) -> None:
    from herder_exec.config import PluginConfig

    config = PluginConfig.from_mapping({"allow_caps": ["chown", "kill", "net_raw"]})
    assert config.capabilities([], []) == ("CAP_CHOWN", "CAP_KILL")
    assert config.capabilities(["cap_net_raw"], ["kill"]) == ("CAP_CHOWN", "CAP_NET_RAW")
    with pytest.raises(ValueError, match="'fly' is not a Linux capability"):
        config.capabilities(["fly"], [])
    with pytest.raises(ValueError, match="allow_caps"):
        config.capabilities(["all"], [])
    with pytest.raises(ValueError, match="allow_pid_mode_host must be true or false"):
        PluginConfig.from_mapping({"allow_pid_mode_host": "yes"})
