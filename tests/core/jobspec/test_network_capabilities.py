"""A task of a group with a network namespace needs a driver that joins it: refused at validation otherwise."""

from __future__ import annotations

import pytest

from herder import DriverCapabilities
from herder.app.reading import check_task_configs
from herder.errors import JobError
from herder.jobspec.task_config import network_problems
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins
from tests.core.jobspec.helpers import load

JOB = """
job "web" {{
  group "app" {{
    network {{ mode = "{mode}" }}
    task "first" {{
      driver = "raw_exec"
      config {{ command = "/bin/true" }}
    }}
    task "second" {{
      driver = "{driver}"
      config {{ command = "/bin/true" }}
    }}
  }}
}}
"""

CAPABILITIES = {"raw_exec": frozenset({"host", "group"}), "hostonly": frozenset({"host"})}


def test_a_driver_without_group_isolation_is_refused_naming_the_task() -> None:
    job = load(JOB.format(mode="cni/mynet", driver="hostonly"))
    assert network_problems(job, CAPABILITIES.__getitem__) == [
        "job.hcl:10: job.groups[0].tasks[1].driver: driver 'hostonly' cannot join the allocation's network "
        "namespace (the group's network mode is 'cni/mynet'); it runs tasks in: host"]


def test_host_networking_needs_nothing_of_the_driver() -> None:
    assert network_problems(load(JOB.format(mode="host", driver="hostonly")), CAPABILITIES.__getitem__) == []


def test_raw_exec_joins_the_namespace() -> None:
    hooks = Hooks(load_plugins({}))
    assert "group" in hooks.capabilities("raw_exec").network_isolation
    check_task_configs(load(JOB.format(mode="bridge", driver="raw_exec")), hooks)  # raises nothing


def test_check_task_configs_refuses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    hooks = Hooks(load_plugins({}))
    monkeypatch.setattr(hooks, "capabilities", lambda driver: DriverCapabilities())  # host networking only
    with pytest.raises(JobError, match="driver 'raw_exec' cannot join the allocation's network namespace"):
        check_task_configs(load(JOB.format(mode="bridge", driver="raw_exec")), hooks)
