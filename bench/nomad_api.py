"""The everyday ``nomad`` commands, and a read load, against herder's Nomad-compatible API and a Nomad dev agent.

    python bench/nomad_api.py [--tasks 10] [--rounds 3] [--seconds 10] [--clients 10] [--no-record]

Against a herder agent's ``[nomad_api]`` listener and against ``nomad agent -dev`` with its own
raw_exec, the two taking turns ROUNDS times (after one warm-up round each), with the real ``nomad``
on PATH; medians:

- ``nomad job run`` of a service job of TASKS sleeping raw_exec tasks (``count``) with ``update {
  min_healthy_time = "1s" }``, until the command returns with the deployment successful (target:
  herder at most 0.5 times Nomad's time: it has no scheduler round trips); then ``nomad alloc
  status`` of one of its allocations;
- a task that prints 10 MiB as fast as it can: ``nomad alloc logs -f`` from the first byte to the
  last, while it prints; then, once printed, ``nomad alloc logs`` (the whole log), and ``nomad
  alloc fs`` of the log's file (``alloc/logs/t.stdout.0``: a file of 10 MiB), which reports "not
  served" where the agent answers the command with an error;
- the read load: ``wrk`` (``apt-get install wrk``; the load is left out, saying so, without it) with
  CLIENTS keep-alive connections on 2 threads for SECONDS, ``GET /v1/job/:id/allocations`` of a
  running job of TASKS allocations, with the token header, ROUNDS times each in turn: requests per
  second and p99 (targets: herder at least 0.6 times Nomad's throughput, its p99 no worse).

The result replaces the "Nomad-compatible API" section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from jobs import load  # noqa: E402
from nomad_plugin import dev_agent_with_raw_exec  # noqa: E402
from results import write_section  # noqa: E402

from tests.core.nomad_api.conftest import NomadAgent  # noqa: E402
from tests.nomad.helpers import NomadCluster  # noqa: E402
from tests.support.waiting import wait_for  # noqa: E402

SIDES = ("nomad", "herder")
LABELS = {"nomad": "Nomad dev agent (baseline)", "herder": "herder, Nomad-compatible API"}

JOB = """
job "{name}" {{
  datacenters = ["dc1"]
  group "g" {{
    count = {count}
    update {{
      min_healthy_time = "1s"
    }}
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sleep"
        args    = ["3600"]
      }}
    }}
  }}
}}
"""

LOG_SIZE = 10 << 20
LOG_FILE = "alloc/logs/t.stdout.0"
LOGGER = """
job "{name}" {{
  datacenters = ["dc1"]
  type        = "batch"
  group "g" {{
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", "sleep 1; yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c {size}; exec sleep 3600"]
      }}
      logs {{
        max_files     = 3
        max_file_size = 20
      }}
    }}
  }}
}}
"""


def nomad(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["nomad", *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NOMAD_ADDR": address}, stdin=subprocess.DEVNULL)


def timed(address: str, *args: str, check: Callable[[subprocess.CompletedProcess[bytes]], bool] | None = None
          ) -> float | str:
    """Seconds ``nomad ARGS`` takes, or, when it fails (or ``check`` refuses its output), why."""
    started = time.perf_counter()
    run = subprocess.run(["nomad", *args], capture_output=True, timeout=600, stdin=subprocess.DEVNULL,
                         env={**os.environ, "NOMAD_ADDR": address})
    elapsed = time.perf_counter() - started
    if run.returncode != 0 or (check is not None and not check(run)):
        said = (run.stderr or run.stdout).decode("utf-8", "replace").strip().splitlines()
        return f"not served ({said[-1][:100] if said else f'exit {run.returncode}'})"
    return elapsed


def job_run(address: str, path: Path) -> float:
    """Seconds ``nomad job run`` takes until it returns with the deployment successful."""
    started = time.perf_counter()
    run = nomad(address, "job", "run", str(path))
    elapsed = time.perf_counter() - started
    if run.returncode != 0 or "successful" not in run.stdout:
        raise SystemExit(f"nomad job run against {address} did not succeed:\n{run.stdout}{run.stderr}")
    return elapsed


def allocs(address: str, job: str) -> list[dict[str, object]]:
    response = httpx.get(f"{address}/v1/job/{job}/allocations", timeout=30,
                         headers={"X-Nomad-Token": os.environ["NOMAD_TOKEN"]})
    response.raise_for_status()
    return list(response.json())


def follow_logs(address: str, alloc: str, size: int) -> float:
    """Seconds ``nomad alloc logs -f`` takes from the first byte of a running task's ``size`` bytes to the last.

    The task waits a second, then prints them as fast as it can, then sleeps: the follower is started
    once the task runs, so it reads them as they come.
    """
    follower = subprocess.Popen(["nomad", "alloc", "logs", "-f", alloc], stdout=subprocess.PIPE,
                                env={**os.environ, "NOMAD_ADDR": address}, stdin=subprocess.DEVNULL)
    assert follower.stdout is not None
    try:
        first = os.read(follower.stdout.fileno(), 1 << 16)
        started, read = time.perf_counter(), len(first)
        while read < size and (chunk := os.read(follower.stdout.fileno(), 1 << 16)):
            read += len(chunk)
        elapsed = time.perf_counter() - started
    finally:
        follower.kill()
        follower.wait()
    if read != size:
        raise SystemExit(f"nomad alloc logs -f against {address} read {read} bytes, not {size}")
    return elapsed * size / (size - len(first))  # as if the first read had taken its share


def whole(run: subprocess.CompletedProcess[bytes]) -> bool:
    return len(run.stdout) == LOG_SIZE


def logger_round(address: str, root: Path, name: str, into: dict[str, list[float | str]]) -> None:
    """The logging task's measurements, one of each, added to ``into``."""
    path = root / f"{name}.nomad"
    path.write_text(LOGGER.format(name=name, size=LOG_SIZE))
    run = nomad(address, "job", "run", "-detach", str(path))
    if run.returncode != 0:
        raise SystemExit(f"nomad job run against {address} failed:\n{run.stdout}{run.stderr}")

    def running() -> str | None:
        found = allocs(address, name)
        return str(found[0]["ID"]) if found and found[0]["ClientStatus"] == "running" else None

    alloc = wait_for(running, timeout=300, what=f"{name} running")
    into["logs -f"].append(follow_logs(address, alloc, LOG_SIZE))
    into["logs"].append(timed(address, "alloc", "logs", alloc, check=whole))
    into["fs"].append(timed(address, "alloc", "fs", alloc, LOG_FILE, check=whole))
    nomad(address, "job", "stop", "-purge", name)


