"""``nomad job run`` against herder's Nomad-compatible API and against a Nomad dev agent.

    python bench/nomad_api.py [--tasks 10] [--rounds 3] [--no-record]

The same job file, a service job of TASKS sleeping raw_exec tasks (``count``)
with ``update { min_healthy_time = "1s" }``, is run with the real ``nomad`` on
PATH (``nomad job run``, its evaluation and deployment monitor included) until
the command returns with the deployment successful: against a herder agent's
``[nomad_api]`` listener, and against ``nomad agent -dev`` with its own
raw_exec, the two taking turns ROUNDS times (after one warm-up round each),
each job stopped before the next. Medians; target: herder at most 0.5 times
Nomad's time (it has no scheduler round trips). Then ``nomad alloc logs -f``
of a running task printing 10 MiB, from the first byte to the last:
throughput on both.

The result replaces the "Nomad-compatible API" section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
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


def nomad(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["nomad", *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NOMAD_ADDR": address}, stdin=subprocess.DEVNULL)


def job_run(address: str, path: Path) -> float:
    """Seconds ``nomad job run`` takes until it returns with the deployment successful."""
    started = time.perf_counter()
    run = nomad(address, "job", "run", str(path))
    elapsed = time.perf_counter() - started
    if run.returncode != 0 or "successful" not in run.stdout:
        raise SystemExit(f"nomad job run against {address} did not succeed:\n{run.stdout}{run.stderr}")
    return elapsed


LOG_SIZE = 10 << 20
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


def follow_logs(address: str, root: Path, name: str, size: int) -> float:
    """Seconds ``nomad alloc logs -f`` takes from the first byte of a running task's ``size`` bytes to the last.

    The task waits a second, then prints them as fast as it can, then sleeps: the follower is started
    once the task runs, so it reads them as they come.
    """
    path = root / f"{name}.nomad"
    path.write_text(LOGGER.format(name=name, size=size))
    run = nomad(address, "job", "run", "-detach", str(path))
    if run.returncode != 0:
        raise SystemExit(f"nomad job run against {address} failed:\n{run.stdout}{run.stderr}")

    def running() -> str | None:
        allocs = httpx.get(f"{address}/v1/job/{name}/allocations", timeout=30,
                           headers={"X-Nomad-Token": os.environ["NOMAD_TOKEN"]}).json()
        return allocs[0]["ID"] if allocs and allocs[0]["ClientStatus"] == "running" else None

    alloc = wait_for(running, timeout=300, what=f"{name} running")
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


def measure(tasks: int, rounds: int) -> str:
    load_before = load()
    times: dict[str, list[float]] = {"herder": [], "nomad": []}
    reads: dict[str, list[float]] = {"herder": [], "nomad": []}
    with tempfile.TemporaryDirectory(prefix="herder-bench-nomad-api-") as tmp:
        root = Path(tmp)
        cluster = NomadCluster(root / "nomad")
        herder = NomadAgent(root / "herder")
        try:
            dev_agent_with_raw_exec(cluster)
            herder.start()
            os.environ["NOMAD_TOKEN"] = herder.token  # herder's own; the dev agent, without ACLs, ignores it
            addresses = {"herder": herder.nomad_url, "nomad": cluster.server.address}
            for round in range(rounds + 1):  # the first round warms up both sides
                for side, address in addresses.items():
                    name = f"bench-{side}-{round}"
                    path = root / f"{name}.nomad"
                    path.write_text(JOB.format(name=name, count=tasks))
                    elapsed = job_run(address, path)
                    if round:
                        times[side].append(elapsed)
                    nomad(address, "job", "stop", "-purge", name)
                    elapsed = follow_logs(address, root, f"logs-{side}-{round}", LOG_SIZE)
                    if round:
                        reads[side].append(elapsed)
                    nomad(address, "job", "stop", "-purge", f"logs-{side}-{round}")
        finally:
            herder.shutdown()
            cluster.close()
    median = {side: statistics.median(values) for side, values in times.items()}
    mib_s = {side: LOG_SIZE / statistics.median(values) / 2**20 for side, values in reads.items()}
    ratio = median["herder"] / median["nomad"]
    version = subprocess.run(["nomad", "version"], capture_output=True, text=True).stdout.splitlines()[0]

    def rounds_of(side: str) -> str:
        return ", ".join(f"{t:.2f}" for t in times[side])

    return f"""
`nomad job run` of one service job of {tasks} sleeping raw_exec tasks (`count = {tasks}`,
`update {{ min_healthy_time = "1s" }}`), until the command returns with its deployment successful:
against herder's `[nomad_api]` listener and against `nomad agent -dev` (its own raw_exec), the same file,
the two taking turns; medians of {rounds} rounds after a warm-up. Load average (1, 5, 15 min) before:
{load_before}; after: {load()}.

| agent | `nomad job run` (median) | all rounds (s) |
|---|---:|---|
| Nomad dev agent (baseline) | {median["nomad"]:.2f} s | {rounds_of("nomad")} |
| herder, Nomad-compatible API | {median["herder"]:.2f} s | {rounds_of("herder")} |

herder / Nomad: **{ratio:.2f}** (target ≤ 0.5: {"met" if ratio <= 0.5 else "NOT met"}). Both wait the
`min_healthy_time` of 1 s once every task runs.

`nomad alloc logs -f` of a running task printing {LOG_SIZE >> 20} MiB as fast as it can (Nomad's framed stream,
base64 in JSON), the follower started before the first byte: from the first byte read to the last;
medians of the same rounds:

| agent | throughput | all rounds (s) |
|---|---:|---|
| Nomad dev agent (baseline) | {mib_s["nomad"]:.1f} MiB/s | {", ".join(f"{t:.2f}" for t in reads["nomad"])} |
| herder, Nomad-compatible API | {mib_s["herder"]:.1f} MiB/s | {", ".join(f"{t:.2f}" for t in reads["herder"])} |

{version}.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    body = measure(args.tasks, args.rounds)
    print(body)
    if not args.no_record:
        write_section("Nomad-compatible API", f"python bench/nomad_api.py --tasks {args.tasks} --rounds {args.rounds}",
                      body)


if __name__ == "__main__":
    main()
