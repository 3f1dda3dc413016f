"""The agent's API under load, and its memory per running task.

    python bench/agent_api.py [--allocs 100] [--seconds 5] [--clients 10] [--no-record]
    python bench/agent_api.py --against-nomad [--allocs 20] [--seconds 10] [--clients 10] [--rounds 3]

An agent on a temporary data dir runs a job of ALLOCS sleeping raw_exec
tasks (one per allocation). Then:

(a) latency: one client asks ``GET /v1/allocations/{id}`` (alloc status,
    round-robin over the allocations) back to back for SECONDS; p50/p99 and
    requests per second, against ``GET /v1/health`` in the same run (the
    HTTP stack's floor; target for alloc status: p99 under 20 ms);
(b) throughput: CLIENTS concurrent clients doing the same;
(c) memory: the agent's RSS with 1 running task and with ALLOCS, per added
    task, and its supervisor's (target: under 1 MiB per task beyond the
    supervision cost, the "Supervision" section).

With ``--against-nomad``, instead: herder's agent against Nomad's (``nomad
agent -dev``, the ``nomad`` on PATH), each running ALLOCS allocations of one
sleeping task (herder's raw_exec and Nomad's), loaded the same way: ``wrk``
(``apt-get install wrk``) with CLIENTS keep-alive connections on 2 threads for
SECONDS, reading the allocations' status round-robin (``GET
/v1/allocations/{id}`` and Nomad's ``GET /v1/allocation/{id}``), the two
taking turns ROUNDS times; medians of requests per second and of p99
(targets: herder's p99 at most Nomad's, its throughput at least 0.6 times).

The result replaces the "Agent API" (or "Agent against Nomad") section of
``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import asyncio
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
from jobs import load, rss, sleepers  # noqa: E402
from nomad_plugin import dev_agent_with_raw_exec, sleepers_job, until  # noqa: E402
from results import write_section  # noqa: E402

from tests.nomad.helpers import NomadCluster  # noqa: E402
from tests.support.agent import AgentProcess  # noqa: E402
from tests.support.processes import processes_using  # noqa: E402


def supervisor_pid(agent: AgentProcess) -> int:
    return next(pid for pid, cmd in processes_using(agent.data_dir).items() if "herder.supervisor" in cmd)


def run_job(agent: AgentProcess, count: int) -> list[str]:
    ids = [a["id"] for a in agent.submit(sleepers(count, name=f"bench-{count}"))["allocations"]]
    for alloc_id in ids:
        agent.wait_task(alloc_id, "t", timeout=120)
    return ids


def sequential(http: httpx.Client, paths: Callable[[int], str], seconds: float) -> tuple[float, float, float]:
    """p50 and p99 in ms, and requests per second, of one client back to back."""
    latencies: list[float] = []
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        started = time.perf_counter()
        response = http.get(paths(i))
        latencies.append(time.perf_counter() - started)
        response.raise_for_status()
        i += 1
    latencies.sort()
    return (statistics.median(latencies) * 1000, latencies[int(len(latencies) * 0.99)] * 1000,
            len(latencies) / seconds)


def concurrent(agent: AgentProcess, paths: Callable[[int], str], clients: int, seconds: float) -> tuple[float, float]:
    """Requests per second and p99 in ms with ``clients`` concurrent clients."""
    latencies: list[float] = []

    async def client(index: int, http: httpx.AsyncClient, end: float) -> None:
        i = index
        while time.monotonic() < end:
            started = time.perf_counter()
            response = await http.get(paths(i))
            latencies.append(time.perf_counter() - started)
            response.raise_for_status()
            i += clients

    async def main() -> None:
        async with httpx.AsyncClient(base_url=agent.url, headers=agent.headers, timeout=30.0) as http:
            end = time.monotonic() + seconds
            await asyncio.gather(*(client(i, http, end) for i in range(clients)))

    asyncio.run(main())
    latencies.sort()
    return len(latencies) / seconds, latencies[int(len(latencies) * 0.99)] * 1000


WRK_SCRIPT = """
paths = {{{paths}}}
i = 0
request = function()
  i = i % #paths + 1
  return wrk.format("GET", paths[i])
