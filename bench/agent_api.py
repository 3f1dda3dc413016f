"""The agent's API under load, and its memory per running task.

    python bench/agent_api.py [--allocs 100] [--seconds 5] [--clients 10] [--no-record]

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

The result replaces the "Agent API" section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from jobs import rss, sleepers  # noqa: E402
from results import write_section  # noqa: E402

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
        async with httpx.AsyncClient(base_url=agent.url, timeout=30.0) as http:
            end = time.monotonic() + seconds
            await asyncio.gather(*(client(i, http, end) for i in range(clients)))

    asyncio.run(main())
    latencies.sort()
    return len(latencies) / seconds, latencies[int(len(latencies) * 0.99)] * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--allocs", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="herder-bench-agent-") as tmp:
        agent = AgentProcess(Path(tmp)).start()
        try:
            assert agent.proc is not None
            one = run_job(agent, 1)
            time.sleep(1.0)
            agent_one, supervisor_one = rss(agent.proc.pid) // 1024, rss(supervisor_pid(agent)) // 1024
            ids = one + run_job(agent, args.allocs - 1)
            with httpx.Client(base_url=agent.url) as http:
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
