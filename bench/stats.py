"""What sampling running tasks' resource usage costs the agent.

    python bench/stats.py [--allocs 100] [--seconds 10] [--no-record]

An agent on a temporary data dir runs a job of ALLOCS sleeping raw_exec
tasks (one per allocation), twice: with ``[telemetry] collection_interval``
at 1 s (the default, Nomad's), and at 1 h, which samples nothing in the
time measured (the baseline). For each, for SECONDS at a time:

(a) CPU: the agent's CPU time (utime + stime, ``/proc/<pid>/stat``) with
    nobody asking anything: the difference is the collection's, per sampled
    task per second;
(b) latency: one client reading ``GET /v1/allocations/{id}`` (alloc status)
    back to back: p50 and p99 (target: sampling raises the p99 by at most
    10 %); and the same while a watcher reads every allocation's ``GET
    /v1/allocations/{id}/stats`` once a second, as ALLOCS ``alloc status
    -stats`` watchers would, and while Prometheus scrapes once a second;
(c) memory: the agent's RSS once every task has been sampled, against the
    baseline's, per task (the samples kept);
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
from dataclasses import dataclass, field
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

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of ``pid`` so far."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def alloc_status_latencies(agent: AgentProcess, ids: list[str], stop: threading.Event, out: list[float]) -> None:
    """``GET /v1/allocations/{id}`` round-robin, back to back, until ``stop``; each latency into ``out``."""
    with httpx.Client(base_url=agent.url, timeout=30.0) as http:
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
    with httpx.Client(base_url=agent.url, timeout=30.0) as http:
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


def scrape(http: httpx.Client, ids: list[str]) -> int:
    """One Prometheus scrape; how many tasks' usage it showed."""
    text = http.get("/v1/metrics", params={"format": "prometheus"}).raise_for_status().text
    shown = sum(1 for line in text.splitlines() if line.startswith("herder_task_cpu_seconds_total{"))
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


@dataclass
class Run:
    """What one agent measured: its CPU, its RSS, the alloc status latencies while idle, while watched, scraped."""

    cpu: float = 0.0
    rss: int = 0
    idle: list[float] = field(default_factory=list)
    watched: list[float] = field(default_factory=list)
    scraped: list[float] = field(default_factory=list)
    per_task: float = 0.0
    """The measurement alone, seconds per task."""


def run(allocs: int, seconds: float, interval: str, *, watched: bool) -> Run:
    """An agent sampling every ``interval``, running ``allocs`` sleeping tasks: what it costs (``watched``:
    and its alloc status latencies with a watcher, then a scraper)."""
    result = Run()
    with tempfile.TemporaryDirectory(prefix="herder-bench-stats-") as tmp:
        agent = AgentProcess(Path(tmp), extra=f'[telemetry]\ncollection_interval = "{interval}"\n').start()
        try:
            ids = [a["id"] for a in agent.submit(sleepers(allocs, name="bench-stats"))["allocations"]]
            for alloc_id in ids:
                agent.wait_task(alloc_id, "t", timeout=120)
            time.sleep(3)  # a few passes of the collector: every task has its sample (and its percent)
            result.cpu, _, _ = phase(agent, ids, seconds, sample=None, read_status=False)
            result.rss = rss(agent.proc.pid)
            _, result.idle, _ = phase(agent, ids, seconds, sample=None, read_status=True)
            if watched:
                _, result.watched, _ = phase(agent, ids, seconds, sample=sample_all, read_status=True)
                _, result.scraped, _ = phase(agent, ids, seconds, sample=scrape, read_status=True)
            result.per_task, _ = measurement_alone(Path(tmp))
        finally:
            agent.shutdown()
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--allocs", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    load_before = load()
    baseline = run(args.allocs, args.seconds, "1h", watched=False)
    sampling = run(args.allocs, args.seconds, "1s", watched=True)
    baseline_p99 = p(baseline.idle, 0.99)

    def rise(latencies: list[float]) -> str:
        change = p(latencies, 0.99) / baseline_p99 - 1
        return f"{change:+.0%}: {'met' if change <= 0.10 else 'NOT met'}"

    def row(name: str, latencies: list[float]) -> str:
        return f"| {name} | {p(latencies, 0.5):.2f} ms | {p(latencies, 0.99):.2f} ms | {len(latencies)} |"

    per_task_ms = (sampling.cpu - baseline.cpu) / (args.allocs * args.seconds) * 1000
    body = f"""
Two agents, one after the other, each running {args.allocs} allocations of one sleeping raw_exec task:
one with `[telemetry] collection_interval = "1s"` (the default: every task sampled each second), the
baseline with `"1h"` (no sample in the time measured). {args.seconds:g} s per phase. Alloc status: one
client reading `GET /v1/allocations/{{id}}` back to back. Load average (1, 5, 15 min) before:
{load_before}; after: {load()}.

| agent, phase | alloc status p50 | p99 | requests |
|---|---:|---:|---:|
{row("not sampling (baseline)", baseline.idle)}
{row("sampling every 1 s", sampling.idle)}
{row("sampling, a watcher reading every allocation's stats each second", sampling.watched)}
{row("sampling, a Prometheus scrape each second", sampling.scraped)}

- Agent CPU of the collection: {sampling.cpu:.2f} s against {baseline.cpu:.2f} s in {args.seconds:g} s,
  **{per_task_ms:.3f} ms per sampled task per second**, {per_task_ms * args.allocs / 10:.1f} % of a core.
- The measurement alone (`process_stats` of a task's cgroup, in this process): \
{sampling.per_task * 1e6:.0f} µs per task.
- Agent memory: {sampling.rss / 2**20:.1f} MiB sampling, {baseline.rss / 2**20:.1f} MiB not, \
{(sampling.rss - baseline.rss) / args.allocs / 1024:.1f} KiB per task.
- Alloc status p99 rise against the baseline (target at most +10 %): {rise(sampling.idle)} sampling,
  {rise(sampling.watched)} with the watcher, {rise(sampling.scraped)} with the scrape.
"""
    print(body)
    if not args.no_record:
        write_section("Stats sampling", "python bench/stats.py", body)


if __name__ == "__main__":
    main()
