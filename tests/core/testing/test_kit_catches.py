"""The conformance kit passes a driver that keeps the contract, and catches each way of breaking it.

Driver ``faulty`` (``faulty_driver.py``) is installed as a real distribution;
the kit runs against it in-process (pytester), once per fault, and exactly
the contract tests that the fault breaks must fail, each saying why.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import wait_until_gone

pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent
DRIVER = (HERE / "faulty_driver.py").read_text()
CONTRACT = (HERE / "faulty_contract.py").read_text()

KIT_TESTS = 33
"""The number of DriverContract's tests, parametrized cases counted: every one must have run."""
EXEC_TESTS = ("test_exec_output_and_exit_code", "test_exec_timeout_raises", "test_exec_output_is_capped")
SESSION_TESTS = ("test_exec_session_on_a_terminal", "test_exec_session_resizes_its_terminal",
                 "test_exec_session_without_a_terminal", "test_exec_session_close_ends_the_command",
                 "test_exec_session_close_ends_a_shells_jobs")
STATS_TESTS = ("test_stats_show_memory", "test_stats_show_cpu")
NETWORK_TEST = "test_joins_the_allocations_network"
VOLUME_TEST = "test_volume_mounts_are_mounted_and_read_only_refuses_writes"
"""Skipped for driver ``faulty``: it declares no ``volume_mounts``."""
WITHOUT_A_TASK = ("test_fingerprint_is_quick_and_never_raises", "test_fingerprint_with_broken_config",
                  "test_config_errors_name_their_path", "test_declares_its_network_isolation")
"""The tests that run no task, so need no available driver."""


@dataclass
class Verdict:
    """What the kit said of driver ``faulty``: each test's outcome, and the text of its failure or skip."""

    outcomes: dict[str, str] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)

    def named(self, outcome: str) -> set[str]:
        return {name for name, found in self.outcomes.items() if found == outcome}


@pytest.fixture
def run_kit(pytester: pytest.Pytester, install: Callable[..., Path]) -> Callable[..., Verdict]:
    """Run the kit against driver ``faulty`` with a ``[plugin.faulty]`` table (and ``supports_exec``,
    ``supports_exec_session``, ``supports_stats``)."""
    install("herder-faulty", "1.0", {"herder.drivers": {"faulty": "herder_faulty:make"}},
            {"herder_faulty.py": DRIVER})

    def run(plugin_config: Mapping[str, Any], supports_exec: bool = True, supports_exec_session: bool = True,
            supports_stats: bool = True) -> Verdict:
        pytester.makepyfile(test_faulty=f"{CONTRACT}\n\nclass TestFaulty(FaultyContract):\n"
                                        f"    plugin_config = {dict(plugin_config)!r}\n"
                                        f"    supports_exec = {supports_exec!r}\n"
                                        f"    supports_exec_session = {supports_exec_session!r}\n"
                                        f"    supports_stats = {supports_stats!r}\n")
        reports = pytester.inline_run("-p", "no:cacheprovider").getreports("pytest_runtest_logreport")
        assert wait_until_gone(pytester.path) == {}, "the kit left processes behind"
        verdict = Verdict()
        for report in reports:
            name = report.nodeid.rpartition("::")[2]
            if report.failed or report.skipped:
                verdict.texts[name] = verdict.texts.get(name, "") + report.longreprtext
            if report.failed:
                verdict.outcomes[name] = "failed"
            elif report.skipped:
                verdict.outcomes.setdefault(name, "skipped")
            elif report.when == "call":
                verdict.outcomes.setdefault(name, "passed")
        assert len(verdict.outcomes) == KIT_TESTS, sorted(verdict.outcomes)
        return verdict

    return run


@dataclass(frozen=True)
class Case:
    """Driver ``faulty`` with ``faults``, and the kit's verdict: the tests that fail, each with a
    phrase its failure must show; every other test passes, but those skipped."""

    faults: tuple[str, ...]
    fails: Mapping[str, str] = field(default_factory=dict)
    supports_exec: bool = True
    supports_exec_session: bool = True
    supports_stats: bool = True

    @property
    def skipped(self) -> set[str]:
        # Without root the kit cannot make the allocation's namespace; a driver of host networking only
        # (and one whose capabilities raise, which herder takes for that) has nothing to join.
        no_join = os.geteuid() != 0 or bool({"host_network_only", "capabilities_raise"} & set(self.faults))
        return ({"test_exec_not_supported"} if self.supports_exec else set(EXEC_TESTS)) | \
            ({"test_exec_session_not_supported"} if self.supports_exec_session else set(SESSION_TESTS)) | \
            ({"test_stats_not_supported"} if self.supports_stats else set(STATS_TESTS)) | \
            ({NETWORK_TEST} if no_join else set()) | {VOLUME_TEST}


