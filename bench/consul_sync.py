"""Consul sync: 500 services (50 allocations x 10) through herder's sync loop against a bare py-consul loop.

    python bench/consul_sync.py [--allocs 50] [--per-alloc 10] [--rounds 3]

Needs ``consul`` on PATH: a dev agent is started on free loopback ports for
the run and stopped after it.

herder's side: the services plugin's path without tasks. Each allocation's
services (one TTL check each, as a script check is registered) go into the
desired set of a :class:`herder.services.ServiceSync` over the Consul backend,
and one ``sync_once`` reconciles; the time covers both. The baseline makes the
same registrations with py-consul directly, one ``agent.service.register``
per service, in one loop. Best of ROUNDS each, alternating; the agent is
emptied between rounds, outside the timing.

Then the cost of an idle sync (nothing changed) is counted in HTTP requests,
at 10 services and at ALLOCS x PER_ALLOC: it must be the same. The result
replaces the "Consul sync" section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import consul  # type: ignore[import-untyped]

from herder.services import CheckRegistration, Owner, ServiceRegistration, ServiceSync
from herder.services.consul import ConsulBackend

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from results import write_section  # noqa: E402

from tests.support.consul import ConsulAgent  # noqa: E402

TTL = 40.0


def registrations(allocs: int, per_alloc: int) -> dict[str, list[ServiceRegistration]]:
    """Each allocation's services, keyed by owner as the services plugin keys them."""
    return {
        f"alloc{a}/server": [
            ServiceRegistration(
                id=f"_herder-task-alloc{a:04d}-server-svc{s}-http", name=f"svc{s}", address="127.0.0.1",
                port=2000 + a * per_alloc + s, tags=("bench",), meta={"alloc": str(a)},
                checks=(CheckRegistration(id=f"_herder-check-{a:04d}-{s}", name="script", kind="ttl", ttl=TTL),))
            for s in range(per_alloc)]
        for a in range(allocs)}


def empty(agent: ConsulAgent) -> None:
    client = consul.Consul(host="127.0.0.1", port=agent.ports["http"])
    for service_id in client.agent.services():
        client.agent.service.deregister(service_id)


def herder_round(agent: ConsulAgent, wanted: dict[str, list[ServiceRegistration]]) -> float:
    sync = ServiceSync(ConsulBackend({"address": agent.address}, Owner("bench", "s")))
    started = time.perf_counter()
    for owner, services in wanted.items():
        sync.set(owner, services)
    sync.sync_once()
    return time.perf_counter() - started


def bare_round(agent: ConsulAgent, wanted: dict[str, list[ServiceRegistration]]) -> float:
    client = consul.Consul(host="127.0.0.1", port=agent.ports["http"])
    started = time.perf_counter()
    for services in wanted.values():
        for service in services:
            client.agent.service.register(
                service.name, service_id=service.id, address=service.address, port=service.port,
                tags=list(service.tags), meta=dict(service.meta),
                check={"CheckID": service.checks[0].id, "Name": "script", "TTL": f"{int(TTL)}s"})
    return time.perf_counter() - started


def idle_requests(agent: ConsulAgent, wanted: dict[str, list[ServiceRegistration]]) -> int:
    """HTTP requests of one sync after the registry already matches ``wanted``."""
    backend = ConsulBackend({"address": agent.address}, Owner("bench", "s"))
    sync = ServiceSync(backend)
    for owner, services in wanted.items():
        sync.set(owner, services)
    sync.sync_once()
    sent: list[str] = []
    backend._client.http.session.hooks["response"].append(lambda response, *a, **k: sent.append(response.url))
    sync.sync_once()
    return len(sent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--allocs", type=int, default=50)
    parser.add_argument("--per-alloc", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    total = args.allocs * args.per_alloc
    with tempfile.TemporaryDirectory(prefix="herder-bench-consul-") as workdir:
        agent = ConsulAgent(Path(workdir)).start()
        try:
            wanted = registrations(args.allocs, args.per_alloc)
            herder_times, bare_times = [], []
            for _ in range(args.rounds):
                empty(agent)
                bare_times.append(bare_round(agent, wanted))
                empty(agent)
                herder_times.append(herder_round(agent, wanted))
            empty(agent)
            idle_small = idle_requests(agent, registrations(1, 10))
            empty(agent)
            idle_large = idle_requests(agent, wanted)
            empty(agent)
        finally:
            agent.stop()
    herder_best, bare_best = min(herder_times), min(bare_times)
    ratio = herder_best / bare_best
    body = f"""
Registering {total} services ({args.allocs} allocations x {args.per_alloc}, one TTL check each) in a
Consul dev agent; best of {args.rounds}:

| | seconds | per service | ratio |
|---|---:|---:|---:|
| bare py-consul loop (baseline) | {bare_best:.3f} | {bare_best / total * 1000:.2f} ms | 1.00 |
| herder's sync loop | {herder_best:.3f} | {herder_best / total * 1000:.2f} ms | {ratio:.2f} |

Target: at most 1.2x the baseline: {"met" if ratio <= 1.2 else "NOT met"}.

An idle sync (nothing changed) costs {idle_small} HTTP requests at 10 services and {idle_large} at {total}
(target: equal): {"met" if idle_small == idle_large else "NOT met"}.
"""
    print(body)
    write_section("Consul sync", "python bench/consul_sync.py", body)


if __name__ == "__main__":
    main()
