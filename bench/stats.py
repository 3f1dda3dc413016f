"""What sampling running tasks' resource usage costs the agent.

    python bench/stats.py [--allocs 100] [--seconds 10] [--no-record]

Two agents on temporary data dirs each run a job of ALLOCS sleeping raw_exec
tasks (one per allocation), side by side. The agent samples its tasks every
``collection_interval`` (1 s) while someone watches: one of the two is asked
once for its metrics, and so samples; nobody asks the other (the baseline).
Then:

(a) CPU: each agent's CPU time (utime + stime, ``/proc/<pid>/stat``) over
    the same 3 x SECONDS: the difference is the sampling's, per sampled task
    per second;
(b) latency: one client reading ``GET /v1/allocations/{id}`` (alloc status)
    back to back from one agent, then the other, taking turns 3 times
    SECONDS / 2 each: p50 and p99 (target: sampling raises the p99 by at
    most 10 %); then from the sampling agent with other clients besides: a
    watcher reading every allocation's ``GET /v1/allocations/{id}/stats``
    once a second, as ALLOCS ``alloc status -stats`` watchers would, and a
    Prometheus scrape once a second;
(c) memory: each agent's RSS, the difference per task (the samples kept);
(d) the measurement alone, in this process: ``process_stats`` of each
    task's processes (found in its supervisor cgroup's ``cgroup.procs``),
    as ``SupervisedProcess.stats()`` reads them, without HTTP.

The result replaces the "Stats sampling" section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from jobs import load, rss, sleepers  # noqa: E402
from results import write_section  # noqa: E402

from herder.sdk.stats import process_stats  # noqa: E402
from herder.supervisor.proctree import V1_HIERARCHIES, Cgroup  # noqa: E402
from tests.support.agent import AgentProcess  # noqa: E402
from tests.support.processes import processes_using  # noqa: E402
from tests.support.waiting import wait_for  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of ``pid`` so far."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def alloc_status_latencies(agent: AgentProcess, ids: list[str], stop: threading.Event, out: list[float]) -> None:
    """``GET /v1/allocations/{id}`` round-robin, back to back, until ``stop``; each latency into ``out``."""
    with httpx.Client(base_url=agent.url, headers=agent.headers, timeout=30.0) as http:
        i = 0
        while not stop.is_set():
            started = time.perf_counter()
            http.get(f"/v1/allocations/{ids[i % len(ids)]}").raise_for_status()
            out.append(time.perf_counter() - started)
            i += 1


Sample = Callable[[httpx.Client, list[str]], int]
"""One round of sampling every allocation's task; how many tasks it sampled."""


def phase(agent: AgentProcess, ids: list[str], seconds: float, *, sample: Sample | None,
          read_status: bool) -> tuple[float, list[float], int]:
    """The agent's CPU seconds over ``seconds``, the alloc status latencies meanwhile (if ``read_status``),
    and how many tasks were sampled (a round of ``sample`` once a second)."""
    stop, latencies = threading.Event(), []
    reader = threading.Thread(target=alloc_status_latencies, args=(agent, ids, stop, latencies))
    sampled = 0
    cpu_before = cpu_seconds(agent.proc.pid)
    if read_status:
        reader.start()
    end = time.monotonic() + seconds
    with httpx.Client(base_url=agent.url, headers=agent.headers, timeout=30.0) as http:
        while (now := time.monotonic()) < end:
            if sample is not None:
                sampled += sample(http, ids)
            time.sleep(max(0.0, min(end, now + 1.0) - time.monotonic()))  # once a second, as a watcher
    stop.set()
    if read_status:
        reader.join()
    return cpu_seconds(agent.proc.pid) - cpu_before, sorted(latencies), sampled


def sample_all(http: httpx.Client, ids: list[str]) -> int:
    """Every allocation's stats once; how many tasks that sampled."""
    for alloc_id in ids:
        figures = http.get(f"/v1/allocations/{alloc_id}/stats").raise_for_status().json()
        if figures["tasks"]["t"]["cpu_total_ns"] is None:
            raise SystemExit(f"no CPU figure for {alloc_id}: {figures}")
    return len(ids)


def usage_shown(http: httpx.Client) -> int:
    """How many tasks' CPU one Prometheus scrape shows."""
    text = http.get("/v1/metrics", params={"format": "prometheus"}).raise_for_status().text
    return sum(1 for line in text.splitlines() if line.startswith("herder_task_cpu_seconds_total{"))


def scrape(http: httpx.Client, ids: list[str]) -> int:
    """One Prometheus scrape; how many tasks' usage it showed."""
    shown = usage_shown(http)
    if shown < len(ids):
        raise SystemExit(f"the scrape showed the CPU of {shown} tasks, not {len(ids)}")
    return shown


def measurement_alone(data_dir: Path, rounds: int = 20) -> tuple[float, int]:
    """Seconds per task of reading its processes and measuring them, over the tasks under ``data_dir``;
    and how many tasks."""
    tasks = [pid for pid, command in processes_using(data_dir).items() if command.startswith("sleep")]
    trees = [Cgroup(Path(cgroup)) for pid in tasks if (cgroup := supervisor_cgroup(pid)) is not None]
    if not trees:
        raise SystemExit(f"no task of {data_dir} is in a cgroup of its supervisor")
    started = time.perf_counter()
    for _ in range(rounds):
        for tree in trees:
            process_stats(tree.pids())
    return (time.perf_counter() - started) / (rounds * len(trees)), len(trees)