CASES = {
    "keeping the contract": Case(()),
    "without exec, saying so": Case(("no_exec",), supports_exec=False, supports_exec_session=False),
    "without exec, claiming it": Case(("no_exec",), {
        **dict.fromkeys(EXEC_TESTS, "driver faulty does not support exec"),
        **dict.fromkeys(SESSION_TESTS, "driver faulty does not support interactive exec"),
    }),
    "a session whose close leaves its command": Case(("session_close_leaves_command",), {
        "test_exec_session_close_ends_the_command": "a closed session's command did not end",
        "test_exec_session_close_ends_a_shells_jobs": "closing the session left its shell's job running",
    }),
    "without stats, saying so": Case(("no_stats",), supports_stats=False),
    "without stats, claiming them": Case(("no_stats",), {
        "test_stats_show_memory": "never showed memory_rss_bytes of at least 60 MiB",
        "test_stats_show_cpu": "a busy loop never showed more than 20 % CPU",
    }),
    "children escaping the kill": Case(("children_escape",), {
        "test_kill_leaves_nothing_of_the_task": "processes of the task outlived its kill",
        "test_kill_sends_the_kill_signal[SIGINT]": "outlived its kill",
        "test_kill_sends_the_kill_signal[SIGTERM]": "outlived its kill",
        "test_kill_forces_after_kill_timeout": "outlived its kill",
        "test_recover_on_fresh_plugins": "outlived its kill",
        "test_cleanup_is_idempotent[after_kill]": "outlived its kill",
        "test_task_listens_on_its_host_port": "outlived its kill",
        "test_stats_show_memory": "outlived its kill",  # and the task, out of its cgroup, is not measured
        "test_stats_show_cpu": "outlived its kill",
    }),
    "a kill without the stop signal": Case(("kill_skips_stop_signal",), {
        "test_kill_sends_the_kill_signal[SIGINT]": "but it got nothing",
        "test_kill_sends_the_kill_signal[SIGTERM]": "but it got nothing",
        "test_kill_forces_after_kill_timeout": "was not given its kill_timeout",
    }),
    "a state that is not JSON": Case(("state_not_json",), {
        "test_state_is_json_serialisable": "not JSON-serialisable",
        "test_recover_on_fresh_plugins": "not JSON-serialisable",
    }),
    "an exec ignoring its timeout": Case(("exec_ignores_timeout",), {
        "test_exec_timeout_raises": "did not return within",
    }),
    "a raising fingerprint": Case(("fingerprint_raises",), {
        "test_fingerprint_with_broken_config": "herder_driver_fingerprint raised FileNotFoundError",
    }),
    "a task outside its allocation's network": Case(("ignores_network",), {
        NETWORK_TEST: "the task did not connect to 127.0.0.1",
    }),
    "host networking only, saying so": Case(("host_network_only",)),
    "raising capabilities": Case(("capabilities_raise",), {
        "test_declares_its_network_isolation": "herder_driver_capabilities raised RuntimeError",
    }),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_kit_judges_driver_faulty(case: Case, run_kit: Callable[..., Verdict]) -> None:
    if "children_escape" in case.faults and os.geteuid() != 0:
        pytest.skip("a task escapes the supervisor's process tracking only as root, by leaving its cgroup")
    verdict = run_kit({"faults": list(case.faults)}, case.supports_exec, case.supports_exec_session,
                      case.supports_stats)
    failed = verdict.named("failed")
    assert failed == set(case.fails), {name: verdict.texts.get(name, "")[-1500:] for name in failed ^ set(case.fails)}
    assert verdict.named("skipped") == case.skipped
    for name, phrase in case.fails.items():
        assert phrase in verdict.texts[name], verdict.texts[name][-1500:]


def test_the_kit_skips_what_needs_a_driver_that_is_not_available(run_kit: Callable[..., Verdict]) -> None:
    verdict = run_kit({"shell": "/nonexistent/sh"})
    assert verdict.named("passed") == set(WITHOUT_A_TASK)
    assert verdict.named("skipped") == set(verdict.outcomes) - set(WITHOUT_A_TASK)
    reason = "driver faulty is not available: no shell at /nonexistent/sh"
    assert reason in verdict.texts["test_output_goes_to_the_log_files"]
