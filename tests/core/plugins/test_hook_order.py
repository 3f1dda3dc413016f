"""The order of every hook, as seen by real plugins installed through entry points."""

from __future__ import annotations

from pathlib import Path

from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins
from tests.support.running import make_config, run_job, start_job

from .conftest import HookLog, plugin_config

BATCH = """
job "order" {
  type = "batch"
  group "g" {
    task "t" {
      driver = "recdriver"
      config {
        command = "/bin/sh"
        args = ["-c", "echo $RECORDER_SEEN"]
      }
    }
  }
}
"""

SERVICE = BATCH.replace('type = "batch"', 'type = "service"').replace("echo $RECORDER_SEEN", "sleep 60")


def _steps(calls: list[tuple[str, str]]) -> list[object]:
    """Collapse consecutive calls of one hook whose order is not specified into a set."""
    steps: list[object] = []
    for hook, kind in calls:
        if hook in ("herder_task_poststart", "herder_task_exited", "herder_task_prekill"):
            if steps and isinstance(steps[-1], tuple) and steps[-1][0] == hook:
                steps[-1] = (hook, steps[-1][1] | {kind})
                continue
            steps.append((hook, {kind}))
        else:
            steps.append((hook, kind))
    return steps


def test_batch_task_hook_order(recording: HookLog, data_dir: Path) -> None:
    config = make_config(data_dir, plugin_config(recording))
    run = run_job(BATCH, data_dir, config=config)
    assert run.status == "complete"
    assert _steps(recording.calls()) == [
        ("herder_alloc_prerun", "lifecycle"),
        ("herder_task_prestart", "lifecycle"),   # lifecycle plugins first ...
        ("herder_task_prestart", "driver"),      # ... then the driver, which sees what they added
        ("herder_task_start", "driver"),
        ("herder_task_poststart", {"lifecycle", "driver"}),
        ("herder_task_exited", {"lifecycle", "driver"}),
        ("herder_task_cleanup", "driver"),       # the driver first ...
        ("herder_task_cleanup", "lifecycle"),    # ... then lifecycle plugins
        ("herder_alloc_postrun", "lifecycle"),
    ]
    driver_prestart = next(e for e in recording.entries() if e["hook"] == "herder_task_prestart"
                           and e["kind"] == "driver")
    assert driver_prestart["env_seen"] == "yes"


def test_stopped_service_calls_prekill_before_the_kill(recording: HookLog, data_dir: Path) -> None:
    config = make_config(data_dir, plugin_config(recording))
    run, wait = start_job(SERVICE, data_dir, config=config)
    run.wait_for("Started")
    run.runner.stop()
    assert wait() == "stopped"
    steps = _steps(recording.calls())
    assert steps[steps.index(("herder_task_prekill", {"lifecycle", "driver"})) + 1] == \
        ("herder_task_exited", {"lifecycle", "driver"})
    types = run.types("t")
    assert types.index("Killing") < types.index("Terminated") < types.index("Killed")


def test_every_event_reaches_observers_and_the_driver_sees_only_its_tasks(recording: HookLog,
                                                                          data_dir: Path) -> None:
    two_drivers = BATCH.replace('task "t" {', 'task "other" {\n driver = "raw_exec"\n config {\n'
                                ' command = "/bin/true"\n }\n }\n task "t" {')
    config = make_config(data_dir, plugin_config(recording))
    run = run_job(two_drivers, data_dir, config=config)
    assert run.status == "complete"
    entries = recording.entries()
    for task in ("other", "t"):
        observed = [e["type"] for e in entries
                    if e["hook"] == "herder_task_event" and e["kind"] == "lifecycle" and e["task"] == task]
        assert observed == run.types(task)
        assert "Started" in observed
    driver_tasks = {e["task"] for e in entries if e["kind"] == "driver" and e["task"]}
    assert driver_tasks == {"t"}


def test_exec_goes_to_the_task_driver(recording: HookLog, data_dir: Path) -> None:
    config = make_config(data_dir, plugin_config(recording))
    run, wait = start_job(SERVICE, data_dir, config=config)
    run.wait_for("Started")
    task_runner = run.runner.allocs[0].tasks[0]
    result = task_runner.exec(["echo", "hi"], timeout=5)
    assert result.output == b"recorded"
    run.runner.stop()
    wait()
    assert ("herder_task_exec", "driver") in recording.calls()


def test_an_exec_session_goes_to_the_task_driver(recording: HookLog, data_dir: Path) -> None:
    config = make_config(data_dir, plugin_config(recording))
    run, wait = start_job(SERVICE, data_dir, config=config)
    run.wait_for("Started")
    session = run.runner.allocs[0].tasks[0].exec_session(["/bin/sh"], tty=True)
    try:
        assert session.read() == ("stdout", b"recorded")
        assert session.wait(5) == 0
    finally:
        session.close()
    run.runner.stop()
    wait()
    assert ("herder_task_exec_session", "driver") in recording.calls()


def test_recover_is_driver_scoped(recording: HookLog, data_dir: Path) -> None:
    hooks = Hooks(load_plugins(plugin_config(recording)))
    run, wait = start_job(SERVICE, data_dir, config=make_config(data_dir, plugin_config(recording)), hooks=hooks)
    run.wait_for("Started")
    task_runner = run.runner.allocs[0].tasks[0]
    assert hooks.task_recover(task_runner.task, task_runner.ctx, {"pid": 1}) is None
    run.runner.stop()
    wait()
    assert [c for c in recording.calls() if c[0] == "herder_task_recover"] == [("herder_task_recover", "driver")]


def test_fingerprint_attributes_are_interpolated(recording: HookLog, data_dir: Path) -> None:
    job = BATCH.replace("echo $RECORDER_SEEN", "echo ${attr.driver.recdriver.version} > out.txt")
    run_job(job, data_dir, config=make_config(data_dir, plugin_config(recording)))
    out = next(data_dir.glob("allocs/*/t/out.txt"))
    assert out.read_text().strip() == "1.0"


def test_fingerprint_is_asked_of_the_driver_and_a_raising_one_is_unhealthy(recording: HookLog) -> None:
    hooks = Hooks(load_plugins(plugin_config(recording)))
    fingerprint = hooks.fingerprint("recdriver")
    assert fingerprint.healthy and fingerprint.attributes == {"driver.recdriver.version": "1.0"}
    assert [c for c in recording.calls(skip_events=False) if c[0] == "herder_driver_fingerprint"] == \
        [("herder_driver_fingerprint", "driver")]
    config = plugin_config(recording)
    config["recdriver"]["raise_in"] = ["herder_driver_fingerprint"]
    broken = Hooks(load_plugins(config)).fingerprint("recdriver")
    assert (broken.detected, broken.healthy) == (False, False)
    assert "recdriver" in broken.description and "herder_driver_fingerprint" in broken.description


def test_the_driver_task_schema_validates_config(recording: HookLog) -> None:
    from herder.jobspec import load_job_text, validate_task_configs

    hooks = Hooks(load_plugins(plugin_config(recording)))
    assert hooks.task_schema("recdriver") == {
        "type": "object", "required": ["command"],
        "properties": {"command": {"type": "string"}, "args": {"type": "array"}}}
    job = load_job_text(BATCH.replace('command = "/bin/sh"', 'commando = "/bin/sh"'), "hcl", "j.hcl")
    errors = validate_task_configs(job, {d: hooks.task_schema(d) for d in hooks.drivers})
    assert any("job.groups[0].tasks[0].config" in e and "command" in e for e in errors), errors
    assert ("herder_driver_task_schema", "driver") in recording.calls(skip_events=False)
