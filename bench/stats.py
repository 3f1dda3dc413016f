"""What sampling running tasks' resource usage costs the agent.

    python bench/stats.py [--allocs 100] [--seconds 10] [--no-record]

An agent on a temporary data dir runs a job of ALLOCS sleeping raw_exec
tasks (one per allocation). Sampling is done two ways, once a second (as
Nomad's 1 s ``collection_interval``): a watcher asking ``GET
/v1/allocations/{id}/stats`` of every allocation, as ALLOCS ``alloc status
-stats`` watchers would (one round first primes every task's sample, not
measured); or one Prometheus scrape, ``GET /v1/metrics?format=prometheus``,
which reads every task's usage in one request. For SECONDS each:

(a) CPU: the agent's CPU time (utime + stime, ``/proc/<pid>/stat``) with
    nobody asking anything (the baseline), then while sampling: the
    difference per sampled task per second;
(b) latency: one client reading ``GET /v1/allocations/{id}`` (alloc status)
    back to back, without sampling (the baseline), then while sampling:
    p50 and p99 (target: sampling raises the p99 by at most 10 %);
(c) memory: the agent's RSS before any sampling and after, per task (the
    samples kept);
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--allocs", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    load_before = load()
    with tempfile.TemporaryDirectory(prefix="herder-bench-stats-") as tmp:
        agent = AgentProcess(Path(tmp)).start()
        try:
            ids = [a["id"] for a in agent.submit(sleepers(args.allocs, name="bench-stats"))["allocations"]]
            for alloc_id in ids:
                agent.wait_task(alloc_id, "t", timeout=120)
            rss_before = rss(agent.proc.pid)
            idle_cpu, _, _ = phase(agent, ids, args.seconds, sample=None, read_status=False)
            with httpx.Client(base_url=agent.url, timeout=30.0) as http:
                sample_all(http, ids)  # primes: a first ask takes two samples
            # Sampling right after: a sample older than MAX_SAMPLE_AGE would be primed again.
            busy_cpu, _, sampled = phase(agent, ids, args.seconds, sample=sample_all, read_status=False)
            rss_after = rss(agent.proc.pid)
            _, busy_latencies, _ = phase(agent, ids, args.seconds, sample=sample_all, read_status=True)
            scrape_cpu, _, scraped = phase(agent, ids, args.seconds, sample=scrape, read_status=False)
            _, scrape_latencies, _ = phase(agent, ids, args.seconds, sample=scrape, read_status=True)
            _, idle_latencies, _ = phase(agent, ids, args.seconds, sample=None, read_status=True)
            alone, measured = measurement_alone(Path(tmp))
        finally:
            agent.shutdown()

    def rise(latencies: list[float]) -> str:
        change = p(latencies, 0.99) / p(idle_latencies, 0.99) - 1
        return f"{change:+.0%}: {'met' if change <= 0.10 else 'NOT met'}"

    def per_task_ms(cpu: float, tasks: int) -> float:
        return (cpu - idle_cpu) / tasks * 1000 if tasks else float("nan")

    def row(name: str, cpu: str, latencies: list[float]) -> str:
        return f"| {name} | {cpu} | {p(latencies, 0.5):.2f} ms | {p(latencies, 0.99):.2f} ms | {len(latencies)} |"

    body = f"""
An agent running {args.allocs} allocations of one sleeping raw_exec task each; {args.seconds:g} s per phase.
Sampling once a second, either every allocation's `GET /v1/allocations/{{id}}/stats` (after one priming
round; {sampled} task samples in its CPU phase), or one `GET /v1/metrics?format=prometheus` scrape
({scraped} task samples in its CPU phase). Alloc status: one client reading `GET /v1/allocations/{{id}}`
back to back. Load average (1, 5, 15 min) before: {load_before}; after: {load()}.

| phase | agent CPU | alloc status p50 | p99 | requests |
|---|---:|---:|---:|---:|
{row("no sampling (baseline)", f"{idle_cpu:.2f} s", idle_latencies)}
{row(f"{args.allocs} stats requests a second", f"{busy_cpu:.2f} s", busy_latencies)}
{row("one scrape a second", f"{scrape_cpu:.2f} s", scrape_latencies)}

- Agent CPU per sampled task per second, beyond the baseline: **{per_task_ms(busy_cpu, sampled):.2f} ms**
  through the stats route (an HTTP request per allocation), **{per_task_ms(scrape_cpu, scraped):.2f} ms**
  through one scrape.
- The measurement alone (`process_stats` of a task's cgroup, {measured} tasks, in this process): \
{alone * 1e6:.0f} µs per task; the rest is the HTTP requests' and the rendering's.
- Agent memory: {rss_before / 2**20:.1f} MiB before sampling, {rss_after / 2**20:.1f} MiB after, \
{(rss_after - rss_before) / args.allocs / 1024:.1f} KiB per task (the last sample kept per task).
- Alloc status p99 rise (target at most +10 %): {rise(busy_latencies)} with the stats requests,
  {rise(scrape_latencies)} with the scrape.
"""
    print(body)
    if not args.no_record:
        write_section("Stats sampling", "python bench/stats.py", body)


if __name__ == "__main__":
    main()
