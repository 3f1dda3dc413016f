"""How fast the command line starts: commands that run no task, against their baselines.

    python bench/cli_start.py [--rounds 15] [--before REV] [--no-record]

A real agent (on a temporary data dir, a loopback port in 2000-12000) runs a
job of one sleeping raw_exec task. Each command is run ROUNDS times, the
cases taking turns so that the load of the machine falls on all alike;
median and best wall time from ``fork`` to exit, and median CPU time:

- the ``herder`` console script: ``--version``, ``job status`` (and with a
  job name and ``--json``), ``alloc status``, ``alloc logs``, ``alloc signal``;
  and, for the record, the commands that read a job file or load the plugins
  (``job run --detach``, ``validate``), which import the job parser;
- baselines: ``python -c pass`` (the interpreter's own start, the floor of any
  Python command) and ``nomad version`` (the ``nomad`` on PATH, or in
  /work/shared/peers).

With ``--before REV`` the herder commands are also run with REV's
``core/src`` (from ``git archive``) first on ``PYTHONPATH``: the previous
code, in the same run.

Then ``python -X importtime`` of ``herder job status``: the modules it imports
that cost the most, and in all.

The result replaces the "Command-line start" section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from jobs import sleepers  # noqa: E402
from results import write_section  # noqa: E402

from tests.support.agent import AgentProcess  # noqa: E402

TARGET_MS = 150.0
PEERS = Path("/work/shared/peers")
HERDER = Path(sys.executable).with_name("herder")
VALID_JOB = 'job "bench-valid" {\n  group "g" {\n    task "t" {\n      driver = "raw_exec"\n' \
            '      config {\n        command = "true"\n      }\n    }\n  }\n}\n'


def run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Seconds from starting ``argv`` to its exit, and the CPU seconds (user and system)
    it used: what the command costs, whoever else the machine's cores serve meanwhile.
    It must succeed."""
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            errors.seek(0)
            raise SystemExit(f"{' '.join(argv)} failed ({process.returncode}): {errors.read().decode()}")
    return elapsed, usage.ru_utime + usage.ru_stime


def import_costs(env: dict[str, str], argv: list[str], top: int,
                 tries: int = 5) -> tuple[float, list[tuple[str, float, float]]]:
    """The whole import time (ms) of ``argv`` under ``python -X importtime``, and the
    ``top`` modules by cumulative time, each with its own (self) time: of the
    quickest of ``tries`` runs, the one the machine's load disturbed least."""
    runs: list[tuple[float, list[tuple[str, float, float, int]]]] = []
    for _ in range(tries):
        done = subprocess.run([sys.executable, "-X", "importtime", *argv], env=env, capture_output=True, text=True)
        rows: list[tuple[str, float, float, int]] = []
        for line in done.stderr.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            own, cumulative, name = line.removeprefix("import time:").split("|")
            depth = (len(name) - len(name.lstrip())) // 2
            rows.append((name.strip(), int(own) / 1000, int(cumulative) / 1000, depth))
        runs.append((sum(cumulative for _, _, cumulative, depth in rows if depth == 0), rows))
    total, rows = min(runs, key=lambda run: run[0])
    ranked = sorted(rows, key=lambda row: row[2], reverse=True)[:top]
    return total, [(name, own, cumulative) for name, own, cumulative, _ in ranked]