WRK_P99 = re.compile(r"^\s*99%\s+([\d.]+)(us|ms|s)$", re.MULTILINE)
WRK_RATE = re.compile(r"^Requests/sec:\s+([\d.]+)$", re.MULTILINE)
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def wrk(url: str, clients: int, seconds: float) -> tuple[float, float]:
    """Requests per second and p99 in ms of ``wrk`` with ``clients`` keep-alive connections reading ``url``."""
    command = ["wrk", "-t", str(min(2, clients)), "-c", str(clients), "-d", f"{seconds:g}s", "--latency",
               "-H", f"X-Nomad-Token: {os.environ['NOMAD_TOKEN']}", url]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise SystemExit(f"wrk saw errors against {url}:\n{out}")
    p99, rate = WRK_P99.search(out), WRK_RATE.search(out)
    if p99 is None or rate is None:
        raise SystemExit(f"cannot read wrk's output:\n{out}")
    return float(rate.group(1)), float(p99.group(1)) * UNITS[p99.group(2)]


def read_load(addresses: dict[str, str], root: Path, tasks: int, clients: int, seconds: float,
              rounds: int) -> dict[str, list[tuple[float, float]]]:
    """``wrk`` against each side's allocations of a running job of ``tasks`` allocations, in turns."""
    found: dict[str, list[tuple[float, float]]] = {side: [] for side in addresses}
    path = root / "bench-load.nomad"
    path.write_text(JOB.format(name="bench-load", count=tasks))
    for address in addresses.values():
        job_run(address, path)
        wrk(f"{address}/v1/job/bench-load/allocations", clients, 2)  # warm-up
    for _ in range(rounds):
        for side, address in addresses.items():
            found[side].append(wrk(f"{address}/v1/job/bench-load/allocations", clients, seconds))
    for address in addresses.values():
        nomad(address, "job", "stop", "-purge", "bench-load")
    return found


