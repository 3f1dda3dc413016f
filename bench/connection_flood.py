"""The agent's answers to a fresh client while another process holds thousands of half-open connections.

    python bench/connection_flood.py [--connections 3000] [--requests 300] [--nofile 1024] [--no-record]

An agent with NOFILE descriptors (soft and hard: systemd's default soft limit, so that the flood is
beyond what the agent may hold) answers REQUESTS ``GET /v1/health``, each on a fresh connection,
first idle, then while another process holds CONNECTIONS connections that send nothing (opening
a new one whenever the agent closes one of them). p50, p99 and the worst of each side (target:
p99 under flood at most 100 ms).

The result replaces the "Connection flood" section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
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
from results import write_section  # noqa: E402

from tests.support.agent import AgentProcess  # noqa: E402

TOKEN = "bench-flood-token"

FLOODER = """
import os, selectors, socket, sys, threading
port, count, reopen = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "reopen"
chosen = selectors.DefaultSelector()
reopened = 0

def open_one():
    chosen.register(socket.create_connection(("127.0.0.1", port), timeout=5), selectors.EVENT_READ)

def stop():
    sys.stdin.read()
    print("reopened", reopened, flush=True)
    os._exit(0)

for _ in range(count):
    open_one()
threading.Thread(target=stop, daemon=True).start()
print("ready", flush=True)
while True:
    for key, _ in chosen.select():
        chosen.unregister(key.fileobj)
        key.fileobj.close()
        if reopen:
            open_one()
            reopened += 1
"""
"""The other process: opens COUNT connections and holds them, opening one more for each the agent
closes if told to ``reopen``, until its stdin closes."""


def flooder(port: int, count: int, mode: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", FLOODER, str(port), str(count), mode], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def latencies(agent: AgentProcess, requests: int) -> tuple[list[float], int]:
    """Milliseconds of each ``GET /v1/health`` on a connection of its own, and how many failed."""
    taken, failed = [], 0
    with httpx.Client(base_url=agent.url, headers=agent.headers, timeout=10.0,
                      limits=httpx.Limits(max_keepalive_connections=0)) as http:
        for _ in range(requests):
            started = time.perf_counter()
            try:
                http.get("/v1/health").raise_for_status()
            except httpx.HTTPError:
                failed += 1
                continue
            taken.append((time.perf_counter() - started) * 1000)
    return taken, failed


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--connections", type=int, default=3000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--nofile", type=int, default=1024)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="herder-bench-flood-") as tmp:
        agent = AgentProcess(Path(tmp), token=TOKEN, nofile=args.nofile).start()
        try:
            latencies(agent, 20)  # warm up
            idle = latencies(agent, args.requests)
            flooded = {}
            for mode in ("hold", "reopen"):
                flood = flooder(agent.port, args.connections, mode)
                try:
                    flooded[mode] = latencies(agent, args.requests)
                finally:
                    out, _ = flood.communicate("", timeout=60)
            reopened = int(out.split()[-1])
            limit = next(line for line in agent.log.read_text().splitlines() if "at most" in line)
            dropped = [line.partition('msg="')[2].rstrip('"') for line in agent.log.read_text().splitlines()
                       if "dropped" in line]
        finally:
            agent.shutdown()

    def row(name: str, measured: tuple[list[float], int]) -> str:
        values, failed = measured
        return (f"| {name} | {statistics.median(values):.2f} ms | {p99(values):.2f} ms | {max(values):.2f} ms "
                f"| {failed} |")

    cap = limit.partition("at most ")[2].partition(" ")[0]
    body = f"""
An agent with {args.nofile} descriptors (soft and hard; it keeps at most {cap} connections), a token, no
job. {args.requests} `GET /v1/health` from this process, each on a connection of its own (httpx, no
keep-alive): idle; while another process holds {args.connections:,} connections that send nothing;
and while it holds them and opens a new one each time the agent closes one ({reopened:,} opened
again during that run).

| `GET /v1/health`, fresh connection | p50 | p99 | worst | failed |
|---|---:|---:|---:|---:|
{row("idle (baseline)", idle)}
{row(f"{args.connections:,} half-open connections opened and held", flooded["hold"])}
{row(f"{args.connections:,} half-open connections, reopened as dropped", flooded["reopen"])}

p99 with the connections held: {p99(flooded["hold"][0]):.1f} ms (target ≤ 100 ms: \
{"met" if p99(flooded["hold"][0]) <= 100 else "NOT met"}); reopened: {p99(flooded["reopen"][0]):.1f} ms.

The agent's log during the run: {"; ".join(dropped) or "nothing dropped"}.
"""
    print(body)
    if not args.no_record:
        write_section("Connection flood", f"python bench/connection_flood.py --connections {args.connections} "
                      f"--requests {args.requests} --nofile {args.nofile}", body)


if __name__ == "__main__":
    main()
