"""Docker log throughput: a container printing 50 MB of numbered lines, through herder into its log files.

    python bench/docker_logs.py [--lines 6400000] [--runs 3] [--image herder-test/busybox:1] [--no-record]

One batch job, one docker task running ``seq 1 LINES`` (6 400 000 lines is
50.1 MB), logs rotated at 10 MB, through the in-process runner as ``herder
run`` does: the time runs from placement until the job is over, i.e. until
the container has exited, its output is in the files and it is removed. It
checks that the kept files hold every line, in order (what it counts as
kept, if not). For a ceiling, ``seq 1 LINES > /dev/null`` with the host's
busybox, timed the same. Best of RUNS. The image must exist (``make
busybox-image``). The result replaces the "Docker log throughput" section of
``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import time
import uuid
from pathlib import Path

from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins
from herder.supervisor.logfiles import log_files

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jobs import placed_job
from results import write_section

JOB = """
job "bench-docker-logs-{suffix}" {{
  type = "batch"
  group "g" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    task "t" {{
      driver = "docker"
      config {{
        image   = "{image}"
        command = "seq"
        args    = ["1", "{lines}"]
      }}
      logs {{
        max_files     = 10
        max_file_size = 10
      }}
    }}
  }}
}}
"""

MIB = 1024 * 1024


def expected(lines: int) -> tuple[int, str]:
    """The size and sha256 of ``seq 1 LINES``'s output."""
    digest = hashlib.sha256()
    size = 0
    for start in range(1, lines + 1, 100_000):
        block = b"".join(b"%d\n" % n for n in range(start, min(start + 100_000, lines + 1)))
        digest.update(block)
        size += len(block)
    return size, digest.hexdigest()


def through_herder(hooks: Hooks, image: str, lines: int) -> tuple[float, bytes]:
    """Seconds from placement to the end of the job, and the stdout it kept."""
    with placed_job(hooks, JOB.format(suffix=uuid.uuid4().hex[:8], image=image, lines=lines)) as run:
        run.runner.run()
        elapsed = run.elapsed()
        [logs] = Path(run.data_dir, "allocs").glob("*/alloc/logs")
        kept = b"".join(path.read_bytes() for path in log_files(logs, "t", "stdout"))
    return elapsed, kept


def bare_seq(lines: int) -> float:
    start = time.perf_counter()
    subprocess.run(["busybox", "seq", "1", str(lines)], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=6_400_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--image", default="herder-test/busybox:1")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    hooks = Hooks(load_plugins())
    fingerprint = hooks.fingerprint("docker")
    if not fingerprint.healthy:
        raise SystemExit(f"the docker driver is not healthy: {fingerprint.description}")
    size, digest = expected(args.lines)
    times, kept_sizes, whole = [], [], True
    for _ in range(args.runs):
        elapsed, kept = through_herder(hooks, args.image, args.lines)
        times.append(elapsed)
        kept_sizes.append(len(kept))
        whole = whole and hashlib.sha256(kept).hexdigest() == digest
        print(f"{elapsed:.1f} s, kept {len(kept)} of {size} bytes", flush=True)
    ceiling = min(bare_seq(args.lines) for _ in range(args.runs))
    best = min(times)
    table = "\n".join([
        f"| what | time (best of {args.runs}) | throughput |",
        "|---|---|---|",
        f"| `seq 1 {args.lines}` ({size / 1e6:.1f} MB) in a container, placement to the job's end "
        f"| {best:.1f} s | {size / best / MIB:.1f} MiB/s |",
        f"| the same `seq` on the host into /dev/null (ceiling) | {ceiling:.1f} s | {size / ceiling / MIB:.1f} MiB/s |",
        "",
        f"Every byte kept, in order: {'yes' if whole else 'NO'} (bytes kept per run: "
        f"{', '.join(map(str, kept_sizes))}). All runs (s): {', '.join(f'{t:.1f}' for t in times)}. "
        f"Docker {fingerprint.attributes.get('driver.docker.version', '?')}.",
    ])
    print(table)
    if not args.no_record:
        write_section("Docker log throughput", "python bench/docker_logs.py", table)


if __name__ == "__main__":
    main()