def median(values: list[float | str]) -> str:
    """The median in seconds, or why there is none."""
    failed = [v for v in values if isinstance(v, str)]
    if failed:
        return failed[0]
    return f"{statistics.median(v for v in values if isinstance(v, float)):.2f} s"


def every(values: list[float | str]) -> str:
    return ", ".join(f"{v:.2f}" if isinstance(v, float) else "-" for v in values)


def measure(tasks: int, rounds: int, seconds: float, clients: int, load_only: bool = False) -> str:
    load_before = load()
    results: dict[str, dict[str, list[float | str]]] = {
        side: {"run": [], "status": [], "logs -f": [], "logs": [], "fs": []} for side in SIDES}
    loaded: dict[str, list[tuple[float, float]]] = {}
    has_wrk = shutil.which("wrk") is not None
    with tempfile.TemporaryDirectory(prefix="herder-bench-nomad-api-") as tmp:
        root = Path(tmp)
        cluster = NomadCluster(root / "nomad")
        herder = NomadAgent(root / "herder")
        try:
            dev_agent_with_raw_exec(cluster)
            herder.start()
            os.environ["NOMAD_TOKEN"] = herder.token  # herder's own; the dev agent, without ACLs, ignores it
            addresses = {"nomad": cluster.server.address, "herder": herder.nomad_url}
            for round in range(0 if load_only else rounds + 1):  # the first round warms up both sides
                for side, address in addresses.items():
                    into: dict[str, list[float | str]] = {key: [] for key in results[side]}
                    name = f"bench-{side}-{round}"
                    path = root / f"{name}.nomad"
                    path.write_text(JOB.format(name=name, count=tasks))
                    into["run"].append(job_run(address, path))
                    into["status"].append(timed(address, "alloc", "status", str(allocs(address, name)[0]["ID"])))
                    nomad(address, "job", "stop", "-purge", name)
                    logger_round(address, root, f"logs-{side}-{round}", into)
                    if round:
                        for key, values in into.items():
                            results[side][key] += values
            if has_wrk:
                loaded = read_load(addresses, root, tasks, clients, seconds, rounds)
        finally:
            herder.shutdown()
            cluster.close()
    version = subprocess.run(["nomad", "version"], capture_output=True, text=True).stdout.splitlines()[0]
    if load_only:
        return f"Load average before: {load_before}; after: {load()}. {version}.\n" + read_load_table(
            loaded, rounds, seconds, clients, tasks)
    run = {side: statistics.median(v for v in results[side]["run"] if isinstance(v, float)) for side in SIDES}
    ratio = run["herder"] / run["nomad"]
    mib_s = {side: LOG_SIZE / statistics.median(v for v in results[side]["logs -f"] if isinstance(v, float)) / 2**20
             for side in SIDES}

    def row(side: str, key: str) -> str:
        return f"| {LABELS[side]} | {median(results[side][key])} | {every(results[side][key])} |"

    def table(key: str, what: str) -> str:
        return (f"| agent | {what} (median) | all rounds (s) |\n|---|---:|---|\n"
                f"{row('nomad', key)}\n{row('herder', key)}")

    body = f"""
The machine is shared with other engineers' builds and test runs (load average, 1, 5, 15 min, before:
{load_before}; after: {load()}): absolute figures move with it, the ratios measured in the same run are what
counts. Against herder's `[nomad_api]` listener and against `nomad agent -dev` (its own raw_exec), the same files
and commands, the two taking turns; medians of {rounds} rounds after a warm-up. {version}.

`nomad job run` of one service job of {tasks} sleeping raw_exec tasks (`count = {tasks}`,
`update {{ min_healthy_time = "1s" }}`), until the command returns with its deployment successful (both wait the
`min_healthy_time` of 1 s once every task runs):

{table("run", "`nomad job run`")}

herder / Nomad: **{ratio:.2f}** (target ≤ 0.5: {"met" if ratio <= 0.5 else "NOT met"}).

`nomad alloc status` of one of its allocations, the command from start to exit:

{table("status", "`nomad alloc status`")}

A task printing {LOG_SIZE >> 20} MiB as fast as it can. `nomad alloc logs -f` (Nomad's framed stream, base64 in
JSON), the follower started before the first byte: from the first byte read to the last; throughput
{mib_s["nomad"]:.1f} MiB/s for Nomad, {mib_s["herder"]:.1f} MiB/s for herder.

{table("logs -f", "`nomad alloc logs -f`")}

Once printed, `nomad alloc logs` of the whole log, and `nomad alloc fs ID {LOG_FILE}` (the same {LOG_SIZE >> 20} MiB
as a file), from start to exit:

{table("logs", "`nomad alloc logs`")}

{table("fs", f"`nomad alloc fs` of {LOG_SIZE >> 20} MiB")}
"""
    return body + read_load_table(loaded, rounds, seconds, clients, tasks)