end
"""
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def wrk(url: str, paths: list[str], clients: int, seconds: float, script: Path) -> tuple[float, float]:
    """Requests per second and p99 in ms of ``wrk`` with ``clients`` keep-alive connections over ``paths``."""
    script.write_text(WRK_SCRIPT.format(paths=", ".join(f'"{path}"' for path in paths)))
    command = ["wrk", "-t", str(min(2, clients)), "-c", str(clients), "-d", f"{seconds:g}s", "--latency",
               "-s", str(script), url]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise SystemExit(f"wrk saw errors against {url}:\n{out}")
    p99 = re.search(r"^\s*99%\s+([\d.]+)(us|ms|s)$", out, re.MULTILINE)
    rate = re.search(r"^Requests/sec:\s+([\d.]+)$", out, re.MULTILINE)
    if p99 is None or rate is None:
        raise SystemExit(f"cannot read wrk's output:\n{out}")
    return float(rate.group(1)), float(p99.group(1)) * UNITS[p99.group(2)]


def against_nomad(allocs: int, clients: int, seconds: float, rounds: int) -> str:
    """herder's agent and Nomad's, each with ``allocs`` running allocations, under the same ``wrk`` load."""
    if shutil.which("wrk") is None or shutil.which("nomad") is None:
        raise SystemExit("needs wrk (apt-get install wrk) and nomad on PATH")
    load_before = load()
    results: dict[str, list[tuple[float, float]]] = {"herder": [], "nomad": []}
    with tempfile.TemporaryDirectory(prefix="herder-bench-agents-") as tmp:
        (Path(tmp) / "herder").mkdir()
        agent = AgentProcess(Path(tmp) / "herder").start()
        cluster = NomadCluster(Path(tmp) / "nomad")
        try:
            herder_paths = [f"/v1/allocations/{alloc_id}" for alloc_id in run_job(agent, allocs)]
            dev_agent_with_raw_exec(cluster)
            job = sleepers_job(cluster, "bench-agent", allocs, "raw_exec")
            cluster.api("/v1/jobs", method="PUT", body={"Job": job})
            until(lambda: len([a for a in cluster.allocs("bench-agent") if a["ClientStatus"] == "running"]) >= allocs)
            nomad_paths = [f"/v1/allocation/{a['ID']}" for a in cluster.allocs("bench-agent")]
            targets = {"herder": (agent.url, herder_paths), "nomad": (cluster.server.address, nomad_paths)}
            for url, paths in targets.values():  # warm up: every allocation answered once
                wrk(url, paths, 1, 1, Path(tmp) / "warm.lua")
            for _ in range(rounds):
                for side, (url, paths) in targets.items():
                    results[side].append(wrk(url, paths, clients, seconds, Path(tmp) / f"{side}.lua"))
        finally:
            cluster.close()
            agent.shutdown()
    rate = {side: statistics.median(r for r, _ in found) for side, found in results.items()}
    p99 = {side: statistics.median(p for _, p in found) for side, found in results.items()}
    throughput = rate["herder"] / rate["nomad"]
    version = subprocess.run(["nomad", "version"], capture_output=True, text=True).stdout.splitlines()[0]

    def rounds_of(side: str) -> str:
        return ", ".join(f"{r:.0f} req/s p99 {p:.1f} ms" for r, p in results[side])

    return f"""
Each agent runs {allocs} allocations of one sleeping task (herder's raw_exec; Nomad's own raw_exec,
`nomad agent -dev`). Load generator for both: `wrk -t 2 -c {clients} -d {seconds:g}s --latency`, {clients}
keep-alive connections reading the allocations' status round-robin (herder `GET /v1/allocations/{{id}}`,
Nomad `GET /v1/allocation/{{id}}`), from this machine; the agents take turns, {rounds} rounds, medians.
Load average (1, 5, 15 min) before: {load_before}; after: {load()}.

| agent | req/s | p99 |
|---|---:|---:|
| Nomad (baseline) | {rate["nomad"]:,.0f} | {p99["nomad"]:.1f} ms |
| herder | {rate["herder"]:,.0f} | {p99["herder"]:.1f} ms |

