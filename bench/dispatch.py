"""Dispatching a parameterized job through the agent's API: time per dispatch, memory per finished child.

    python bench/dispatch.py [--children 100] [--no-record]

An agent on a temporary data dir registers a parameterized batch job of one
raw_exec task (``true``) with a 1 KiB payload written to ``local/``. One
client dispatches it CHILDREN times, back to back, through ``POST
/v1/jobs/{name}/dispatch`` (each answer comes once the child is placed and
recorded; its task starts after); then the run waits until every child is
complete. Reported: the latency of a dispatch (p50, p99, mean), the
dispatches per second, the time until the last child completed, and the
agent's RSS before and after (one child dispatched and finished first, so
that imports and caches are warm), per finished child: the memory the
agent keeps for each finished child until garbage collection (none runs here).

The result replaces the "Dispatch" section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import base64
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from jobs import load, rss  # noqa: E402
from results import write_section  # noqa: E402

from tests.support.agent import AgentProcess  # noqa: E402
from tests.support.waiting import wait_for  # noqa: E402

JOB = """
job "convert" {
  type = "batch"
  parameterized {
    meta_required = ["input"]
  }
  task "t" {
    driver = "raw_exec"
    config {
      command = "true"
    }
    dispatch_payload {
      file = "in/options.json"
    }
  }
}
"""

PAYLOAD = base64.b64encode(b"x" * 1024).decode()


def dispatch(http: httpx.Client, index: int) -> str:
    response = http.post("/v1/jobs/convert/dispatch", json={"meta": {"input": f"file-{index}"}, "payload": PAYLOAD})
    response.raise_for_status()
    return str(response.json()["name"])


def all_complete(http: httpx.Client, children: set[str]) -> bool:
    jobs = {job["name"]: job["status"] for job in http.get("/v1/jobs").json()["jobs"]}
    failed = [name for name in children if jobs.get(name) == "failed"]
    if failed:
        raise RuntimeError(f"children failed: {failed[:3]}")
    return all(jobs.get(name) == "complete" for name in children)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--children", type=int, default=100)
    parser.add_argument("--no-record", action="store_true", help="Print the result; leave RESULTS.md alone.")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="herder-bench-dispatch-") as tmp:
        agent = AgentProcess(Path(tmp)).start()
        try:
            assert agent.proc is not None
            agent.submit(JOB)
            with agent.http() as http:
                warm = {dispatch(http, -1)}
                wait_for(lambda: all_complete(http, warm), 120, "the warm-up child complete")
                before = rss(agent.proc.pid)
                load_before = load()
                latencies: list[float] = []
                children: set[str] = set()
                started = time.perf_counter()
                for index in range(args.children):
                    began = time.perf_counter()
                    children.add(dispatch(http, index))
                    latencies.append(time.perf_counter() - began)
                dispatched = time.perf_counter() - started
                wait_for(lambda: all_complete(http, children), 600, "every child complete", interval=0.2)
                finished = time.perf_counter() - started
                after = rss(agent.proc.pid)
                load_after = load()
        finally:
            agent.shutdown()

    ms = sorted(value * 1e3 for value in latencies)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    per_child = (after - before) / args.children
    body = f"""
An agent with a parameterized batch job of one raw_exec task (`true`), its 1 KiB payload written to
`local/in/options.json`. One client dispatches it {args.children} times back to back through
`POST /v1/jobs/convert/dispatch` (each answer once the child is placed and recorded), then waits for
every child to complete. Load average before: {load_before}; after: {load_after}.

| dispatches | p50 | p99 | mean | dispatches/s | last child complete after |
|---:|---:|---:|---:|---:|---:|
| {args.children} | {statistics.median(ms):.1f} ms | {p99:.1f} ms | {statistics.fmean(ms):.1f} ms | \
{args.children / dispatched:.1f} | {finished:.1f} s |

| agent RSS | before (1 child done) | after {args.children} finished children | per finished child |
|---|---:|---:|---:|
| | {before / 2**20:.1f} MiB | {after / 2**20:.1f} MiB | {per_child / 1024:.1f} KiB |

No garbage collection runs during the measurement: the last column is what each finished child
costs the agent until it is collected.
"""
    print(body)
    if not args.no_record:
        write_section("Dispatch", f"python bench/dispatch.py --children {args.children}", body)


if __name__ == "__main__":
    main()
