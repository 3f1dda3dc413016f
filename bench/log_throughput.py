"""Log capture throughput: ``cat FILE`` into a LogSink against ``cat FILE | cat > out``.

Writes a file of random bytes, then times ``--runs`` rounds after one warm-up
round, the cases taking turns (so that a burst of load elsewhere hurts none of
them more than the others):

(a) ``cat FILE > out`` (stdout straight to a file), the ceiling;
(b) ``cat FILE`` with stdout a :class:`herder.client.logs.LogSink` rotating at
    10 MB, until ``close()`` returns, i.e. until every byte is on disk;
(c) ``cat FILE | cat > out``, the baseline: a plain reader behind a pipe that
    writes a file, as the sink does (target: (b) at least 100 % of it, medians).

(a) is a single in-kernel copy (GNU cat uses ``copy_file_range(2)`` between
files); anything reading a task's output through a pipe adds the pipe, which
(c) shows.

It checks that the kept log files hold every byte, in order, and records the
result in ``bench/RESULTS.md`` under "## Log throughput". Usage::

    python bench/log_throughput.py [--size-mib 512] [--runs 5] [--no-record]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from results import write_section

from herder.client.logs import LogSink
from herder.model import LogConfig
from herder.supervisor.logfiles import log_files

BENCH_DIR = Path(__file__).resolve().parent
TITLE = "Log throughput"
TARGET = 1.0
CHUNK = 8 * 1024 * 1024
MAX_FILE_SIZE_MB = 10


def make_source(path: Path, size: int) -> str:
    """Write ``size`` random bytes to ``path``; return their sha256."""
    digest = hashlib.sha256()
    with path.open("wb") as out:
        left = size
        while left:
            block = os.urandom(min(CHUNK, left))
            digest.update(block)
            out.write(block)
            left -= len(block)
    return digest.hexdigest()


def timings(runs: int, *cases: Callable[[], float]) -> list[list[float]]:
    """``runs`` timings of each case, taking turns, after an untimed round that warms the page cache."""
    times: list[list[float]] = [[] for _ in cases]
    for _ in range(runs + 1):
        for case, timed in zip(cases, times, strict=True):
            timed.append(case())
    return [timed[1:] for timed in times]


def time_cat_to_file(source: Path, out: Path) -> float:
    out.unlink(missing_ok=True)
    with out.open("wb") as target:
        started = time.perf_counter()
        subprocess.run(["cat", str(source)], stdout=target, check=True)
        elapsed = time.perf_counter() - started
    out.unlink()
    return elapsed


def time_cat_through_pipe(source: Path, out: Path) -> float:
    """``cat FILE | cat > out``: the same copies as any capture through a pipe."""
    with out.open("wb") as target:
        started = time.perf_counter()
        producer = subprocess.Popen(["cat", str(source)], stdout=subprocess.PIPE)
        assert producer.stdout is not None
        subprocess.run(["cat"], stdin=producer.stdout, stdout=target, check=True)
        producer.stdout.close()
        producer.wait()
        elapsed = time.perf_counter() - started
    out.unlink()
    return elapsed


def time_cat_to_sink(source: Path, logs_dir: Path, config: LogConfig) -> float:
    for path in log_files(logs_dir, "bench", "stdout"):
        path.unlink()
    started = time.perf_counter()
    sink = LogSink(logs_dir, "bench", "stdout", config)
    subprocess.run(["cat", str(source)], stdout=sink, check=True)
    sink.close()
    return time.perf_counter() - started


def kept_digest(logs_dir: Path) -> tuple[int, str]:
    """Total size and sha256 of the kept log files, in index order."""
    digest = hashlib.sha256()
    total = 0
    for path in log_files(logs_dir, "bench", "stdout"):
        with path.open("rb") as kept:
            while block := kept.read(CHUNK):
                digest.update(block)
                total += len(block)
    return total, digest.hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=512, help="size of the file to cat")
    parser.add_argument("--runs", type=int, default=5, help="runs of each case; the best counts")
    parser.add_argument("--no-record", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args(argv)

    size = args.size_mib * 1024 * 1024
    config = LogConfig(
        max_files=max(60, args.size_mib // MAX_FILE_SIZE_MB + 2),
        max_file_size=MAX_FILE_SIZE_MB,
    )
    data_root = BENCH_DIR / ".data"
    data_root.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=data_root) as tmp:
        work = Path(tmp)
        logs_dir = work / "logs"
        logs_dir.mkdir()
        source = work / "source"
        source_digest = make_source(source, size)
        runs = timings(args.runs, lambda: time_cat_to_file(source, work / "out"),
                       lambda: time_cat_to_sink(source, logs_dir, config),
                       lambda: time_cat_through_pipe(source, work / "out"))
        kept_size, digest = kept_digest(logs_dir)
        files = len(log_files(logs_dir, "bench", "stdout"))
    load = os.getloadavg()[0]

    plain, captured, piped = map(statistics.median, runs)
    best_plain, best_captured, best_piped = map(min, runs)
    lost = size - kept_size
    intact = lost == 0 and digest == source_digest
    ratio = piped / captured
    mib = args.size_mib
    rows = [
        ("`cat FILE > out` (one in-kernel copy)", f"{mib / plain:,.0f}", f"{mib / best_plain:,.0f}",
         f"{piped / plain:.0%}", "—", "—"),
        ("`cat FILE \\| cat > out` (a reader that writes a file)", f"{mib / piped:,.0f}", f"{mib / best_piped:,.0f}",
         "100%", "—", "—"),
        (f"`cat FILE` → LogSink ({MAX_FILE_SIZE_MB} MB files, {files} kept)", f"{mib / captured:,.0f}",
         f"{mib / best_captured:,.0f}", f"{ratio:.0%}", str(lost), "yes" if intact else "NO"),
    ]
    table = "\n".join(
        [
            "| case | MiB/s (median) | MiB/s (best) | median vs `cat \\| cat > out` | lost bytes | content identical |",
            "|---|---:|---:|---:|---:|---|",
            *("| " + " | ".join(row) + " |" for row in rows),
        ]
    )
    command = "python bench/log_throughput.py"
    if args.size_mib != 512:
        command += f" --size-mib {args.size_mib}"
    if args.runs != 5:
        command += f" --runs {args.runs}"
    verdict = "met" if ratio >= TARGET and intact else "NOT met"
    body = (
        f"{args.size_mib} MiB of random bytes in `bench/.data`, {args.runs} rounds after a warm-up one, the "
        f"cases taking turns; load average {load:.1f} at the end. The LogSink time runs until `close()` returns "
        "(everything on disk); the sink moves the pipe into the files with `splice(2)`, the supervisor's own log "
        "pump.\n\n"
        f"{table}\n\n"
        f"Target: LogSink ≥ {TARGET:.0%} of `cat FILE | cat > out` (medians) with zero lost bytes: {verdict} "
        f"({ratio:.0%})."
    )
    print(f"{command}\n\n{body}")
    if not args.no_record:
        write_section(TITLE, command, body)
    return 0 if intact else 1


if __name__ == "__main__":
    sys.exit(main())
