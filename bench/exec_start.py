"""Exec start: 20 exec tasks through herder against 20 bare ``runc run -d`` of equivalent bundles.

    python bench/exec_start.py [--count 20] [--rounds 5] [--dir DIR]

herder's side is one job with ``count = COUNT`` exec tasks running ``sleep
300``, through the in-process runner: the time runs from placement until
every task has its ``Started`` event (directories, ports, environment,
hooks, bundle, cgroup, ``runc run`` through the supervisor included). The
baseline starts COUNT containers with ``runc run -d`` in COUNT parallel
threads, from bundles written beforehand with the driver's own spec (the
same mounts, user, namespaces and limits, a memory cgroup of their own), so
the time runs only while runc works. Medians of ROUNDS each, the sides
taking turns; every container is removed between rounds, outside the timing.
herder's data dir is made in DIR (``bench/.data``, as a real data dir is not
in ``/tmp``: on this machine a ``mkdir`` under ``/tmp`` took 0.6-1.0 ms, against
0.03-0.3 ms under ``/work`` or ``/var/tmp`` on the same disk in the same minute). Needs root and runc. The
result replaces the "Exec start" section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from herder_exec import bundle, cgroups
from herder_exec.isolation import Isolation

from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jobs import all_ms, load, median_ms, until_started
from results import where, write_section

JOB = """
job "bench-exec-{suffix}" {{
  group "g" {{
    count = {count}
    task "t" {{
      driver       = "exec"
      kill_timeout = "1s"
      config {{
        command = "/bin/sleep"
        args    = ["300"]
      }}
      resources {{
        memory = 64
      }}
    }}
  }}
}}
"""


def bare_runc(runc: str, hierarchy: cgroups.Hierarchy, count: int) -> float:
    """COUNT containers started with ``runc run -d``, each from its own thread."""
    run = uuid.uuid4().hex[:8]
    user = bundle.User.lookup("nobody")
    names = [f"bench-{run}-{index}" for index in range(count)]
    groups = [cgroups.TaskCgroup(hierarchy, f"herder-bench/{name}") for name in names]
    with tempfile.TemporaryDirectory() as root:
        bundles = []
        for index, (name, group) in enumerate(zip(names, groups, strict=True)):
            where = Path(root, name)
            dirs = {f"/{d}": where / d for d in ("local", "secrets", "tmp", "alloc")}
            for path in dirs.values():
                path.mkdir(parents=True)
            group.create(64)
            bundle.write(where / "bundle", bundle.spec(["/bin/sleep", "300"], {"NOMAD_ALLOC_INDEX": str(index)},
                                                       user, task_dirs=dirs, cgroups_path=group.runc_path,
                                                       cpu_shares=100, pids_limit=1024))
            bundles.append(where / "bundle")
        barrier = threading.Barrier(count + 1)

        def one(index: int) -> None:
            barrier.wait()
            subprocess.run([runc, "run", "-d", "--no-new-keyring", "--bundle", str(bundles[index]), names[index]],
                           check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        try:
            with ThreadPoolExecutor(count) as pool:
                futures = [pool.submit(one, index) for index in range(count)]
                barrier.wait()
                start = time.perf_counter()
                for future in futures:
                    future.result()
                elapsed = time.perf_counter() - start
        finally:
            for name, group in zip(names, groups, strict=True):
                subprocess.run([runc, "delete", "--force", name], capture_output=True)
                group.remove()
    return elapsed


def through_herder(hooks: Hooks, count: int, where: Path) -> float:
    """One job of ``count = COUNT`` through herder, from placement until every task has started."""
    return until_started(hooks, JOB.format(suffix=uuid.uuid4().hex[:8], count=count), count, where)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / ".data",
                        help="where herder's data dirs are made")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    hooks = Hooks(load_plugins())
    fingerprint = hooks.fingerprint("exec")
    if not fingerprint.healthy:
        raise SystemExit(f"the exec driver is not healthy: {fingerprint.description}")
    load_before = load()
    isolation = Isolation({})
    runc, hierarchy = isolation.runc().binary, isolation.hierarchy()
    through_herder(hooks, 2, args.dir)  # warm up imports, the supervisor and runc's pages
    bare_runc(runc, hierarchy, 2)
    baseline, herder = [], []
    for _ in range(args.rounds):  # interleaved, so both sides see the same machine
        baseline.append(bare_runc(runc, hierarchy, args.count))
        herder.append(through_herder(hooks, args.count, args.dir))
    ratio = statistics.median(herder) / statistics.median(baseline)
    verdict = "met" if ratio <= 1.3 else "NOT met"
    table = "\n".join([
        f"| what | time (median of {args.rounds}) |",
        "|---|---|",
        f"| {args.count} containers started with `runc run -d` from ready bundles in {args.count} threads "
        f"| {median_ms(baseline)} |",
        f"| {args.count} exec tasks, a job of `count = {args.count}` in herder, placement to the last `Started` "
        f"| {median_ms(herder)} |",
        f"| ratio herder / bare runc | {ratio:.2f} (target ≤ 1.3: {verdict}) |",
        "",
        f"All rounds (ms, taking turns): runc {all_ms(baseline)}; herder {all_ms(herder)}. "
        f"runc {fingerprint.attributes.get('driver.exec.runc.version', '?')}, "
        f"cgroup v{fingerprint.attributes.get('driver.exec.cgroup.version', '?')}. "
        f"herder's data dirs in `{where(args.dir)}`. "
        f"Load average (1, 5, 15 min) before: {load_before}; after: {load()}.",
    ])
    print(table)
    write_section("Exec start", f"python bench/exec_start.py --rounds {args.rounds}", table)


if __name__ == "__main__":
    main()
