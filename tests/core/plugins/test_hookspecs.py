"""Meta-tests: every hook of the contract is documented, exported and exercised."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import herder
from herder import hookspecs
from tests.support import testplugins

HOOKS = sorted(name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction)
               if name.startswith("herder_"))
TESTS = Path(__file__).resolve().parents[2]


def test_the_contract_has_every_hook_of_the_spec() -> None:
    assert sorted([
        "herder_driver_fingerprint", "herder_driver_task_schema", "herder_task_prestart", "herder_task_start",
        "herder_task_poststart", "herder_task_exec", "herder_task_exec_session", "herder_task_exited",
        "herder_task_prekill", "herder_task_recover", "herder_task_cleanup", "herder_task_event",
        "herder_alloc_prerun", "herder_alloc_postrun", "herder_driver_capabilities",
        "herder_alloc_network_create", "herder_alloc_network_destroy",
    ]) == HOOKS


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_documented(hook: str) -> None:
    function = getattr(hookspecs, hook)
    doc = inspect.getdoc(function) or ""
    assert "called" in doc.lower(), f"{hook}: say when it is called"
    for arg in inspect.signature(function).parameters:
        assert f":param {arg}:" in doc, f"{hook}: document {arg}"
    firstresult = function.herder_spec["firstresult"]
    if firstresult:
        assert ":returns:" in doc, f"{hook}: document the result"
    assert inspect.signature(function).return_annotation != inspect.Signature.empty


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_implemented_by_the_recording_plugins(hook: str) -> None:
    assert hasattr(testplugins.Recorder, hook) or hasattr(testplugins.RecordingDriver, hook)


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_asserted_on_in_a_test(hook: str) -> None:
    sources = [p.read_text() for p in TESTS.rglob("test_*.py") if p.name != "test_hookspecs.py"]
    assert any(f'"{hook}"' in source for source in sources), f"no test names {hook}"


def test_everything_a_plugin_author_needs_is_importable_from_herder() -> None:
    for name in ("hookimpl", "Alloc", "Task", "TaskContext", "TaskHandle", "ExitResult", "ExecResult",
                 "ExecSession", "Fingerprint", "DriverNetwork", "TaskEvent", "RecoverableError", "DriverError"):
        assert hasattr(herder, name), name
    assert herder.hookimpl.project_name == "herder"
