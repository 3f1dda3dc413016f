"""Docker start: 20 busybox containers through herder against 20 started with the Docker SDK directly.

    python bench/docker_start.py [--count 20] [--rounds 3] [--image herder-test/busybox:1]

herder's side is one job with ``count = COUNT`` docker tasks running
``sleep 300``, through the in-process runner: the time runs from placement
until every task has its ``Started`` event (directories, ports, environment,
hooks, image check, create, start, log streams included). The baseline
creates and starts the same containers with the Docker SDK in COUNT parallel
threads (one shared client, as herder has): the same image and command, a
name, labels, binds of three temporary directories and the memory limit;
the time runs until every ``start`` returned. Best of ROUNDS each; every
container is stopped and removed between rounds, outside the timing. The
image must exist (``make busybox-image``). The result replaces the "Docker
start" section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker
import docker.errors

from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jobs import until_started
from results import write_section

JOB = """
job "bench-docker-{suffix}" {{
  group "g" {{
    count = {count}
    task "t" {{
      driver       = "docker"
      kill_timeout = "1s"
      config {{
        image   = "{image}"
        command = "sleep"
        args    = ["300"]
      }}
      resources {{
        memory = 64
      }}
    }}
  }}
}}
"""

LABEL = "herder.bench"


def bare_sdk(client: docker.DockerClient, image: str, count: int) -> float:
    """COUNT containers created and started with the SDK, each in its own thread."""
    run = uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory() as root:
        binds: list[dict[str, dict[str, str]]] = []
        for index in range(count):
            dirs = [Path(root, str(index), name) for name in ("alloc", "local", "secrets")]
            for path in dirs:
                path.mkdir(parents=True)
            binds.append({str(path): {"bind": f"/{path.name}", "mode": "rw"} for path in dirs})
        barrier = threading.Barrier(count + 1)

        def one(index: int) -> Any:
            barrier.wait()
            container = client.containers.create(
                image, ["sleep", "300"], name=f"bench-{run}-{index}", detach=True,
                labels={LABEL: run, "herder.alloc_id": f"bench-{run}-{index}", "herder.task": "t"},
                volumes=binds[index], mem_limit="64m", memswap_limit="64m", cpu_shares=100,
                environment={"NOMAD_ALLOC_INDEX": str(index)})
            container.start()
            return container

        with ThreadPoolExecutor(count) as pool:
            futures = [pool.submit(one, index) for index in range(count)]
            barrier.wait()
            start = time.perf_counter()
            containers = [future.result() for future in futures]
            elapsed = time.perf_counter() - start
            list(pool.map(lambda c: c.remove(force=True), containers))
    return elapsed


def through_herder(hooks: Hooks, image: str, count: int) -> float:
    """One job of ``count = COUNT`` through herder, from placement until every task has started."""
    return until_started(hooks, JOB.format(suffix=uuid.uuid4().hex[:8], count=count, image=image), count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--image", default="herder-test/busybox:1")
    args = parser.parse_args()
    client = docker.from_env(timeout=120)
    try:
        client.images.get(args.image)
    except docker.errors.ImageNotFound:
        raise SystemExit(f"image {args.image} is missing: run `make busybox-image` first") from None
    hooks = Hooks(load_plugins())
    fingerprint = hooks.fingerprint("docker")
    if not fingerprint.healthy:
        raise SystemExit(f"the docker driver is not healthy: {fingerprint.description}")
    through_herder(hooks, args.image, 2)  # warm up imports, the client and the daemon
    bare_sdk(client, args.image, 2)
    baseline, herder = [], []
    for _ in range(args.rounds):  # interleaved, so both sides see the same machine
        baseline.append(bare_sdk(client, args.image, args.count))
        herder.append(through_herder(hooks, args.image, args.count))
    best_bare, best_herder = min(baseline), min(herder)
    ratio = best_herder / best_bare
    verdict = "met" if ratio <= 1.3 else "NOT met"
    table = "\n".join([
        f"| what | time (best of {args.rounds}) |",
        "|---|---|",
        f"| {args.count} busybox containers created and started with the Docker SDK in {args.count} threads "
        f"| {best_bare * 1e3:.0f} ms |",
        f"| {args.count} busybox containers, a job of `count = {args.count}` in herder, placement to the last "
        f"`Started` | {best_herder * 1e3:.0f} ms |",
        f"| ratio herder / bare SDK | {ratio:.2f} (target ≤ 1.3: {verdict}) |",
        "",
        f"All rounds (ms): SDK {', '.join(f'{t * 1e3:.0f}' for t in baseline)}; "
        f"herder {', '.join(f'{t * 1e3:.0f}' for t in herder)}. "
        f"Docker {fingerprint.attributes.get('driver.docker.version', '?')}.",
    ])
    print(table)
    write_section("Docker start", "python bench/docker_start.py", table)


if __name__ == "__main__":
    main()
