"""rkt start: COUNT rkt tasks through herder against COUNT bare ``rkt run`` of the same image.

    python bench/rkt_start.py [--count 5] [--rounds 3]

Needs root, and ``rkt`` on PATH with ``stage1-fly.aci`` beside it (as in
``../shared/peers``). Both sides use one rkt store of their own in a
temporary directory, holding an ACI built from the host's static busybox.
herder's side is one job with ``count = COUNT`` rkt tasks running ``sleep
300``, through the in-process runner: the time runs from placement until
every task has its ``Started`` event (directories, ports, environment,
hooks, the driver's ``rkt image list`` finding the image in the store,
``rkt run`` through the supervisor until the pod's UUID file appears; the
data dir is new each round, so a supervisor process is started each time). The baseline
spawns COUNT ``rkt run --uuid-file-save`` of the image by id at once, and
the time runs until every UUID file is written. Best of ROUNDS each; every
pod is stopped and removed between rounds, outside the timing. The result
replaces the "rkt start" section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from herder_rkt.cli import Rkt

from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: the tests' ACI builder
from jobs import until_started
from results import write_section

from tests.rkt.helpers import build_aci

JOB = """
job "bench-rkt-{suffix}" {{
  group "g" {{
    count = {count}
    task "t" {{
      driver       = "rkt"
      kill_timeout = "1s"
      config {{
        image            = "example.local/busybox:1.0.0"
        insecure_options = ["image"]
        command          = "/bin/sleep"
        args             = ["300"]
      }}
      resources {{
        memory = 64
      }}
    }}
  }}
}}
"""


def bare_rkt(rkt: Rkt, stage1: str, image: str, count: int) -> float:
    """COUNT ``rkt run`` spawned at once, each in a session of its own, until every pod's UUID is written."""
    with tempfile.TemporaryDirectory() as where:
        files = [Path(where, f"{index}.uuid") for index in range(count)]
        start = time.perf_counter()
        procs = [subprocess.Popen(rkt.argv("run", f"--uuid-file-save={path}", f"--stage1-path={stage1}", image,
                                           "--exec=/bin/sleep", "--", "300", insecure=["image"]),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True) for path in files]
        try:
            while not all(path.is_file() and path.read_text() for path in files):
                if any(proc.poll() is not None for proc in procs):
                    raise SystemExit("a bare rkt run ended before its pod started")
                time.sleep(0.005)
            elapsed = time.perf_counter() - start
        finally:
            for proc in procs:  # each leads the pod's process group (what rkt stop --force would kill)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
            rkt.call("gc", "--grace-period=0s")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    binary = shutil.which("rkt")
    if binary is None or os.geteuid() != 0:
        raise SystemExit("needs root and rkt on PATH")
    stage1 = str(Path(binary).resolve().parent / "stage1-fly.aci")
    with tempfile.TemporaryDirectory() as store:
        config: dict[str, Any] = {"dir": f"{store}/data", "local_config": f"{store}/etc",
                                  "system_config": f"{store}/sys", "stage1_path": stage1}
        rkt = Rkt(binary, dir=config["dir"], local_config=config["local_config"],
                  system_config=config["system_config"])
        short = rkt.fetch(str(build_aci(Path(store, "busybox.aci"))), insecure=["image"])
        image = next(i.id for i in rkt.images() if i.id.startswith(short))
        hooks = Hooks(load_plugins({"rkt": config}))
        fingerprint = hooks.fingerprint("rkt")
        if not fingerprint.healthy:
            raise SystemExit(f"the rkt driver is not healthy: {fingerprint.description}")

        def through_herder(count: int) -> float:
            return until_started(hooks, JOB.format(suffix=uuid.uuid4().hex[:8], count=count), count)

        through_herder(1)  # warm up imports, the supervisor and rkt's pages
        bare_rkt(rkt, stage1, image, 1)
        rows = []
        for count in sorted({1, args.count}):
            baseline, herder = [], []
            for _ in range(args.rounds):  # interleaved, so both sides see the same machine
                baseline.append(bare_rkt(rkt, stage1, image, count))
                herder.append(through_herder(count))
            rows.append((count, baseline, herder))
        leftovers = rkt.pods()
        rkt.call("gc", "--grace-period=0s")
    lines = [f"| pods | bare `rkt run` until the UUID file (best of {args.rounds}) "
             f"| herder, placement to the last `Started` (best of {args.rounds}) | ratio |", "|---|---|---|---|"]
    details = []
    for count, baseline, herder in rows:
        lines.append(f"| {count} | {min(baseline) * 1e3:.0f} ms | {min(herder) * 1e3:.0f} ms "
                     f"| {min(herder) / min(baseline):.2f} |")
        details.append(f"{count} pod(s): rkt {', '.join(f'{t * 1e3:.0f}' for t in baseline)}; "
                       f"herder {', '.join(f'{t * 1e3:.0f}' for t in herder)}")
    table = "\n".join([
        *lines, "",
        f"All rounds (ms): {'. '.join(details)}. rkt {fingerprint.attributes.get('driver.rkt.version', '?')}, "
        "fly stage1. herder's side includes one `rkt image list` per task (the image is in the store) and the "
        "start of the data dir's process supervisor; each `rkt run` on both sides imports the stage1 image again.",
    ])
    if leftovers:
        raise SystemExit(f"pods left after the benchmark: {leftovers}")
    print(table)
    write_section("rkt start", "python bench/rkt_start.py", table)


if __name__ == "__main__":
    main()
