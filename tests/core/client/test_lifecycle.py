"""The task lifecycle against real processes and signals."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import pytest

from herder.app import ForegroundRun
from herder.cli.render import summary
from herder.client.client import JobSource
from herder.errors import PlacementError
from herder.jobspec import load_job_text
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins
from tests.support.running import make_config, run_job, start_job
from tests.support.waiting import SH_WAIT_FOR, wait_for, wait_for_text


def job(tasks: str, *, type: str = "service", restart: str = "", count: int = 1) -> str:
    return f'job "j" {{\n type = "{type}"\n group "g" {{\n count = {count}\n {restart}\n {tasks}\n }}\n}}\n'


def sh(name: str, script: str, extra: str = "") -> str:
    script = script.replace("\\", "\\\\").replace('"', '\\"')
    return (f'task "{name}" {{\n driver = "raw_exec"\n {extra}\n config {{\n command = "/bin/sh"\n'
            f' args = ["-c", "{script}"]\n }}\n }}\n')


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_task_ignoring_sigint_is_killed_after_kill_timeout_with_its_child(data_dir: Path, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = (f"trap '' INT; sh -c \"trap '' INT; sleep 300\" & echo $$ $! > {pids}.tmp; mv {pids}.tmp {pids}; "
              "while true; do sleep 0.1; done")
    run, wait = start_job(job(sh("stubborn", script, 'kill_timeout = "1s"')), data_dir)
    leader, child = map(int, wait_for_text(pids).split())
    assert alive(leader) and alive(child)
    run.runner.stop()
    assert wait() == "stopped"
    types = run.types("stubborn")
    assert types[-3:] == ["Killing", "Terminated", "Killed"]
    terminated = next(r.event for r in run.events if r.event.type == "Terminated")
    assert terminated.details["signal"] == signal.SIGKILL  # SIGINT was ignored: forced after kill_timeout
    assert not alive(leader) and not alive(child)


def test_kill_signal_is_what_the_task_receives(data_dir: Path, tmp_path: Path) -> None:
    got, ready = tmp_path / "got", tmp_path / "ready"
    script = (f"trap 'echo TERM > {got}; exit 0' TERM; trap 'echo INT > {got}; exit 0' INT; echo yes > {ready}; "
              "while true; do sleep 0.1; done")
    run, wait = start_job(job(sh("t", script, 'kill_signal = "SIGTERM"')), data_dir)
    run.wait_for("Started")
    wait_for_text(ready)  # the traps are in place
    run.runner.stop()
    wait()
    assert got.read_text().strip() == "TERM"
    assert "Sent SIGTERM" in next(r.event.message for r in run.events if r.event.type == "Killing")


def test_restart_policy_fail_mode_with_real_exits(data_dir: Path) -> None:
    restart = 'restart {\n attempts = 2\n interval = "1m"\n delay = "0s"\n mode = "fail"\n }'
    run = run_job(job(sh("t", "exit 3"), restart=restart), data_dir)
    assert run.status == "failed"
    assert run.types("t").count("Started") == 3
    assert run.types("t").count("Restarting") == 2
    assert run.types("t")[-1] == "Not Restarting"
    allocs = summary(run.status, run.runner.allocs, run.runner.health)["allocs"]
    (alloc,) = allocs.values()
    assert alloc["tasks"]["t"] == {"state": "dead", "failed": True, "restarts": 2, "exit_code": 3,
                                     "checks": []}


def test_batch_exit_0_is_complete_and_not_restarted(data_dir: Path) -> None:
    run = run_job(job(sh("t", "true"), type="batch"), data_dir)
    assert run.status == "complete"
    assert run.types("t").count("Started") == 1


def test_leader_death_kills_the_others(data_dir: Path, tmp_path: Path) -> None:
    up = tmp_path / "sidecar-up"
    tasks = (sh("leader", f"{SH_WAIT_FOR} {up}", "leader = true")
             + sh("sidecar", f"echo up > {up}; while true; do sleep 0.1; done"))
    run = run_job(job(tasks, type="batch"), data_dir)
    assert run.status == "complete"
    sidecar = run.types("sidecar")
    assert "Leader Task Dead" in sidecar and sidecar[-1] == "Killed"


def test_a_failed_task_kills_its_siblings(data_dir: Path, tmp_path: Path) -> None:
    restart = 'restart {\n attempts = 0\n mode = "fail"\n }'
    up = tmp_path / "good-up"
    tasks = sh("bad", f"{SH_WAIT_FOR} {up}; exit 1") + sh("good", f"echo up > {up}; while true; do sleep 0.1; done")
    run = run_job(job(tasks, restart=restart), data_dir)
    assert run.status == "failed"
    good = run.types("good")
    assert "Sibling Task Failed" in good and good[-1] == "Killed"
    event = next(r.event for r in run.events if r.event.type == "Sibling Task Failed")
    assert event.details["failed_sibling"] == "bad"


def test_count_allocations_and_their_tasks_start_in_parallel(data_dir: Path, tmp_path: Path) -> None:
    # Every task waits until all six have started: run one after another, none would finish
    # (each gives up after 60 s).
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    script = (f"touch {barrier}/$NOMAD_ALLOC_INDEX-$NOMAD_TASK_NAME; i=0; "
              f"while [ $(ls {barrier} | wc -l) -lt 6 ]; do i=$((i+1)); [ $i -gt 1200 ] && exit 1; sleep 0.05; done")
    run = run_job(job(sh("a", script) + sh("b", script), type="batch", count=3), data_dir)
    assert run.status == "complete"
    assert len(run.runner.allocs) == 3
    assert sorted(p.name for p in barrier.iterdir()) == [f"{i}-{t}" for i in range(3) for t in "ab"]
    assert {a.alloc.name for a in run.runner.allocs} == {"j.g[0]", "j.g[1]", "j.g[2]"}


def test_shutdown_delay_comes_before_the_kill(data_dir: Path) -> None:
    run, wait = start_job(job(sh("t", "while true; do sleep 0.1; done", 'shutdown_delay = "200ms"')), data_dir)
    run.wait_for("Started")
    run.runner.stop()
    wait()
    types = run.types("t")
    assert types.index("Waiting for shutdown delay") < types.index("Killing")


def test_restart_and_signal_a_running_task(data_dir: Path, tmp_path: Path) -> None:
    got, ready = tmp_path / "usr1", tmp_path / "ready"
    script = f"trap 'echo USR1 >> {got}' USR1; echo yes > {ready}; while true; do sleep 0.1; done"
    run, wait = start_job(job(sh("t", script)), data_dir)
    run.wait_for("Started")
    wait_for_text(ready)  # the trap is in place
    task = run.runner.allocs[0].tasks[0]
    task.signal(signal.SIGUSR1)
    assert wait_for_text(got) == "USR1"
    task.restart("checks failed")
    wait_for(lambda: run.types("t").count("Started") == 2, what=lambda: f"a second start; events {run.types()}")
    run.runner.stop()
    wait()
    types = run.types("t")
    assert "Signaling" in types and "Restart Signal" in types
    assert types.count("Started") == 2
    assert task.status.restarts == 1


def test_dynamic_ports_are_distinct_and_in_the_environment(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "ports"
    out.mkdir()
    task = (f'task "t" {{\n driver = "raw_exec"\n config {{\n command = "/bin/sh"\n'
            f' args = ["-c", "echo $NOMAD_PORT_http $HERDER_PORT_http $NOMAD_ADDR_http > {out}/$NOMAD_ALLOC_INDEX"]\n'
            f' }}\n resources {{\n network {{\n port "http" {{}}\n }}\n }}\n }}')
    run = run_job(job(task, type="batch", count=4), data_dir)
    assert run.status == "complete"
    seen = [f.read_text().split() for f in out.iterdir()]
    ports = {int(nomad) for nomad, herder, addr in seen if nomad == herder and addr == f"127.0.0.1:{nomad}"}
    assert len(ports) == 4 and all(2000 <= p <= 12000 for p in ports)


def test_a_taken_static_port_fails_placement_naming_it(data_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        taken.listen()
        task = sh("t", "true").replace('driver = "raw_exec"', f'driver = "raw_exec"\n resources {{\n network {{\n'
                                       f' port "admin" {{\n static = {port}\n }}\n }}\n }}')
        with pytest.raises(PlacementError, match=str(port)):
            start_job(job(task), data_dir)


def test_task_environment_has_both_prefixes(data_dir: Path, tmp_path: Path) -> None:
    env_file = tmp_path / "env"
    run_job(job(sh("t", f"env > {env_file}", 'meta {\n team = "core"\n }'), type="batch"), data_dir)
    env = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
    for name in ("ALLOC_ID", "ALLOC_NAME", "ALLOC_INDEX", "JOB_NAME", "GROUP_NAME", "TASK_NAME", "ALLOC_DIR",
                 "TASK_DIR", "SECRETS_DIR", "CPU_LIMIT", "MEMORY_LIMIT", "DC", "REGION", "META_TEAM"):
        assert env[f"NOMAD_{name}"] == env[f"HERDER_{name}"], name
    assert env["NOMAD_ALLOC_NAME"] == "j.g[0]"
    assert env["NOMAD_META_TEAM"] == "core"
    assert Path(env["NOMAD_TASK_DIR"]).name == "local"


def test_task_env_comes_last_and_may_refer_to_variables_meta_and_attributes(data_dir: Path, tmp_path: Path) -> None:
    env_file = tmp_path / "env"
    extra = ('meta {\n team = "core"\n }\n env {\n LISTEN = "${NOMAD_ADDR_http}"\n'
             ' OWNER = "${meta.team} on ${node.datacenter}"\n UNKNOWN = "${NOPE} and ${attr.no.such}"\n'
             ' NOMAD_REGION = "overridden"\n }\n resources {\n network {\n port "http" {}\n }\n }')
    run_job(job(sh("t", f"env > {env_file}", extra), type="batch"), data_dir)
    env = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
    assert env["LISTEN"] == f"127.0.0.1:{env['NOMAD_PORT_http']}"
    assert env["OWNER"] == "core on dc1"
    assert env["UNKNOWN"] == "${NOPE} and ${attr.no.such}"
    assert (env["NOMAD_REGION"], env["HERDER_REGION"]) == ("overridden", "global")


def test_group_ports_are_shared_by_the_tasks_of_an_allocation(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "ports"
    out.mkdir()
    write = f"echo $NOMAD_PORT_http $NOMAD_PORT_metrics > {out}/$NOMAD_TASK_NAME"
    network = 'network {\n port "http" {}\n port "metrics" {\n static = 9300\n }\n }'
    run = run_job(job(network + sh("a", write) + sh("b", write), type="batch"), data_dir)
    assert run.status == "complete"
    a, b = ((out / name).read_text().split() for name in "ab")
    assert a == b and a[1] == "9300"


def test_the_task_env_can_be_used_in_config(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    task = ('task "t" {\n driver = "raw_exec"\n env {\n GREETING = "hi ${NOMAD_TASK_NAME}"\n }\n config {\n'
            f' command = "/bin/sh"\n args = ["-c", "echo ${{GREETING}} > {out}"]\n }}\n }}')
    run_job(job(task, type="batch"), data_dir)
    assert out.read_text().strip() == "hi t"


def test_host_attributes_are_interpolated(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_job(job(sh("t", f"echo ${{attr.kernel.name}} ${{attr.cpu.numcores}} ${{node.unique.name}} > {out}"),
                type="batch"), data_dir)
    assert out.read_text().split() == ["linux", str(os.cpu_count()), os.uname().nodename]


def test_a_stop_during_placement_runs_nothing(data_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    job_text = job(sh("t", f"touch {marker}; sleep 30"))
    runner = ForegroundRun(make_config(data_dir), Hooks(load_plugins()), load_job_text(job_text, "hcl", "j.hcl"),
                           JobSource(text=job_text, format="hcl", source="j.hcl"), on_event=lambda record: None)
    try:
        runner.stop()
        runner.place()
        assert runner.run() == "stopped"
    finally:
        runner.close()
    assert not marker.exists()
