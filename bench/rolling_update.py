"""A rolling update of 10 allocations under load, on herder and on a Nomad dev agent.

    python bench/rolling_update.py [--rounds 3] [--shutdown-delay 250] [--no-record]

One service job file, submitted the same way to both: ``count = 10``, ``update { max_parallel = 2,
min_healthy_time = "1s", health_check = "task_states" }``, a raw_exec task that is a tiny Python
HTTP server answering its version, with ``shutdown_delay`` (milliseconds, 250 by default: 5 times the
interval at which the proxy below looks for stops; with 100, 2 of 78,000 requests over 11 updates on
herder failed on a loaded machine). Version 1 is submitted and deployed; then version 2 (its ``env``
changed: a destructive update, every allocation replaced) is submitted and timed until its deployment
is successful. Target: at most
1.3 times the ideal, 5 waves of (start + 1 s), where start is how long a task of the update took from
its placement to running; and herder no slower than Nomad.

Meanwhile a load generator sends requests without a pause, through a tiny asyncio proxy, to the
job's allocations that are healthy and not being stopped, as the agent's API lists them (polled
every 50 ms); each request is forwarded once, never retried: target, 0 failed requests.

The same job file, as Nomad parses it (``/v1/jobs/parse`` of the dev agent), goes to herder's
Nomad-compatible API and to ``nomad agent -dev`` with its own raw_exec (its own temp data dir),
the two taking turns ROUNDS times after a warm-up round each. Nomad 1.1 has no setting for its
dynamic port range (20000-32000), so the job asks for no port: each server binds a free one in
2000-12000 itself and writes it to ``alloc/port``, which the proxy reads through the agent's
``/v1/client/fs/cat``.

The result replaces the "Rolling update" section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from jobs import load  # noqa: E402
from results import write_section  # noqa: E402

from tests.core.nomad_api.conftest import NomadAgent  # noqa: E402
from tests.nomad.helpers import NomadCluster  # noqa: E402
from tests.support.consul import free_ports  # noqa: E402
from tests.support.waiting import wait_for  # noqa: E402

COUNT = 10
MAX_PARALLEL = 2
MIN_HEALTHY = 1.0
WAVES = -(-COUNT // MAX_PARALLEL)

SERVER = """
import http.server, os, random

class Version(http.server.BaseHTTPRequestHandler):
    body = os.environ["VERSION"].encode()

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass

while True:  # a free port in 2000-12000
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", random.randint(2000, 12000)), Version)
        break
    except OSError:
        pass
port = os.path.join(os.environ["NOMAD_ALLOC_DIR"], "port")
with open(port + ".new", "w") as file:
    file.write(str(server.server_address[1]))
os.rename(port + ".new", port)
server.serve_forever()
"""

JOB = """
job "{name}" {{
  datacenters = ["dc1"]
  group "web" {{
    count = {count}
    update {{
      max_parallel     = {max_parallel}
      min_healthy_time = "{min_healthy}s"
      health_check     = "task_states"
    }}
    task "server" {{
      driver         = "raw_exec"
      shutdown_delay = "{shutdown_delay}ms"
      config {{
        command = "/usr/bin/python3"
        args    = ["-I", "{server}"]
      }}
      env {{
        VERSION = "{version}"
      }}
      resources {{
        cpu    = 20
        memory = 32
      }}
    }}
  }}
}}
"""


class Side:
    """One agent's Nomad API: submitting, the latest deployment, the allocations."""

    def __init__(self, name: str, address: str, token: str = "") -> None:
        self.name, self.address = name, address
        self.headers = {"X-Nomad-Token": token} if token else {}
        self.http = httpx.Client(base_url=address, headers=self.headers, timeout=60)

    def get(self, path: str) -> Any:
        response = self.http.get(path)
        response.raise_for_status()
        return response.json()

    def submit(self, job: dict[str, Any]) -> None:
        response = self.http.post("/v1/jobs", json={"Job": job})
        if response.status_code != 200:
            raise SystemExit(f"{self.name}: the job was refused: {response.text}")

    def deployed(self, job: str, version: int) -> dict[str, Any] | None:
        """The deployment of ``version`` of ``job`` once successful (a failed one ends the benchmark)."""
        deployment = self.get(f"/v1/job/{job}/deployment")
        if not deployment or deployment["JobVersion"] != version:
            return None
        if deployment["Status"] in ("failed", "cancelled"):
            raise SystemExit(f"{self.name}: deployment of version {version} {deployment['Status']}: "
                             f"{deployment['StatusDescription']}")
        return deployment if deployment["Status"] == "successful" else None

    def stop(self, job: str) -> None:
        """Stop ``job``, wait for its tasks to be dead, then purge it."""
        self.http.delete(f"/v1/job/{job}")
        wait_for(lambda: all(a["ClientStatus"] != "running" for a in self.get(f"/v1/job/{job}/allocations")),
                 timeout=120, what=f"{job} stopped on {self.name}")
        self.http.delete(f"/v1/job/{job}", params={"purge": "true"})