def supervisor_cgroup(pid: int) -> str | None:
    """The cgroup the supervisor put ``pid`` in (its first writable v1 hierarchy, or v2's), if any."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for hierarchy in V1_HIERARCHIES:
            if hierarchy in controllers.split(",") and "herder" in path:
                return f"/sys/fs/cgroup/{hierarchy}{path}"
        if controllers == "" and "herder" in path and Path("/sys/fs/cgroup/cgroup.controllers").exists():
            return f"/sys/fs/cgroup{path}"
    return None


def p(latencies: list[float], q: float) -> float:
    return latencies[int(len(latencies) * q)] * 1000


def started(root: Path, allocs: int) -> tuple[AgentProcess, list[str]]:
    """An agent running ``allocs`` sleeping tasks, and their allocations."""
    agent = AgentProcess(root).start()
    ids = [a["id"] for a in agent.submit(sleepers(allocs, name="bench-stats"))["allocations"]]
    for alloc_id in ids:
        agent.wait_task(alloc_id, "t", timeout=120)
    return agent, ids


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--allocs", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    load_before = load()
    turns = 3
    with tempfile.TemporaryDirectory(prefix="herder-bench-stats-") as tmp:
        (Path(tmp) / "idle").mkdir()
        (Path(tmp) / "sampling").mkdir()
        idle, idle_ids = started(Path(tmp) / "idle", args.allocs)
        agent, ids = started(Path(tmp) / "sampling", args.allocs)
        try:
            with httpx.Client(base_url=agent.url, headers=agent.headers, timeout=30.0) as http:
                wait_for(lambda: usage_shown(http) == len(ids), what="every task's sample")  # and now it samples
            cpu_before = {a: cpu_seconds(a.proc.pid) for a in (idle, agent)}
            time.sleep(turns * args.seconds)
            cpu = {a: cpu_seconds(a.proc.pid) - cpu_before[a] for a in (idle, agent)}
            memory = {a: rss(a.proc.pid) for a in (idle, agent)}
            baseline: list[float] = []
            sampling: list[float] = []
            for _ in range(turns):
                baseline += phase(idle, idle_ids, args.seconds / 2, sample=None, read_status=True)[1]
                sampling += phase(agent, ids, args.seconds / 2, sample=None, read_status=True)[1]
            baseline.sort()
            sampling.sort()
            _, watched, _ = phase(agent, ids, args.seconds, sample=sample_all, read_status=True)
            _, scraped, _ = phase(agent, ids, args.seconds, sample=scrape, read_status=True)
            alone, measured = measurement_alone(Path(tmp) / "sampling")
        finally:
            agent.shutdown()
            idle.shutdown()
    baseline_p99 = p(baseline, 0.99)

    def rise(latencies: list[float]) -> str:
        change = p(latencies, 0.99) / baseline_p99 - 1
        return f"{change:+.0%}: {'met' if change <= 0.10 else 'NOT met'}"

    def row(name: str, latencies: list[float]) -> str:
        return f"| {name} | {p(latencies, 0.5):.2f} ms | {p(latencies, 0.99):.2f} ms | {len(latencies)} |"

    seconds = turns * args.seconds
    per_task_ms = (cpu[agent] - cpu[idle]) / (args.allocs * seconds) * 1000
    body = f"""
Two agents side by side, each running {args.allocs} allocations of one sleeping raw_exec task, with the
default `[telemetry] collection_interval` of 1 s: one asked once for its metrics, so sampling every task
each second; nobody asks the other, which samples nothing (the baseline). Alloc status: one client
reading `GET /v1/allocations/{{id}}` back to back, from each agent in turn, {turns} turns of
{args.seconds / 2:g} s each. Load average (1, 5, 15 min) before: {load_before}; after: {load()}.

| agent, phase | alloc status p50 | p99 | requests |
|---|---:|---:|---:|
{row("not sampling (baseline)", baseline)}
{row("sampling every 1 s", sampling)}
{row("sampling, a watcher reading every allocation's stats each second", watched)}
{row("sampling, a Prometheus scrape each second", scraped)}

- Agent CPU over the same {seconds:g} s: {cpu[agent]:.2f} s sampling, {cpu[idle]:.2f} s not:
  **{per_task_ms:.3f} ms per sampled task per second**, {per_task_ms * args.allocs / 10:.1f} % of a core.
- The measurement alone (`process_stats` of a task's cgroup, {measured} tasks, in this process): \
{alone * 1e6:.0f} µs per task.
- Agent memory: {memory[agent] / 2**20:.1f} MiB sampling, {memory[idle] / 2**20:.1f} MiB not, \
{(memory[agent] - memory[idle]) / args.allocs / 1024:.1f} KiB per task.
- Alloc status p99 rise from the sampling, against the baseline (target at most +10 %): {rise(sampling)}.
  With other clients of the same agent besides (requests it serves, not sampling): \
{rise(watched)} with the watcher's {args.allocs} requests a second,
  {rise(scraped)} with a scrape a second.
"""
    print(body)
    if not args.no_record:
        write_section("Stats sampling", "python bench/stats.py", body)


if __name__ == "__main__":
    main()
