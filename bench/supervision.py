"""Supervision costs: memory per task, start time and log throughput through the process supervisor.

    python bench/supervision.py [--tasks 100] [--starts 200] [--size-mib 1024] [--rounds 3] [--dir DIR]
                                [--throughput-only]

(a) memory: TASKS sleeping tasks through one :class:`herder.supervisor.Supervisor`;
    the growth of the supervisor's and of the client process's RSS over 0
    tasks, per task (target: at most 1 MiB per task);
(b) start: STARTS ``/bin/true`` tasks, each spawned, waited for and forgotten
    in its own thread through the supervisor, against bare ``subprocess.Popen``
    calls in threads in the same run (target: a few ms per start); and the
    latency of one spawn request;
(c) log throughput: one task ``cat FILE`` (SIZE MiB of zeros, on tmpfs when
    there is one) through the supervisor into rotating files in DIR, timed
    until the exit is reported (every byte in the files), against
    ``cat FILE | cat > DIR/out``, a reader that writes a file too (target: at
    least 100 %, medians), and ``cat FILE | cat > /dev/null``, in the same
    run; checking that no byte is lost. ``--throughput-only`` measures this
    alone.

Timed cases take turns, ROUNDS rounds after a warm-up round. The results
replace the "Supervision" and "Supervisor log throughput" sections of
``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from herder.supervisor import Supervisor
from herder.supervisor.logfiles import log_files

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jobs import rss, sleepers
from results import write_section

BENCH_DIR = Path(__file__).resolve().parent
MIB = 1024 * 1024
LOG_FILE_MB = 100
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}


def timings(rounds: int, *cases: Callable[[], float]) -> list[list[float]]:
    """``rounds`` timings of each case, after an untimed round.

    The cases take turns, so that a burst of load elsewhere on the machine
    hurts none of them more than the others.
    """
    times: list[list[float]] = [[] for _ in cases]
    for _ in range(rounds + 1):
        for case, timed in zip(cases, times, strict=True):
            timed.append(case())
    return [timed[1:] for timed in times]


def best_of(rounds: int, *cases: Callable[[], float]) -> list[float]:
    """The best of ``rounds`` timings of each case (:func:`timings`)."""
    return [min(timed) for timed in timings(rounds, *cases)]


def table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    return "\n".join([
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if n == 0 else "---:" for n in range(len(header))) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ])


class Tasks:
    """Spawning through one supervisor, with ids, logs and clean-up taken care of."""

    def __init__(self, supervisor: Supervisor, logs_dir: Path) -> None:
        self.supervisor = supervisor
        self.logs_dir = logs_dir
        self._ids = iter(range(10**9))
        self._lock = threading.Lock()

    def spawn(self, argv: list[str], task: str = "bench", max_files: int = 10, logs_dir: Path | None = None) -> str:
        with self._lock:
            id = f"bench.{next(self._ids)}"
        self.supervisor.spawn(id, argv, env=ENV, cwd="/", logs_dir=logs_dir or self.logs_dir, task=task,
                              max_files=max_files, max_file_size=LOG_FILE_MB, stop_signal=signal.SIGTERM,
                              kill_timeout=5)
        return id

    def alloc_dirs(self, count: int) -> list[Path]:
        """Fresh log directories, one per task as allocations have."""
        return [Path(tempfile.mkdtemp(dir=self.logs_dir)) for _ in range(count)]

    def finish(self, id: str) -> None:
        if self.supervisor.wait(id) is None:
            raise RuntimeError(f"no exit for {id}")
        self.supervisor.forget(id)


def memory(tasks: Tasks, count: int) -> str:
    supervisor = tasks.supervisor
    for _ in range(3):  # warm up: whatever the first spawns allocate once
        tasks.finish(tasks.spawn(["true"]))
    time.sleep(0.2)
    before = rss(supervisor.pid), rss(os.getpid())
    ids = [tasks.spawn(["sleep", "3600"], logs_dir=logs_dir) for logs_dir in tasks.alloc_dirs(count)]
    time.sleep(0.5)
    after = rss(supervisor.pid), rss(os.getpid())
    for id in ids:
        supervisor.stop(id, signal.SIGTERM, 5)
    for id in ids:
        tasks.finish(id)
    rows = []
    for name, old, new in [("supervisor", before[0], after[0]), ("client (this process)", before[1], after[1])]:
        rows.append((name, f"{old / MIB:.1f} MiB", f"{new / MIB:.1f} MiB", f"{(new - old) / count / 1024:.1f} KiB"))
    per_task = (after[0] - before[0] + after[1] - before[1]) / count
    verdict = "met" if per_task <= MIB else "NOT met"
    return (f"{count} sleeping tasks through one supervisor: RSS with 0 tasks and with {count}.\n\n"
            + table(("process", "0 tasks", f"{count} tasks", "per task"), rows)
            + f"\n\nBoth together: {per_task / 1024:.1f} KiB per task (target ≤ 1 MiB: {verdict}).")


def herder_run_rss(work: Path, count: int) -> tuple[int, int]:
    """``herder run`` of ``count`` sleeping raw_exec tasks: its RSS and its supervisor's, once all started."""
    job = work / f"sleepers-{count}.hcl"
    job.write_text(sleepers(count))
    data_dir = work / f"herder-{count}"
    config = work / "herder.toml"
    config.write_text("[ports]\nmin = 2000\nmax = 12000\n")
    proc = subprocess.Popen([sys.executable, "-m", "herder", "run", "--json", "--config", str(config),
                             "--data-dir", str(data_dir), str(job)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    try:
        assert proc.stdout is not None
        started = 0
        while started < count:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"herder run ended after {started} of {count} tasks started")
            started += '"type": "Started"' in line
        time.sleep(1.0)  # let the allocator settle
        with Supervisor(data_dir) as supervisor:
            supervisor_pid = supervisor.pid
        return rss(proc.pid), rss(supervisor_pid)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)


