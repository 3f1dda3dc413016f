"""Templates in a running job: real raw_exec tasks, a watched value that changes.

The watched value is a file the template reads with ``file``; the test
changes it while the task runs, as an operator or another task would.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.running import make_config, start_job
from tests.support.waiting import wait_for

CONFIG = {"templates": {"poll_interval": "100ms"}}


def job(template: str, script: str) -> str:
    script = script.replace("\\", "\\\\").replace('"', '\\"')
    return f'''
job "j" {{
  group "g" {{
    task "t" {{
      driver       = "raw_exec"
      kill_timeout = "2s"
      {template}
      config {{
        command = "/bin/sh"
        args    = ["-c", "{script}"]
      }}
    }}
  }}
}}
'''


def replace(path: Path, text: str) -> None:
    """Change a watched file at once: a file written in place can be read half-written
    (empty, say), which is a change of its own that a template rightly acts on."""
    staged = path.with_name(path.name + ".new")
    staged.write_text(text)
    os.replace(staged, path)


def task_dir(data_dir: Path) -> Path:
    found: list[Path] = []
    wait_for(lambda: bool(found.extend(data_dir.glob("allocs/*/t/local")) or found))
    return found[0].parent


def test_change_mode_restart_restarts_the_task_with_the_new_file(data_dir: Path) -> None:
    template = '''template {
        data        = "value={{ file \\"local/source.txt\\" }}"
        destination = "local/app.conf"
        change_mode = "restart"
        splay       = "0s"
      }'''
    script = "cat local/app.conf >> ../alloc/data/seen; echo >> ../alloc/data/seen; exec sleep 60"
    run, wait = start_job(job(template, script), data_dir, config=make_config(data_dir, CONFIG))
    try:
        directory = task_dir(data_dir)
        run.wait_for("Template", "t")  # waiting for the source file: it is not there yet
        replace(directory / "local/source.txt", "one")
        run.wait_for("Started", "t")
        seen = directory.parent / "alloc/data/seen"
        wait_for(lambda: seen.exists() and seen.read_text() == "value=one\n")
        replace(directory / "local/source.txt", "two")
        run.wait_for("Restart Signal", "t")
        wait_for(lambda: seen.read_text() == "value=one\nvalue=two\n")
        # The new process may write before its Started event is recorded: wait for the event.
        wait_for(lambda: run.types("t").count("Started") == 2)
    finally:
        run.runner.stop()
        wait()
    messages = [r.event.message for r in run.events if r.event.type == "Template"]
    assert messages[0] == "Missing: file(local/source.txt)"
    assert messages[1] == "Template re-rendered: local/app.conf"


def test_change_mode_signal_sends_the_signal(data_dir: Path) -> None:
    template = '''template {
        data          = "{{ file \\"local/source.txt\\" }}"
        destination   = "local/app.conf"
        change_mode   = "signal"
        change_signal = "SIGHUP"
        splay         = "0s"
      }'''
    script = ("trap 'cat local/app.conf >> ../alloc/data/reloads; echo >> ../alloc/data/reloads' HUP; "
              "touch ../alloc/data/ready; while true; do sleep 0.1; done")
    run, wait = start_job(job(template, script), data_dir, config=make_config(data_dir, CONFIG))
    try:
        directory = task_dir(data_dir)
        replace(directory / "local/source.txt", "first")
        ready = directory.parent / "alloc/data/ready"
        wait_for(ready.exists)
        replace(directory / "local/source.txt", "second")
        run.wait_for("Signaling", "t")
        reloads = directory.parent / "alloc/data/reloads"
        wait_for(lambda: reloads.exists() and reloads.read_text() == "second\n")
        assert run.types("t").count("Started") == 1
        assert (directory / "local/app.conf").read_text() == "second"
    finally:
        run.runner.stop()
        wait()


def test_env_template_and_noop(data_dir: Path) -> None:
    template = '''template {
        data        = "GREETING=hello from {{ env \\"NOMAD_TASK_NAME\\" }}"
        destination = "secrets/app.env"
        env         = true
        change_mode = "noop"
      }'''
    run, wait = start_job(job(template, "echo $GREETING > ../alloc/data/out").replace('group "g" {',
                          'type = "batch"\n  group "g" {'), data_dir, config=make_config(data_dir, CONFIG))
    assert wait() == "complete", run.types()
    [out] = data_dir.glob("allocs/*/alloc/data/out")
    assert out.read_text() == "hello from t\n"
