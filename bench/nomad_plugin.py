"""The herder plugin's cost to a Nomad agent: handshake, shutdown, the agent's start, and starting tasks.

    python bench/nomad_plugin.py [--rounds 5] [--agents 3] [--tasks 20] [--only plugin|tasks]

1. Handshake: from starting ``nomad-driver-herder`` (with Nomad's magic
   cookie) to its handshake line on stdout; baseline, the same Python
   starting and exiting (``python -c pass``). Nomad starts the plugin twice at
   every agent start (to read its info, then to use it).
2. Shutdown: from ``GRPCController.Shutdown`` to the plugin's exit. Without
   that service go-plugin waits 2 s for a plugin to leave before killing it.
3. Agent start: ``nomad agent -dev`` (the ``nomad`` on PATH) until its node is
   ready with the herder driver fingerprinted healthy; baseline, the same agent
   with an empty plugin dir until its node is ready.

4. Tasks: on one dev agent that has both, a job of TASKS sleeping tasks
   through the herder driver (its raw_exec) against the same job through
   Nomad's own raw_exec, from the job's submission (``PUT /v1/jobs``) until
   every task runs (the latest ``StartedAt`` of its tasks, Nomad's clock,
   which is this machine's); the jobs take turns, stopped and collected
   between rounds. With every task running, the PSS of the processes each
   side adds: herder's plugin and supervisor against Nomad's ``executor``
   per task; ``logmon`` (Nomad's, one per task for every driver) beside.

Best and median of ROUNDS (AGENTS for 3), medians for 4. Ports in 2000-12000,
data in a temp dir. The result replaces the "Nomad plugin" and "Nomad tasks"
sections of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import calendar
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import grpc  # noqa: E402
from jobs import all_ms, load, median_ms, pss  # noqa: E402
from results import write_section  # noqa: E402

from herder_nomad.plugin import MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE  # noqa: E402
from herder_nomad.wire import grpc_controller_pb2, grpc_controller_pb2_grpc  # noqa: E402
from tests.nomad.helpers import PLUGIN, NomadCluster  # noqa: E402
from tests.support.processes import processes_using  # noqa: E402


def handshake_and_shutdown() -> tuple[float, float]:
    env = {**os.environ, MAGIC_COOKIE_KEY: MAGIC_COOKIE_VALUE, "PLUGIN_PROTOCOL_VERSIONS": "2"}
    started = time.perf_counter()
    process = subprocess.Popen([str(PLUGIN)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert process.stdout is not None
    line = process.stdout.readline()
    handshake = time.perf_counter() - started
    address = line.strip().split("|")[3]
    with grpc.insecure_channel(f"unix:{address}") as channel:
        stopping = time.perf_counter()
        grpc_controller_pb2_grpc.GRPCControllerStub(channel).Shutdown(grpc_controller_pb2.Empty(), timeout=10)
        process.wait(10)
        shutdown = time.perf_counter() - stopping
    return handshake, shutdown


def python_start() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - started


def agent_start(root: Path, with_plugin: bool) -> float:
    cluster = NomadCluster(root)
    if not with_plugin:
        (cluster.plugin_dir / "herder").unlink()
    started = time.perf_counter()
    try:
        cluster.add("dev", mode="dev")
        if with_plugin:
            cluster.wait_ready()
        else:
            until(lambda: [n for n in cluster.try_api("/v1/nodes") or [] if n.get("Status") == "ready"])
        return time.perf_counter() - started
    finally:
        cluster.close()


def until(check: Callable[[], object]) -> None:
    deadline = time.monotonic() + 90
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit("the agent did not become ready")
        time.sleep(0.05)


def ms(values: list[float]) -> str:
    return f"{min(values) * 1000:.0f} ms / {statistics.median(values) * 1000:.0f} ms"


SLEEPERS = """
job "{name}" {{
  datacenters = ["dc1"]
  group "g" {{
    count = {count}
    task "t" {{
      driver       = "{driver}"
      kill_timeout = "1s"
      config {{
        {config}
      }}
    }}
  }}
}}
"""
SLEEP = 'command = "/bin/sleep"\n        args    = ["3600"]'
DRIVERS = {
    "herder": ("herder", f"driver = \"raw_exec\"\n        config = {{\n          {SLEEP}\n        }}"),
    "raw_exec": ("raw_exec", SLEEP),
}


def nomad_time(stamp: str) -> float:
    """A Nomad timestamp (RFC 3339, nanoseconds) in seconds since the epoch."""
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + float(f"0.{fraction or 0}")


def start_tasks(cluster: NomadCluster, job: dict[str, Any], count: int) -> float:
    """Seconds from submitting ``job`` until its ``count`` tasks run."""
    submitted = time.time()
    evaluation = cluster.api("/v1/jobs", method="PUT", body={"Job": job})["EvalID"]
    name = str(job["ID"])

    def running() -> list[dict[str, Any]] | None:
        # This submission's allocations only: those of an earlier round may still be listed.
        allocs = [a for a in cluster.allocs(name) if a["EvalID"] == evaluation and a["ClientStatus"] == "running"]
        return allocs if len(allocs) >= count else None

    until(running)
    starts = [nomad_time(state["StartedAt"]) for a in running() or []
              for state in (cluster.alloc(a["ID"])["TaskStates"] or {}).values()]
    return max(starts) - submitted


def stop_tasks(cluster: NomadCluster, name: str) -> None:
    """Stop and purge a job, and have the client collect its allocations."""
    cluster.nomad("job", "stop", "-purge", name)
    until(lambda: not [a for a in cluster.try_api("/v1/allocations") or [] if a["ClientStatus"] == "running"])
    cluster.api("/v1/client/gc", method="PUT")


def side_pss(root: Path) -> dict[str, int]:
    """The PSS in bytes of the processes under ``root`` by kind: herder's plugin and supervisor,
    Nomad's executors and logmons."""
    kinds = {"nomad-driver-herder": "herder plugin", "herder.supervisor": "herder supervisor",
             "executor": "executor", "logmon": "logmon"}
    found: dict[str, int] = dict.fromkeys(kinds.values(), 0)
    for pid, command in processes_using(root).items():
        words = command.split()
        kind = next((kinds[key] for key in kinds if any(key in word for word in words[:3])), None)
        if kind is not None:
            found[kind] += pss(pid)
    return found