def herder_memory(work: Path, count: int) -> str:
    one = herder_run_rss(work, 1)
    many = herder_run_rss(work, count)
    rows = [(name, f"{a / MIB:.1f} MiB", f"{b / MIB:.1f} MiB", f"{(b - a) / (count - 1) / 1024:.1f} KiB")
            for name, a, b in [("herder run", one[0], many[0]), ("its supervisor", one[1], many[1])]]
    per_task = (sum(many) - sum(one)) / (count - 1)
    total = sum(many) / count
    verdict = "met" if per_task <= MIB else "NOT met"
    return (f"`herder run` of a job of {count} sleeping raw_exec tasks against one of 1 task: RSS of the herder "
            f"process and of the supervisor, all tasks started.\n\n"
            + table(("process", "1 task", f"{count} tasks", "per added task"), rows)
            + f"\n\nEach added task costs {per_task / 1024:.0f} KiB of herder and supervision together "
              f"(target ≤ 1 MiB: {verdict}); all memory of both processes divided by {count} tasks is "
              f"{total / MIB:.2f} MiB per task.")


def start(tasks: Tasks, count: int, rounds: int) -> str:
    def bare() -> float:
        def one() -> None:
            subprocess.Popen(["/bin/true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True).wait()

        return in_threads(one, count)

    def supervised() -> float:
        dirs = tasks.alloc_dirs(count)
        return in_threads(lambda: tasks.finish(tasks.spawn(["/bin/true"], logs_dir=dirs.pop())), count)

    baseline, through = best_of(rounds, bare, supervised)
    latencies = []
    for logs_dir in tasks.alloc_dirs(count):
        began = time.perf_counter()
        id = tasks.spawn(["/bin/true"], logs_dir=logs_dir)
        latencies.append(time.perf_counter() - began)
        tasks.finish(id)
    per_task_ms = (through - baseline) / count * 1000
    verdict = "met" if per_task_ms < 5 else "NOT met"
    rows = [
        (f"{count} runs of `/bin/true`, bare `subprocess.Popen` in threads", f"{baseline * 1e3:.0f} ms"),
        (f"{count} runs of `/bin/true` through the supervisor (spawn, wait, forget) in threads",
         f"{through * 1e3:.0f} ms"),
        ("ratio supervisor / bare", f"{through / baseline:.2f}"),
        ("supervision overhead per task", f"{per_task_ms:.2f} ms (target: a few ms, < 5: {verdict})"),
        ("one spawn request, median of sequential spawns", f"{statistics.median(latencies) * 1e3:.2f} ms"),
    ]
    return table(("what", f"time (best of {rounds}, taking turns)"), rows)


def in_threads(work: Callable[[], None], count: int) -> float:
    threads = [threading.Thread(target=work) for _ in range(count)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - began


def throughput(tasks: Tasks, source: Path, size: int, work: Path, rounds: int) -> str:
    logs_dir = tasks.logs_dir
    files = size // (LOG_FILE_MB * MIB) + 2
    lost: list[int] = []

    def supervised() -> float:
        for path in log_files(logs_dir, "cat", "stdout"):
            path.unlink()
        began = time.perf_counter()
        tasks.finish(tasks.spawn(["cat", str(source)], task="cat", max_files=files))
        elapsed = time.perf_counter() - began
        lost.append(size - sum(path.stat().st_size for path in log_files(logs_dir, "cat", "stdout")))
        return elapsed

    def piped(target: Path) -> float:
        if target != Path(os.devnull):
            target.unlink(missing_ok=True)  # a new file, as the supervisor's are: no truncation timed
        began = time.perf_counter()
        subprocess.run(f"cat {source} | cat > {target}", shell=True, check=True)
        return time.perf_counter() - began

    out = work / "out"
    runs = timings(rounds, lambda: piped(Path(os.devnull)), supervised, lambda: piped(out))
    out.unlink()
    to_null, through, to_file = map(statistics.median, runs)
    best_null, best_through, best_file = map(min, runs)
    mib = size / MIB
    rows = [
        ("`cat FILE \\| cat > /dev/null`", f"{mib / to_null:,.0f}", f"{mib / best_null:,.0f}", "—", "—"),
        ("`cat FILE \\| cat > out` (a reader that writes a file, like the supervisor)", f"{mib / to_file:,.0f}",
         f"{mib / best_file:,.0f}", "100%", "—"),
        (f"`cat FILE` through the supervisor ({LOG_FILE_MB} MB files, `splice`)", f"{mib / through:,.0f}",
         f"{mib / best_through:,.0f}", f"{to_file / through:.0%}", ", ".join(map(str, sorted(set(lost))))),
    ]
    verdict = "met" if to_file / through >= 1 else "NOT met"
    where = os.path.relpath(work.parent, BENCH_DIR.parent)  # the repository's own path, not this machine's
    return (f"{mib:.0f} MiB of zeros (a sparse file in {source.parent.parent}), logs and `out` in "
            f"`{where}`; {rounds} rounds after a warm-up one, the cases taking turns; load average "
            f"{os.getloadavg()[0]:.1f} at the end. The supervisor's time runs until the exit is reported, when "
            "every byte is in the files.\n\n"
            + table(("case", "MiB/s (median)", "MiB/s (best)", "median vs `cat \\| cat > out`",
                     "lost bytes (every run)"), rows)
            + f"\n\nSupervisor ≥ 100% of `cat | cat > out` (medians): {verdict} ({to_file / through:.0%}); "
            f"zero bytes lost: {'yes' if set(lost) == {0} else 'NO'}.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100, help="sleeping tasks for the memory measure")
    parser.add_argument("--starts", type=int, default=200, help="tasks started for the start measure")
    parser.add_argument("--size-mib", type=int, default=1024, help="size of the file the throughput task cats")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each timed case")
    parser.add_argument("--dir", type=Path, default=BENCH_DIR / ".data", help="where the data dir and logs go")
    parser.add_argument("--throughput-only", action="store_true", help="measure (and record) log throughput only")
    args = parser.parse_args(argv)

    args.dir.mkdir(parents=True, exist_ok=True)
    scratch = Path("/dev/shm") if Path("/dev/shm").is_dir() else args.dir
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp, tempfile.TemporaryDirectory(dir=scratch) as fast:
        work = Path(tmp)
        (work / "logs").mkdir()
        source = Path(fast) / "source"
        with source.open("wb") as out:
            out.truncate(args.size_mib * MIB)  # reads as zeros
        with Supervisor(work / "data", keep=False) as supervisor:
            tasks = Tasks(supervisor, work / "logs")
            sections = [] if args.throughput_only else [
                ("Memory", memory(tasks, args.tasks)),
                ("Memory of herder run", herder_memory(work, args.tasks)),
                ("Start", start(tasks, args.starts, args.rounds)),
            ]
            flow = throughput(tasks, source, args.size_mib * MIB, work, args.rounds)
        shutil.rmtree(work / "logs")
    command = "python bench/supervision.py"
    if sections:
        body = "\n\n".join(f"### {title}\n\n{text}" for title, text in sections)
        print(body)
        write_section("Supervision", command, body)
    print(flow)
    if args.rounds != 3:
        command += f" --rounds {args.rounds}"
    write_section("Supervisor log throughput", command + (" --throughput-only" if sections == [] else ""), flow)
    return 0


if __name__ == "__main__":
    sys.exit(main())