- p99: herder {p99["herder"]:.1f} ms against Nomad's {p99["nomad"]:.1f} ms (target: at most Nomad's: \
{"met" if p99["herder"] <= p99["nomad"] else "NOT met"}).
- Throughput: herder / Nomad **{throughput:.2f}** (target ≥ 0.6: {"met" if throughput >= 0.6 else "NOT met"}).

All rounds: herder {rounds_of("herder")}; Nomad {rounds_of("nomad")}. {version}.
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--allocs", type=int)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against-nomad", action="store_true")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    if args.against_nomad:
        allocs, seconds = args.allocs or 20, args.seconds or 10.0
        body = against_nomad(allocs, args.clients, seconds, args.rounds)
        print(body)
        if not args.no_record:
            write_section("Agent against Nomad", f"python bench/agent_api.py --against-nomad --allocs {allocs} "
                          f"--seconds {seconds:g} --clients {args.clients} --rounds {args.rounds}", body)
        return
    args.allocs, args.seconds = args.allocs or 100, args.seconds or 5.0

    with tempfile.TemporaryDirectory(prefix="herder-bench-agent-") as tmp:
        agent = AgentProcess(Path(tmp)).start()
        try:
            assert agent.proc is not None
            one = run_job(agent, 1)
            time.sleep(1.0)
            agent_one, supervisor_one = rss(agent.proc.pid) // 1024, rss(supervisor_pid(agent)) // 1024
            ids = one + run_job(agent, args.allocs - 1)
            with httpx.Client(base_url=agent.url, headers=agent.headers) as http:
                for alloc_id in ids:  # warm up: every allocation answered once
                    http.get(f"/v1/allocations/{alloc_id}").raise_for_status()
                time.sleep(1.0)
                agent_all, supervisor_all = rss(agent.proc.pid) // 1024, rss(supervisor_pid(agent)) // 1024

                def status(i: int) -> str:
                    return f"/v1/allocations/{ids[i % len(ids)]}"

                def health(i: int) -> str:
                    return "/v1/health"

                health_seq = sequential(http, health, args.seconds)
                status_seq = sequential(http, status, args.seconds)
            health_conc = concurrent(agent, health, args.clients, args.seconds)
            status_conc = concurrent(agent, status, args.clients, args.seconds)
        finally:
            agent.shutdown()

    added = args.allocs - 1
    per_agent = (agent_all - agent_one) / added
    per_supervisor = (supervisor_all - supervisor_one) / added
    body = f"""
An agent running {args.allocs} allocations of one sleeping raw_exec task each. Requests from this
process over loopback (httpx), {args.seconds:g} s per case, `GET /v1/health` as the baseline.

| request | 1 client: p50 | p99 | req/s | {args.clients} clients: req/s | p99 |
|---|---:|---:|---:|---:|---:|
| `GET /v1/health` (baseline) | {health_seq[0]:.2f} ms | {health_seq[1]:.2f} ms | {health_seq[2]:.0f} | \
{health_conc[0]:.0f} | {health_conc[1]:.1f} ms |
| `GET /v1/allocations/{{id}}` (alloc status) | {status_seq[0]:.2f} ms | {status_seq[1]:.2f} ms | \
{status_seq[2]:.0f} | {status_conc[0]:.0f} | {status_conc[1]:.1f} ms |

Alloc status p99 with one client: {status_seq[1]:.1f} ms (target < 20 ms: \
{"met" if status_seq[1] < 20 else "NOT met"}).

| process | 1 task | {args.allocs} tasks | per added task |
|---|---:|---:|---:|
| agent | {agent_one / 1024:.1f} MiB | {agent_all / 1024:.1f} MiB | {per_agent:.1f} KiB |
| its supervisor | {supervisor_one / 1024:.1f} MiB | {supervisor_all / 1024:.1f} MiB | {per_supervisor:.1f} KiB |

The agent's own memory per added task: {per_agent:.0f} KiB beyond the supervisor's {per_supervisor:.1f} KiB \
(target < 1 MiB: {"met" if per_agent < 1024 else "NOT met"}).
"""
    print(body)
    if not args.no_record:
        write_section("Agent API", "python bench/agent_api.py", body)


if __name__ == "__main__":
    main()