def dev_agent_with_raw_exec(cluster: NomadCluster) -> None:
    """Start ``cluster``'s dev agent with the herder driver and Nomad's own raw_exec, both healthy."""
    agent = cluster.add("dev", mode="dev")
    # The tests' agents deny Nomad's own drivers (not under test there): allow raw_exec, the baseline.
    agent.stop()
    config = agent.dir / "agent.hcl"
    config.write_text(config.read_text().replace(",raw_exec\"", "\""))
    agent.start()
    cluster.wait_ready()
    until(lambda: [n for n in cluster.try_api("/v1/nodes") or []
                   if (n.get("Drivers") or {}).get("raw_exec", {}).get("Healthy")])


def sleepers_job(cluster: NomadCluster, name: str, count: int, driver: str) -> dict[str, Any]:
    """The job of ``count`` sleeping tasks through ``driver`` (a key of :data:`DRIVERS`), parsed by Nomad."""
    nomad_driver, config = DRIVERS[driver]
    text = SLEEPERS.format(name=name, count=count, driver=nomad_driver, config=config)
    return cluster.api("/v1/jobs/parse", method="POST", body={"JobHCL": text})  # type: ignore[no-any-return]


def tasks_section(count: int, rounds: int) -> str:
    """Start ``count`` sleeping tasks through herder and through Nomad's raw_exec on one dev agent."""
    load_before = load()
    with tempfile.TemporaryDirectory(prefix="herder-bench-nomad-") as tmp:
        cluster = NomadCluster(Path(tmp))
        try:
            dev_agent_with_raw_exec(cluster)
            jobs = {}
            for side in DRIVERS:
                jobs[side] = sleepers_job(cluster, f"bench-{side}", count, side)
            times: dict[str, list[float]] = {side: [] for side in DRIVERS}
            memory: dict[str, dict[str, int]] = {}
            for round in range(rounds + 1):  # the first round warms up both sides
                for side, job in jobs.items():
                    elapsed = start_tasks(cluster, job, count)
                    if round:
                        times[side].append(elapsed)
                    else:
                        memory[side] = side_pss(Path(tmp))
                    stop_tasks(cluster, str(job["ID"]))
        finally:
            cluster.close()
    load_after = load()
    herder, raw = statistics.median(times["herder"]), statistics.median(times["raw_exec"])
    ratio = herder / raw
    mib = 2**20
    herder_own = memory["herder"]["herder plugin"] + memory["herder"]["herder supervisor"]
    nomad_own = memory["raw_exec"]["executor"]
    return f"""
{count} sleeping tasks (a job of `count = {count}`) on one `nomad agent -dev`, from `PUT /v1/jobs` until the
latest `StartedAt` of its tasks. Medians of {rounds} rounds, the two jobs taking turns, each stopped and
collected before the next. Load average (1, 5, 15 min) before: {load_before}; after: {load_after}.

| driver | until all run (median) | all rounds (ms) |
|---|---:|---|
| Nomad's `raw_exec` (baseline) | {median_ms(times["raw_exec"])} | {all_ms(times["raw_exec"])} |
| `herder` (its raw_exec) | {median_ms(times["herder"])} | {all_ms(times["herder"])} |

herder / Nomad: **{ratio:.2f}** (target ≤ 1.0: {"met" if ratio <= 1.0 else "NOT met"}).

Memory with the {count} tasks running (PSS, the first round):

| processes | PSS | per task |
|---|---:|---:|
| herder: its plugin and its supervisor | {herder_own / mib:.1f} MiB | {herder_own / count / mib:.2f} MiB |
| Nomad's raw_exec: its `executor`s | {nomad_own / mib:.1f} MiB | {nomad_own / count / mib:.2f} MiB |
| `logmon`s under herder (Nomad's, for every driver) | {memory["herder"]["logmon"] / mib:.1f} MiB | \
{memory["herder"]["logmon"] / count / mib:.2f} MiB |
| `logmon`s under raw_exec | {memory["raw_exec"]["logmon"] / mib:.1f} MiB | \
{memory["raw_exec"]["logmon"] / count / mib:.2f} MiB |
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--only", choices=("plugin", "tasks"))
    args = parser.parse_args()
    if shutil.which("nomad") is None or not PLUGIN.exists():
        raise SystemExit("needs nomad on PATH and herder-nomad installed")
    if args.only != "tasks":
        plugin_section(args.rounds, args.agents)
    if args.only != "plugin":
        body = tasks_section(args.tasks, args.rounds)
        write_section("Nomad tasks", f"python bench/nomad_plugin.py --only tasks --tasks {args.tasks} "
                      f"--rounds {args.rounds}", body)
        print(body)


def plugin_section(rounds: int, agents: int) -> None:
    """Handshake, shutdown and the agent's start, with and without the plugin."""
    handshakes, shutdowns, pythons = [], [], []
    for _ in range(rounds):
        pythons.append(python_start())
        handshake, shutdown = handshake_and_shutdown()
        handshakes.append(handshake)
        shutdowns.append(shutdown)
    bare, herder = [], []
    with tempfile.TemporaryDirectory(prefix="herder-bench-nomad-") as tmp:
        for round in range(agents):
            bare.append(agent_start(Path(tmp) / f"bare{round}", with_plugin=False))
            herder.append(agent_start(Path(tmp) / f"herder{round}", with_plugin=True))
    version = subprocess.run(["nomad", "version"], capture_output=True, text=True).stdout.splitlines()[0]
    body = f"""
| what | best / median |
|---|---|
| `python -c pass` (baseline: the interpreter alone) | {ms(pythons)} |
| `nomad-driver-herder` started until its handshake line | {ms(handshakes)} |
| `GRPCController.Shutdown` until the plugin exited (go-plugin's wait without it: 2000 ms) | {ms(shutdowns)} |
| `nomad agent -dev` until its node is ready, empty plugin dir (baseline) | {ms(bare)} |
| `nomad agent -dev` until its node is ready with `herder` healthy | {ms(herder)} |

{rounds} rounds of the first three, {agents} agents of each kind. {version}.
"""
    write_section("Nomad plugin", f"python bench/nomad_plugin.py --only plugin --rounds {rounds} --agents {agents}",
                  body)
    print(body)


if __name__ == "__main__":
    main()
