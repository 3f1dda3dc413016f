"""A task swaps directories of its task dir for links while herder (root) writes and reads there.

herder renders templates as root into ``local/``, which the task can write.
Checking a path and then writing it by name lets the task win a race: swap
``local/d`` for a link to a host directory between the two, and root writes
the host's files (or reads them into a template the task sees). These tasks
swap directories for links as fast as they can while herder re-renders, or
leave links behind for the next herder to trip on: nothing of the host is
written or read, the task is told why, and herder goes on.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from herder.state import Store
from tests.support.foreground import HerderRun, task_dirs
from tests.support.processes import alive, wait_until_gone
from tests.support.require import require_driver
from tests.support.waiting import wait_for

SECRET = "HOST-SECRET"

# Exchanges local/d with a link to the host directory, and local/s likewise, with renameat2's
# RENAME_EXCHANGE (atomic: at every instant each name is either the directory or the link), and
# rewrites local/source.txt so that every poll of herder's sees a change and renders again. It
# runs from the task directory's parent of local/: the host's for raw_exec, / in exec's container.
SWAPPER = """
import ctypes, os, signal, sys
signal.signal(signal.SIGUSR1, signal.SIG_IGN)   # change_mode's signal: nothing to reload
os.chdir(os.path.dirname(os.environ["NOMAD_TASK_DIR"]))
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
for name in ("d", "s"):
    os.symlink(sys.argv[1], "local/" + name + ".link")
i = 0
while True:
    i += 1
    with open("local/source.tmp", "w") as f:
        f.write(str(i))
    os.rename("local/source.tmp", "local/source.txt")
    for name in ("d", "s"):
        for _ in range(50):
            libc.renameat2(AT_FDCWD, ("local/" + name).encode(), AT_FDCWD, ("local/" + name + ".link").encode(),
                           RENAME_EXCHANGE)
    try:
        with open("local/out.conf") as f:
            if "HOST-SECRET" in f.read():
                open("../alloc/data/leaked", "w").close()
    except OSError:
        pass