@dataclass
class Traffic:
    """What the load generator saw."""

    ok: int = 0
    failed: int = 0
    versions: set[str] = field(default_factory=set)
    instances_min: int = COUNT
    refresh_max: float = 0.0
    """The longest time (seconds) between two refreshes of the proxy's instances: how stale they got."""


async def proxy_and_load(side: Side, job: str, done: asyncio.Event, traffic: Traffic) -> None:
    """Requests through a proxy to the job's serving allocations, without a pause, until ``done``."""
    instances: list[tuple[str, int]] = []
    ports: dict[str, int] = {}
    turn = itertools.count()

    async def refresh(api: httpx.AsyncClient) -> None:
        refreshed = time.perf_counter()
        while not done.is_set():
            allocs = (await api.get(f"/v1/job/{job}/allocations")).json()
            running = [a for a in allocs if a["DesiredStatus"] == "run" and a["ClientStatus"] == "running"]
            serving = [a["ID"] for a in running if (a.get("DeploymentStatus") or {}).get("Healthy")]
            instances[:] = [(alloc, ports[alloc]) for alloc in serving if alloc in ports]  # the stopped ones out now
            if traffic.ok:
                traffic.instances_min = min(traffic.instances_min, len(instances))
                traffic.refresh_max = max(traffic.refresh_max, time.perf_counter() - refreshed)
            refreshed = time.perf_counter()
            for alloc in [a["ID"] for a in running if a["ID"] not in ports]:  # known before they are healthy
                response = await api.get(f"/v1/client/fs/cat/{alloc}", params={"path": "alloc/port"})
                if response.status_code == 200 and response.text.isdigit():  # Nomad: 200 and an error, no file yet
                    ports[alloc] = int(response.text)
                    if alloc in serving:
                        instances.append((alloc, ports[alloc]))
            await asyncio.sleep(0.05)

    async def forward(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            request = await client_reader.readuntil(b"\r\n\r\n")
            _, port = instances[next(turn) % len(instances)]
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request)
            await writer.drain()
            client_writer.write(await reader.read())
            writer.close()
        except (OSError, ZeroDivisionError, asyncio.IncompleteReadError):
            pass  # the client sees its connection closed without an answer: a failed request
        finally:
            client_writer.close()

    async def client(port: int) -> None:
        while not done.is_set():
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(b"GET / HTTP/1.0\r\n\r\n")
                answer = await reader.read()
                writer.close()
            except OSError:
                answer = b""
            head, _, body = answer.partition(b"\r\n\r\n")
            if head.startswith(b"HTTP/1.0 200"):
                traffic.ok += 1
                traffic.versions.add(body.decode())
            else:
                traffic.failed += 1

    (port,) = free_ports(1, low=2000, high=12000)
    server = await asyncio.start_server(forward, "127.0.0.1", port)
    async with httpx.AsyncClient(base_url=side.address, headers=side.headers, timeout=60) as api:
        refresher = asyncio.create_task(refresh(api))
        while not instances:
            await asyncio.sleep(0.01)
        await asyncio.gather(*(client(port) for _ in range(4)), refresher)
    server.close()


def nanoseconds_event(state: dict[str, Any], kind: str) -> int:
    return next(event["Time"] for event in state["Events"] if event["Type"] == kind)


