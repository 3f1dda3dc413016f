"""Plugin discovery through real entry points: every one loads on its own."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from herder.plugins.loader import load_plugins

from .conftest import HookLog, plugin_config

GOOD = '''
from herder import hookimpl, Fingerprint

class Driver:
    def __init__(self, config):
        self.config = config
    @hookimpl
    def herder_driver_fingerprint(self):
        return Fingerprint(detected=True, healthy=True, description=str(self.config))
    @hookimpl
    def herder_task_start(self, task, ctx):
        raise NotImplementedError
'''


def test_raw_exec_comes_from_the_core_entry_point() -> None:
    plugins = load_plugins()
    record = plugins.record("raw_exec")
    assert record is not None and record.kind == "driver"
    assert record.distribution == "herder"
    assert record.entry_point == "herder.drivers.raw_exec:RawExecDriver"
    assert "herder_task_start" in record.hooks
    assert "raw_exec" in plugins.driver_names


def test_factory_gets_its_plugin_config(install: Callable[..., Path]) -> None:
    install("herder-good", "0.1", {"herder.drivers": {"good": "good_driver:Driver"}}, {"good_driver.py": GOOD})
    plugins = load_plugins({"good": {"answer": 42}})
    from herder.plugins.hooks import Hooks

    assert Hooks(plugins).fingerprint("good").description == "{'answer': 42}"


BROKEN = {
    "import error": ("broken_import.py", "import no_such_module_anywhere\n", "broken_import:Plugin",
                     "ModuleNotFoundError"),
    "raising factory": ("broken_factory.py", "def make(config):\n    raise RuntimeError('no config file')\n",
                        "broken_factory:make", "RuntimeError: no config file"),
    "bad signature": ("broken_sig.py", "from herder import hookimpl\n"
                      "@hookimpl\ndef herder_task_prestart(task, ctx, bogus):\n    pass\n",
                      "broken_sig", "bogus"),
    "unknown hook": ("broken_name.py", "from herder import hookimpl\n"
                     "@hookimpl\ndef herder_task_prestrat(task, ctx):\n    pass\n",
                     "broken_name", "unknown hook(s): herder_task_prestrat"),
    "missing attribute": ("broken_attr.py", "x = 1\n", "broken_attr:Nope", "AttributeError"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_entry_point_is_reported_and_the_others_load(case: str, install: Callable[..., Path]) -> None:
    filename, source, target, expected = BROKEN[case]
    install("herder-broken", "6.6.6", {"herder.plugins": {"broken": target}}, {filename: source})
    install("herder-good", "0.1", {"herder.drivers": {"good": "good_driver:Driver"}}, {"good_driver.py": GOOD})
    plugins = load_plugins()
    broken = next(r for r in plugins.records if r.name == "broken")
    assert broken.status == "failed"
    assert expected in broken.error
    assert (broken.distribution, broken.version) == ("herder-broken", "6.6.6")
    assert "broken" not in plugins.plugins("lifecycle")
    assert {"good", "raw_exec"} <= set(plugins.driver_names)  # and whichever driver plugins tox installed


def test_a_driver_must_implement_start(install: Callable[..., Path]) -> None:
    install("herder-half", "1.0", {"herder.drivers": {"half": "half:HALF"}},
            {"half.py": "from herder import hookimpl\nclass Half:\n"
                        "    @hookimpl\n    def herder_driver_fingerprint(self):\n        return None\n"
                        "HALF = Half()\n"})
    record = next(r for r in load_plugins().records if r.name == "half")
    assert record.error == "a driver must implement herder_task_start"


def test_a_lifecycle_plugin_may_not_implement_a_driver_scoped_hook(install: Callable[..., Path]) -> None:
    """Else it would take part in every driver's start and could pre-empt it (firstresult)."""
    install("herder-usurper", "1.0", {"herder.plugins": {"usurper": "usurper:Usurper"}},
            {"usurper.py": "from herder import hookimpl\nclass Usurper:\n"
                           "    def __init__(self, config):\n        pass\n"
                           "    @hookimpl\n    def herder_task_start(self, task, ctx):\n        return None\n"})
    plugins = load_plugins()
    record = next(r for r in plugins.records if r.name == "usurper")
    assert record.error == "only a driver may implement herder_task_start (driver-scoped hooks)"
    assert "usurper" not in plugins.plugins("lifecycle")


def test_two_distributions_offering_one_driver_name_is_an_error_naming_both(install: Callable[..., Path]) -> None:
    install("herder-good", "0.1", {"herder.drivers": {"good": "good_driver:Driver"}}, {"good_driver.py": GOOD})
    install("herder-rival", "2.0", {"herder.drivers": {"good": "good_driver:Driver"}}, {})
    plugins = load_plugins()
    errors = [r.error for r in plugins.records if r.name == "good"]
    assert len(errors) == 2
    for error in errors:
        assert "herder-good 0.1" in error and "herder-rival 2.0" in error
    assert "good" not in plugins.driver_names


def test_disabled_plugins_are_listed_but_not_loaded(recording: HookLog) -> None:
    plugins = load_plugins(plugin_config(recording), disabled=["recorder", "raw_exec"])
    statuses = {r.name: r.status for r in plugins.records}
    assert statuses["recorder"] == "disabled" and statuses["raw_exec"] == "disabled"
    assert statuses["recdriver"] == "loaded"
    assert "recdriver" in plugins.driver_names and "raw_exec" not in plugins.driver_names


def test_herder_plugins_json_lists_loaded_and_failed(install: Callable[..., Path], herder: Callable[..., object],
                                                     tmp_path: Path) -> None:
    filename, source, target, _ = BROKEN["raising factory"]
    install("herder-broken", "6.6.6", {"herder.plugins": {"broken": target}}, {filename: source})
    result = herder("plugins", "--json")
    assert result.returncode == 0, result.stderr
    listing = {p["name"]: p for p in json.loads(result.stdout)["plugins"]}
    assert listing["raw_exec"]["distribution"] == "herder"
    assert listing["raw_exec"]["status"] == "loaded"
    assert listing["broken"] == {
        "name": "broken", "kind": "lifecycle", "status": "failed", "distribution": "herder-broken",
        "version": "6.6.6", "entry_point": "broken_factory:make", "hooks": [],
        "error": "RuntimeError: no config file"}


def test_disable_plugin_on_the_command_line(herder: Callable[..., object]) -> None:
    installed = [d["name"] for d in json.loads(herder("drivers", "--json").stdout)["drivers"]]
    assert "raw_exec" in installed
    result = herder("drivers", "--json", *(arg for name in installed for arg in ("--disable-plugin", name)))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"drivers": []}


def test_herder_drivers_json(herder: Callable[..., object]) -> None:
    """Each tox environment says which drivers it installed (HERDER_EXPECT_DRIVERS); core alone has raw_exec."""
    result = herder("drivers", "--json")
    drivers = {d["name"]: d for d in json.loads(result.stdout)["drivers"]}
    expected = os.environ.get("HERDER_EXPECT_DRIVERS")
    if expected is not None:
        assert sorted(drivers) == sorted(expected.split(","))
    assert drivers["raw_exec"] == {"name": "raw_exec", "distribution": "herder",
                                   "version": drivers["raw_exec"]["version"], "detected": True, "healthy": True,
                                   "description": "healthy", "attributes": {}}
