"""Log capture throughput: ``cat FILE`` into a LogSink against ``cat FILE > out``.

Writes a file of random bytes, then times, best of ``--runs`` after one
warm-up run:

(a) ``cat FILE > out`` (stdout straight to a file), the ceiling;
(b) ``cat FILE`` with stdout a :class:`herder.client.logs.LogSink` rotating at
    10 MB, until ``close()`` returns, i.e. until every byte is on disk;
(c) ``cat FILE | cat > out``, for reference: a plain reader behind a pipe.

(a) is a single in-kernel copy (GNU cat uses ``copy_file_range(2)`` between
files); anything reading a task's output through a pipe adds the copies into
and out of the pipe, which (c) shows.

It checks that the kept log files hold every byte, in order, and records the
result in ``bench/RESULTS.md`` under "## Log throughput". Usage::

    python bench/log_throughput.py [--size-mib 512] [--runs 5] [--no-record]
"""

from __future__ import annotations

import argparse
import hashlib
import os
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
TARGET = 0.70
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


def best_of(runs: int, once: Callable[[], float]) -> float:
    """The best of ``runs`` timings, after one untimed run to warm the page cache."""
    once()
    return min(once() for _ in range(runs))


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
        plain = best_of(args.runs, lambda: time_cat_to_file(source, work / "out"))
        captured = best_of(args.runs, lambda: time_cat_to_sink(source, logs_dir, config))
        piped = best_of(args.runs, lambda: time_cat_through_pipe(source, work / "out"))
        kept_size, digest = kept_digest(logs_dir)
        files = len(log_files(logs_dir, "bench", "stdout"))

    lost = size - kept_size
    intact = lost == 0 and digest == source_digest
    ratio = plain / captured
    rows = [
        ("`cat FILE > out`", f"{args.size_mib / plain:,.0f}", "100%", "—", "—"),
        (
            f"`cat FILE` → LogSink ({MAX_FILE_SIZE_MB} MB files, {files} kept)",
            f"{args.size_mib / captured:,.0f}",
            f"{ratio:.0%}",
            str(lost),
            "yes" if intact else "NO",
        ),
        (
            "`cat FILE \\| cat > out` (reference)",
            f"{args.size_mib / piped:,.0f}",
            f"{plain / piped:.0%}",
            "—",
            "—",
        ),
    ]
    table = "\n".join(
        [
            "| case | MiB/s | vs `cat > out` | lost bytes | content identical |",
            "|---|---:|---:|---:|---|",
            *("| " + " | ".join(row) + " |" for row in rows),
        ]
    )
    command = "python bench/log_throughput.py"
    if args.size_mib != 512:
        command += f" --size-mib {args.size_mib}"
    verdict = "met" if ratio >= TARGET and intact else "NOT met"
    body = (
        f"{args.size_mib} MiB of random bytes, best of {args.runs} runs each after a "
        "warm-up; the LogSink time runs until `close()` returns (everything on disk). "
        "`cat > out` is one in-kernel copy (`copy_file_range`); capture through a pipe "
        "adds the copies into and out of the pipe, as the reference row shows.\n\n"
        f"{table}\n\n"
        f"Target: LogSink ≥ {TARGET:.0%} of `cat > out` with zero lost bytes: {verdict}."
    )
    print(f"{command}\n\n{body}")
    if not args.no_record:
        write_section(TITLE, command, body)
    return 0 if intact else 1


if __name__ == "__main__":
    sys.exit(main())