def read_load_table(loaded: dict[str, list[tuple[float, float]]], rounds: int, seconds: float, clients: int,
                    tasks: int) -> str:
    """What :func:`read_load` measured, as the section says it."""
    if not loaded:
        return "\nThe read load was not measured: no `wrk` on PATH (`apt-get install wrk`).\n"
    rate = {side: statistics.median(r for r, _ in loaded[side]) for side in SIDES}
    p99 = {side: statistics.median(p for _, p in loaded[side]) for side in SIDES}
    throughput = rate["herder"] / rate["nomad"]

    def rounds_of(side: str) -> str:
        return ", ".join(f"{r:,.0f} req/s p99 {p:.1f} ms" for r, p in loaded[side])

    return f"""
The read load: `wrk -t 2 -c {clients} -d {seconds:g}s --latency` with the token header, {clients} keep-alive
connections reading `GET /v1/job/bench-load/allocations` (a running service job of {tasks} allocations), each
agent in turn, {rounds} rounds, medians:

| agent | req/s | p99 |
|---|---:|---:|
| {LABELS["nomad"]} | {rate["nomad"]:,.0f} | {p99["nomad"]:.1f} ms |
| {LABELS["herder"]} | {rate["herder"]:,.0f} | {p99["herder"]:.1f} ms |

- Throughput: herder / Nomad **{throughput:.2f}** (target ≥ 0.6: {"met" if throughput >= 0.6 else "NOT met"}).
- p99: herder {p99["herder"]:.1f} ms against Nomad's {p99["nomad"]:.1f} ms (target: no worse: \
{"met" if p99["herder"] <= p99["nomad"] else "NOT met"}).

All rounds: herder {rounds_of("herder")}; Nomad {rounds_of("nomad")}.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--load-only", action="store_true",
                        help="only the read load (wrk), printed, not recorded (the section holds the commands too)")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        print("no wrk on PATH (apt-get install wrk): the read load is left out", file=sys.stderr)
    body = measure(args.tasks, args.rounds, args.seconds, args.clients, args.load_only)
    print(body)
    if not (args.no_record or args.load_only):
        write_section("Nomad-compatible API", f"python bench/nomad_api.py --tasks {args.tasks} --rounds {args.rounds} "
                      f"--seconds {args.seconds:g} --clients {args.clients}", body)


if __name__ == "__main__":
    main()