def before_tree(rev: str, into: Path) -> Path:
    """REV's ``core/src`` extracted under ``into``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "core/src"], capture_output=True, check=True)
    tar = into / "before.tar"
    tar.write_bytes(archive.stdout)
    with tarfile.open(tar) as members:
        members.extractall(into, filter="data")
    return into / "core" / "src"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--before", metavar="REV", help="Also run the herder commands with REV's code.")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    nomad = shutil.which("nomad") or str(PEERS / "nomad")

    with tempfile.TemporaryDirectory(prefix="herder-bench-cli-") as tmp:
        agent = AgentProcess(Path(tmp)).start()
        try:
            alloc_id = agent.submit(sleepers(1, name="bench-cli"))["allocations"][0]["id"]
            agent.wait_task(alloc_id, "t", timeout=120)
            job_file = Path(tmp) / "valid.hcl"
            job_file.write_text(VALID_JOB)
            env = {**os.environ, "HERDER_ADDR": agent.url, "HERDER_TOKEN": agent.token}
            herder = [str(HERDER)]
            commands: dict[str, list[str]] = {
                "herder --version": ["--version"],
                "herder job status": ["job", "status"],
                "herder job status --json NAME": ["job", "status", "--json", "bench-cli"],
                "herder alloc status ID": ["alloc", "status", alloc_id[:8]],
                "herder alloc logs ID TASK": ["alloc", "logs", alloc_id[:8], "t"],
                "herder alloc signal -s SIGCONT ID": ["alloc", "signal", "-s", "SIGCONT", alloc_id[:8]],
                "herder job run --detach FILE (reads a job file)": ["job", "run", "--detach", str(job_file)],
                "herder validate FILE (loads the plugins)": ["validate", str(job_file)],
            }
            cases: dict[str, tuple[list[str], dict[str, str]]] = {
                "`python -c pass` (baseline)": ([sys.executable, "-c", "pass"], env),
                "`nomad version` (baseline)": ([nomad, "version"], env),
            }
            for name, command in commands.items():
                cases[name] = (herder + command, env)
            if args.before:
                old_src = before_tree(args.before, Path(tmp))
                old_env = env | {"PYTHONPATH": str(old_src)}
                for name, command in commands.items():
                    cases[f"{name}, before"] = (herder + command, old_env)
            for argv, case_env in cases.values():  # warm the page cache and the bytecode
                run(argv, case_env)
            times: dict[str, list[float]] = {name: [] for name in cases}
            cpu: dict[str, list[float]] = {name: [] for name in cases}
            for _ in range(args.rounds):
                for name, (argv, case_env) in cases.items():
                    elapsed, used = run(argv, case_env)
                    times[name].append(elapsed * 1000)
                    cpu[name].append(used * 1000)
            load = os.getloadavg()
            imports_total, imports_top = import_costs(env, [str(HERDER), "job", "status"], 12)
            before_imports = import_costs(old_env, [str(HERDER), "job", "status"], 1)[0] if args.before else None
        finally:
            agent.shutdown()

    def row(name: str) -> str:
        median, best = statistics.median(times[name]), min(times[name])
        return f"| {name} | {median:.0f} ms | {best:.0f} ms | {statistics.median(cpu[name]):.0f} ms |"

    remote = [name for name in commands if "(" not in name]
    worst = max(statistics.median(times[name]) for name in remote)
    worst_best = max(min(times[name]) for name in remote)
    worst_cpu = max(statistics.median(cpu[name]) for name in remote)
    lines = [row(name) for name in cases if not name.endswith(", before")]
    before = [row(name) for name in cases if name.endswith(", before")]
    top = "\n".join(f"| `{name}` | {own:.1f} ms | {cumulative:.1f} ms |" for name, own, cumulative in imports_top)
    before_text = ""
    if args.before:
        before_text = f"""
The same commands with the code of `{args.before}` (before the lazy imports), in the same run:

| command | wall, median | wall, best | CPU, median |
|---|---:|---:|---:|
{chr(10).join(before)}

`herder job status` imported {before_imports:.0f} ms of modules there (the quickest of 5 runs).
"""
    body = f"""
{args.rounds} rounds, the cases taking turns, each a fresh process from fork to exit; the `job` and `alloc`
commands against a real agent on loopback running one sleeping raw_exec task. Load average at the end:
{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min).

| command | wall, median | wall, best | CPU, median |
|---|---:|---:|---:|
{chr(10).join(lines)}

The commands that run no task and read no job file (target ≤ {TARGET_MS:.0f} ms): at most {worst:.0f} ms wall
(median; {"met" if worst <= TARGET_MS else "NOT met"}), {worst_best:.0f} ms wall at best \
({"met" if worst_best <= TARGET_MS else "NOT met"}), {worst_cpu:.0f} ms of CPU (median; \
{"met" if worst_cpu <= TARGET_MS else "NOT met"}). The wall time includes the agent's answer; the CPU time is the
command's own (user and system), which the machine's load does not stretch as it stretches the wall time.
{before_text}
`python -X importtime` of `herder job status` (the quickest of 5 runs): {imports_total:.0f} ms of imports in all;
the costliest:

| module | self | cumulative |
|---|---:|---:|
{top}
"""
    print(body)
    if not args.no_record:
        write_section("Command-line start", f"python bench/cli_start.py --rounds {args.rounds}"
                      + (f" --before {args.before}" if args.before else ""), body)


if __name__ == "__main__":
    main()
