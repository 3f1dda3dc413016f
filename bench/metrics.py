"""What a scrape of the agent's metrics costs, with 100 allocations.

    python bench/metrics.py [--allocs 100] [--rounds 300] [--no-record]

An agent on a temporary data dir runs a job of ALLOCS sleeping raw_exec
tasks (one per allocation). One client then asks, ROUNDS times and taking
turns: ``GET /v1/metrics?format=prometheus``, ``GET /v1/metrics`` (JSON),
and as baselines from the same agent at the same moments ``GET
/v1/allocations`` (the list of the same allocations) and ``GET /v1/health``;
each request's time from sending it to the end of the answer, on loopback.
The rounds start once the first scrape, which starts the sampling, is
followed by one showing every task's usage; a few rounds first are not
measured. Target: the Prometheus scrape's p99 under 50 ms. Then, as
``bench/stats.py`` does, what reading the tasks' processes alone costs, and
what writing the scrape's samples in the text format alone costs.

The result replaces the "Metrics" section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from jobs import load, sleepers  # noqa: E402
from results import write_section  # noqa: E402
from stats import measurement_alone, usage_shown  # noqa: E402

from tests.support.agent import AgentProcess  # noqa: E402
from tests.support.waiting import wait_for  # noqa: E402

CASES = {
    "`GET /v1/metrics?format=prometheus`": ("/v1/metrics", {"format": "prometheus"}),
    "`GET /v1/metrics` (JSON)": ("/v1/metrics", {}),
    "`GET /v1/allocations` (baseline)": ("/v1/allocations", {}),
    "`GET /v1/health` (baseline)": ("/v1/health", {}),
}
WARM_UP = 5


def ms(latencies: list[float], q: float) -> float:
    return sorted(latencies)[min(len(latencies) - 1, int(len(latencies) * q))] * 1000


class Replay(Collector):
    """The families of a scrape, collected again."""

    def __init__(self, text: str) -> None:
        self.families = list(text_string_to_metric_families(text))

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def rendering(text: str, rounds: int = 50) -> float:
    """Median seconds prometheus-client takes to write the families of ``text`` in the text format."""
    registry = CollectorRegistry()
    registry.register(Replay(text))
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        generate_latest(registry)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def server_means(document: dict[str, Any]) -> dict[str, float]:
    """The agent's own mean time to answer each GET route so far (its request histogram), in ms."""
    totals: dict[tuple[str, str], float] = {}
    for family in document["families"]:
        if family["name"] == "herder_api_request_duration_seconds":
            for sample in family["samples"]:
                if sample["labels"]["method"] == "GET" and sample["name"].endswith(("_sum", "_count")):
                    totals[sample["labels"]["route"], sample["name"].rsplit("_", 1)[1]] = sample["value"]
    return {route: totals[route, "sum"] / totals[route, "count"] * 1000 for route, kind in totals if kind == "sum"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--allocs", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    load_before = load()
    latencies: dict[str, list[float]] = {case: [] for case in CASES}
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="herder-bench-metrics-") as tmp:
        agent = AgentProcess(Path(tmp)).start()
        try:
            ids = [a["id"] for a in agent.submit(sleepers(args.allocs, name="bench-metrics"))["allocations"]]
            for alloc_id in ids:
                agent.wait_task(alloc_id, "t", timeout=120)
            with httpx.Client(base_url=agent.url, headers=agent.headers, timeout=30.0) as http:
                # The first scrape starts the sampling: measured once every task has its sample.
                wait_for(lambda: usage_shown(http) == args.allocs, what="every task's usage in the metrics")
                for round_ in range(WARM_UP + args.rounds):
                    for case, (path, params) in CASES.items():
                        started = time.perf_counter()
                        response = http.get(path, params=params).raise_for_status()
                        if round_ >= WARM_UP:
                            latencies[case].append(time.perf_counter() - started)
                        sizes[case] = len(response.content)
                text = http.get("/v1/metrics", params={"format": "prometheus"}).text
                served = server_means(http.get("/v1/metrics").json())
            alone, measured = measurement_alone(Path(tmp))
            rendered = rendering(text)
        finally:
            agent.shutdown()
    series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    tasks = sum(1 for line in text.splitlines() if line.startswith("herder_task_memory_rss_bytes{"))
    rows = "\n".join(f"| {case} | {ms(values, 0.5):.2f} ms | {ms(values, 0.99):.2f} ms | {ms(values, 1):.2f} ms | "
                     f"{sizes[case] / 1024:.1f} KiB |" for case, values in latencies.items())
    scrape, _, listing, _ = latencies.values()
    scrape_p99 = ms(scrape, 0.99)
    body = f"""
An agent running {args.allocs} allocations of one sleeping raw_exec task each; one client asking the four
routes in turn, {args.rounds} rounds after {WARM_UP} unmeasured ones; each time from the request sent to the
answer read, on loopback. The scrape has {series} samples, the usage of {tasks} tasks among them (the
latest samples the agent took, every `collection_interval` of 1 s: a scrape reads no driver).
Load average (1, 5, 15 min) before: {load_before}; after: {load()}.

| request | p50 | p99 | max | answer |
|---|---:|---:|---:|---:|
{rows}

- Prometheus scrape p99 with {args.allocs} allocations: **{scrape_p99:.2f} ms** (target under 50 ms: \
{"met" if scrape_p99 < 50 else "NOT met"}); {scrape_p99 / ms(listing, 0.99):.1f} times the p99 of listing the same
  allocations (p50: {ms(scrape, 0.5) / ms(listing, 0.5):.1f} times).
- The agent's own mean time to answer (its `herder_api_request_duration_seconds`, from the routing to the
  answer's end, without the client's side): `/v1/metrics` (both formats) {served["/v1/metrics"]:.2f} ms,
  `/v1/allocations` {served["/v1/allocations"]:.2f} ms, `/v1/health` {served["/v1/health"]:.2f} ms.
- Reading a task's processes from `/proc` as raw_exec does (`process_stats`, {measured} tasks, in this process,
  at the same load): {alone * 1e6:.0f} µs per task, {alone * measured * 1000:.1f} ms for them all: what the
  collection reads every second, and a scrape no longer does.
- Writing the scrape's {series} samples in the text format alone (`prometheus_client.generate_latest`, in this
  process, median): {rendered * 1000:.1f} ms.
"""
    print(body)
    if not args.no_record:
        write_section("Metrics", "python bench/metrics.py", body)


if __name__ == "__main__":
    main()