"""


def job(driver: str, host: Path) -> str:
    return f'''
job "swap" {{
  group "g" {{
    task "t" {{
      driver       = "{driver}"
      kill_timeout = "2s"
      config {{
        command = "/usr/bin/python3"
        args    = ["${{NOMAD_TASK_DIR}}/swapper.py", "{host}"]
      }}
      template {{
        data        = <<EOT
{SWAPPER}
EOT
        destination = "local/swapper.py"
        change_mode = "noop"
      }}
      template {{
        data          = "value={{{{ file \\"local/source.txt\\" }}}}"
        destination   = "local/d/app.conf"
        change_mode   = "signal"
        change_signal = "SIGUSR1"
        splay         = "0s"
      }}
      template {{
        data        = "read={{{{ file \\"local/s/secret.txt\\" }}}}"
        destination = "local/out.conf"
        change_mode = "noop"
      }}
    }}
  }}
}}
'''


def host_dir(tmp_path: Path) -> Path:
    host = tmp_path / "host"
    host.mkdir()
    host.chmod(0o755)
    (host / "secret.txt").write_text(SECRET)
    return host


def host_untouched(host: Path) -> None:
    assert sorted(os.listdir(host)) == ["secret.txt"], f"herder wrote into the host directory: {os.listdir(host)}"
    assert (host / "secret.txt").read_text() == SECRET
    assert stat.S_IMODE(host.stat().st_mode) == 0o755


def messages(run: HerderRun, type: str) -> list[str]:
    return [event["message"] for event in run.of(type)]


@pytest.mark.parametrize("driver", ["raw_exec", "exec"])
def test_a_task_racing_links_into_its_template_dirs_gets_no_host_file_written_or_read(
        tmp_path: Path, config_file: Path, driver: str) -> None:
    if driver == "exec":
        require_driver("exec")  # as nobody, in a runc container with /local mounted
    host = host_dir(tmp_path)
    job_file = tmp_path / "job.hcl"
    job_file.write_text(job(driver, host))
    config_file.write_text(config_file.read_text() + '[plugin.templates]\npoll_interval = "20ms"\n')
    data_dir = tmp_path / "data"
    run = HerderRun(job_file, data_dir, config=config_file)
    try:
        local = wait_for(lambda: task_dirs(data_dir, "t"), what="the task directory")[0] / "local"
        (local / "source.txt").write_text("0")
        (local / "s").mkdir()
        (local / "s" / "secret.txt").write_text("task's own")
        run.wait_for("Started", timeout=60)
        leaked = local.parent.parent / "alloc" / "data" / "leaked"

        def attacked_enough() -> bool:
            host_untouched(host)  # checked all along: a file written there may be gone by the end
            assert not leaked.exists(), "a host file was read into a template"
            refused = [m for m in messages(run, "Template") if m.startswith("Template failed to re-render")]
            return len(messages(run, "Signaling")) >= 20 and len(refused) >= 1

        wait_for(attacked_enough, timeout=120, what="re-renders and refusals while the task swaps")
        refused = [m for m in messages(run, "Template") if m.startswith("Template failed to re-render")]
        # "a link", or "a link or not a directory when opened, swapped since" when swapped back meanwhile
        assert any(m.endswith("; not followed") and (": local/d: a link" in m or ": local/s: a link" in m)
                   for m in refused), refused
        assert messages(run, "Started") == [messages(run, "Started")[0]], "the task was restarted"
        assert run.proc.poll() is None, "herder stopped"
    finally:
        status = run.interrupt()
    host_untouched(host)
    assert not leaked.exists()
    assert status == 0, run.stderr
    assert "Traceback" not in run.stderr


LINK_PLANTER = """
job "planter" {{
  group "g" {{
    restart {{
      attempts = 1
      delay    = "0s"
      mode     = "fail"
    }}
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", "rm -rf local/d && ln -s {host} local/d && exit 1"]
      }}
      template {{
        data        = "written by herder"
        destination = "local/d/app.conf"
      }}
    }}
  }}
}}
"""


def test_links_planted_before_a_restart_fail_the_template_naming_the_path(tmp_path: Path) -> None:
    host = host_dir(tmp_path)
    job_file = tmp_path / "job.hcl"
    job_file.write_text(LINK_PLANTER.format(host=host))
    run = HerderRun(job_file, tmp_path / "data")
    run.wait_for("Setup Failure", timeout=60)
    assert run.finish() == run.stderr
    failure = messages(run, "Setup Failure")[0]
    assert "template local/d/app.conf: local/d: a link; not followed" in failure, failure
    host_untouched(host)
    assert run.proc.returncode != 0 and "Traceback" not in run.stderr


SQUATTER = """
job "squatter" {{
  group "g" {{
    task "t" {{
      driver       = "raw_exec"
      kill_timeout = "2s"
      config {{
        command = "/bin/sh"
        args    = ["-c", "rm -rf secrets ../alloc/tmp && ln -s {host} secrets && ln -s {host} ../alloc/tmp &&
                           echo $$ > ../alloc/data/pid && exec sleep 300"]
      }}
    }}
  }}
}}
"""


def test_links_planted_for_the_next_herder_are_refused_when_it_restores_the_allocation(tmp_path: Path) -> None:
    host = host_dir(tmp_path)
    job_file = tmp_path / "job.hcl"
    job_file.write_text(SQUATTER.format(host=host))
    data_dir = tmp_path / "data"
    first = HerderRun(job_file, data_dir, "--keep")
    first.wait_for("Started", timeout=60)
    pid_file = wait_for(lambda: [p for p in (data_dir / "allocs").glob("*/alloc/data/pid") if p.read_text()],
                        what="the task's pid")[0]
    pid = int(pid_file.read_text())
    wait_for(lambda: (pid_file.parent.parent / "tmp").is_symlink(), what="the planted links")
    first.kill()
    second = HerderRun(job_file, data_dir, "--keep")
    try:
        wait_for(lambda: second.of("Started") or second.of("Reattached"), timeout=60, what="the job running again")
        host_untouched(host)
        # herder goes on: the allocation it cannot restore is failed, its task stopped before
        # the job is placed anew, so that the task never runs twice
        assert second.of("Reattached") == []
        assert not alive(pid), "the task of the allocation that cannot be restored still runs"
    finally:
        assert second.interrupt() == 0, second.stderr
    assert not wait_until_gone(tmp_path), "a process of the allocation that cannot be restored was left behind"
    host_untouched(host)
    planted = pid_file.parent.parent / "tmp"
    assert f"{planted}: a link; not followed" in second.stderr
    with Store(data_dir / "state.db") as store:
        alloc = store.alloc(pid_file.parent.parent.parent.name)
        assert alloc is not None and alloc.status == "failed"
        found = [event.message for _, event in store.events(alloc.id) if event.type == "Setup Failure"]
        killed = [event for _, event in store.events(alloc.id) if event.type == "Killed"]
    assert found == [f"the allocation cannot be restored: {planted}: a link; not followed"], found
    assert killed, "the task left running was not killed through its driver"