def measure_update(side: Side, jobs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """Version 1 deployed (``jobs[0]``), then version 2 (``jobs[1]``) timed under load."""
    side.submit(jobs[0])
    wait_for(lambda: side.deployed(name, 0), timeout=300, what=f"{name} version 0 deployed on {side.name}")
    done, traffic = asyncio.Event(), Traffic()
    result: dict[str, Any] = {}

    def update() -> None:
        started = time.time()
        side.submit(jobs[1])
        wait_for(lambda: side.deployed(name, 1), timeout=300, interval=0.02,
                 what=f"{name} version 1 deployed on {side.name}")
        result["elapsed"] = time.time() - started

    async def both() -> None:
        load_task = asyncio.create_task(proxy_and_load(side, name, done, traffic))
        while traffic.ok < 100:  # the load runs before the update begins
            await asyncio.sleep(0.01)
        await asyncio.to_thread(update)
        await asyncio.sleep(0.5)  # and a little after it
        done.set()
        await load_task

    asyncio.run(both())
    allocs = [side.get(f"/v1/allocation/{a['ID']}") for a in side.get(f"/v1/job/{name}/allocations")
              if a["JobVersion"] == 1]
    starts = [(nanoseconds_event(a["TaskStates"]["server"], "Started") - a["CreateTime"]) / 1e9 for a in allocs]
    result.update(start=statistics.median(starts), traffic=traffic)
    side.stop(name)
    return result


def parsed(nomad: Side, name: str, version: int, server: Path, shutdown_delay: int) -> dict[str, Any]:
    """The job file of ``version`` in Nomad's JSON, as the dev agent parses it (the same for both)."""
    text = JOB.format(name=name, count=COUNT, max_parallel=MAX_PARALLEL, min_healthy=MIN_HEALTHY,
                      shutdown_delay=shutdown_delay, server=server, version=version)
    response = nomad.http.post("/v1/jobs/parse", json={"JobHCL": text})
    response.raise_for_status()
    return response.json()  # type: ignore[no-any-return]


def measure(rounds: int, shutdown_delay: int) -> str:
    load_before = load()
    results: dict[str, list[dict[str, Any]]] = {"herder": [], "nomad": []}
    with tempfile.TemporaryDirectory(prefix="herder-bench-rolling-") as tmp:
        root = Path(tmp)
        (root / "server.py").write_text(SERVER)
        cluster = NomadCluster(root / "nomad")
        herder = NomadAgent(root / "herder")
        try:
            dev_agent(cluster)
            herder.start()
            nomad_side = Side("nomad", cluster.server.address)
            sides = {"herder": Side("herder", herder.nomad_url, herder.token), "nomad": nomad_side}
            for round in range(rounds + 1):  # the first round warms up both sides
                for key, side in sides.items():
                    name = f"web-{key}-{round}"
                    jobs = [parsed(nomad_side, name, version, root / "server.py", shutdown_delay) for version in (1, 2)]
                    outcome = measure_update(side, jobs, name)
                    print(f"round {round} {key}: {outcome['elapsed']:.2f} s, start {outcome['start']:.3f} s, "
                          f"{outcome['traffic']}", file=sys.stderr)
                    if round:
                        results[key].append(outcome)
        finally:
            herder.shutdown()
            cluster.close()
    return report(results, rounds, shutdown_delay, load_before)


def dev_agent(cluster: NomadCluster) -> None:
    """``nomad agent -dev`` with Nomad's own raw_exec enabled, healthy."""
    agent = cluster.add("dev", mode="dev")
    agent.stop()
    config = agent.dir / "agent.hcl"
    config.write_text(config.read_text().replace(",raw_exec\"", "\"")
                      + '\nplugin "raw_exec" {\n  config {\n    enabled = true\n  }\n}\n')
    agent.start()
    cluster.wait_ready()
    wait_for(lambda: [n for n in cluster.try_api("/v1/nodes") or []
                      if (n.get("Drivers") or {}).get("raw_exec", {}).get("Healthy")],
             timeout=120, what="Nomad's raw_exec healthy")


def report(results: dict[str, list[dict[str, Any]]], rounds: int, shutdown_delay: int, load_before: str) -> str:
    def median(side: str, key: str) -> float:
        return statistics.median(r[key] for r in results[side])

    rows = []
    for side, label in (("nomad", "Nomad dev agent, raw_exec (baseline)"), ("herder", "herder")):
        elapsed, start = median(side, "elapsed"), median(side, "start")
        ideal = WAVES * (start + MIN_HEALTHY)
        with_stop = WAVES * (shutdown_delay / 1000 + start + MIN_HEALTHY)
        failed = sum(r["traffic"].failed for r in results[side])
        ok = sum(r["traffic"].ok for r in results[side])
        rounds_of = ", ".join(f"{r['elapsed']:.2f}" for r in results[side])
        rows.append(f"| {label} | {elapsed:.2f} s | {start * 1e3:.0f} ms | {ideal:.2f} s | {elapsed / ideal:.2f} | "
                    f"{with_stop:.2f} s | "
                    f"{rounds_of} | {failed} of {ok + failed} | "
                    f"{min(r['traffic'].instances_min for r in results[side])} | "
                    f"{max(r['traffic'].refresh_max for r in results[side]) * 1e3:.0f} ms |")
    herder, nomad = median("herder", "elapsed"), median("nomad", "elapsed")
    herder_ideal = WAVES * (median("herder", "start") + MIN_HEALTHY)
    failed = sum(r["traffic"].failed for r in results["herder"])
    version = subprocess.run(["nomad", "version"], capture_output=True, text=True).stdout.splitlines()[0]
    table = "\n".join(rows)
    return f"""
A destructive update (an `env` change) of a service job of {COUNT} raw_exec tasks, each a tiny Python HTTP
server, with `update {{ max_parallel = {MAX_PARALLEL}, min_healthy_time = "1s", health_check = "task_states" }}`
and `shutdown_delay = "{shutdown_delay}ms"`: from the submission of version 2 to its deployment
successful, version 1 deployed before. The same job (Nomad's parse of one file) on herder's Nomad-compatible API
and on `nomad agent -dev` with its own raw_exec, taking turns; medians of {rounds} rounds after a warm-up.
Load average (1, 5, 15 min) before: {load_before}; after: {load()}.

Ideal: {WAVES} waves x (start + 1 s), start = a task's time from its placement to running (its `Started` event
minus the allocation's creation), the median over the update's allocations.

| agent | update | start | ideal | / ideal | ideal + stop | rounds (s) | failed requests | fewest serving | stalest |
|---|---:|---:|---:|---:|---:|---|---:|---:|---:|
{table}

herder / ideal: **{herder / herder_ideal:.2f}** (target ≤ 1.3: {"met" if herder / herder_ideal <= 1.3 else "NOT met"});
herder / Nomad: **{herder / nomad:.2f}** (target ≤ 1: {"met" if herder <= nomad else "NOT met"});
failed requests on herder: **{failed}** (target 0: {"met" if not failed else "NOT met"}).

The load: 4 clients sending `GET /` without a pause through an asyncio proxy that forwards each request once,
never retrying it, to one of the allocations the agent's API lists as running, healthy in their deployment
and not being stopped (polled every 50 ms; "fewest serving" is the smallest such set during the update,
"stalest" the longest time between two refreshes of it, the most a stop can go unseen).
`health_check = "task_states"`: Nomad's checks need Consul; the server listens within a few tens of
milliseconds of its start, well inside `min_healthy_time`, so a healthy allocation is a serving one. The
`shutdown_delay` is what keeps the requests whole, as a user sets it beyond their load balancer's delay (here
{shutdown_delay} ms against the proxy's 50 ms polls, on a loaded machine): both agents list a stopped allocation
as stopping at once (`DesiredStatus` `stop`), deregister its services (none here), wait the delay, and only
then send the kill signal, so the proxy has stopped sending it requests by then. Both agents stop an old
allocation first and place its replacement once it is dead, so every wave also takes the stop
(`shutdown_delay` and the kill), which the ideal leaves out: "ideal + stop" is {WAVES} x (shutdown_delay +
start + 1 s).

{version}.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shutdown-delay", type=int, default=250, metavar="MS",
                        help="the task's shutdown_delay: longer than the proxy takes to see a stop (50 ms polls)")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    body = measure(args.rounds, args.shutdown_delay)
    print(body)
    if not args.no_record:
        command = f"python bench/rolling_update.py --rounds {args.rounds} --shutdown-delay {args.shutdown_delay}"
        write_section("Rolling update", command, body)


if __name__ == "__main__":
    main()
