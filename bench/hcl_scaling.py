"""Reading a job with a huge ``meta`` block: time and peak memory against the number of entries.

    python bench/hcl_scaling.py [--baseline-src PATH] [--no-record]

A batch job of one raw_exec task whose task has a ``meta`` block of N
entries (``key_000001 = "value number 1 of the meta block"``, about 50
bytes each) is read by ``load_job_text``, as ``herder
validate`` and the agent read a job: parse, variables, the schema, the built
job. Each case runs in a fresh process; reported: the CPU time of the read
(the process's, so that other work on the host does not count), the time on
the wall, and the process's peak RSS (``ru_maxrss``), with the import floor
(the same process before reading) beside it. HCL for 600, 8,000, 16,000 and
60,000 entries; JSON, YAML and Nomad's API JSON for 600 and 60,000. Linear
means 60,000 entries cost at most 150 times what 600 do.

With ``--baseline-src`` (another checkout's ``core/src``, e.g. main's before
a change) the HCL cases up to 16,000 entries run again on that code, in the
same run, for a side-by-side comparison.

The result replaces the "HCL scaling" section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from results import write_section  # noqa: E402

PROBE = r"""
import json, resource, sys, time
from herder.jobspec import load_job_text
text, fmt = sys.stdin.read(), sys.argv[1]
floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
cpu, wall = time.process_time(), time.perf_counter()
job = load_job_text(text, fmt, "big")
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
assert len(job.groups[0].tasks[0].meta) == int(sys.argv[2])
print(json.dumps({"cpu": cpu, "wall": wall, "floor": floor * 1024,
                  "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def job(entries: int, fmt: str) -> str:
    """The job with ``entries`` meta entries in the task, written in ``fmt`` (hcl, json, yaml, nomad)."""
    meta = {f"key_{i:06d}": f"value number {i} of the meta block" for i in range(entries)}
    if fmt == "hcl":
        lines = "".join(f'        {key} = "{value}"\n' for key, value in meta.items())
        return ('job "big" {\n  type = "batch"\n  group "g" {\n    task "t" {\n      driver = "raw_exec"\n'
                '      config {\n        command = "/bin/true"\n      }\n      meta {\n' + lines +
                "      }\n    }\n  }\n}\n")
    task = {"name": "t", "driver": "raw_exec", "config": {"command": "/bin/true"}, "meta": meta}
    document = {"job": {"name": "big", "type": "batch", "groups": [{"name": "g", "tasks": [task]}]}}
    if fmt == "json":
        return json.dumps(document)
    if fmt == "yaml":
        return json.dumps(document)  # JSON is YAML: PyYAML's reader is what is measured
    nomad_task = {"Name": "t", "Driver": "raw_exec", "Config": {"command": "/bin/true"}, "Meta": meta}
    return json.dumps({"Job": {"ID": "big", "Name": "big", "Type": "batch",
                               "TaskGroups": [{"Name": "g", "Tasks": [nomad_task]}]}})


def measure(entries: int, fmt: str, src: Path) -> dict[str, float]:
    """One read in a fresh process on the code in ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    probe = subprocess.run([sys.executable, "-c", PROBE, "json" if fmt == "nomad" else fmt, str(entries)],
                           input=job(entries, fmt), capture_output=True, text=True, env=env, check=False)
    if probe.returncode != 0:
        raise SystemExit(f"{fmt} {entries} on {src}: {probe.stderr[-2000:]}")
    return dict(json.loads(probe.stdout))


def row(label: str, entries: int, fmt: str, result: dict[str, float], base: dict[str, float] | None) -> str:
    ratio = f"{result['cpu'] / base['cpu']:.0f}x" if base else ""
    return (f"| {label} | {fmt} | {entries:,} | {result['cpu']:.2f} s | {result['wall']:.2f} s | {ratio} | "
            f"{result['peak'] / 2**20:.0f} MiB | {result['floor'] / 2**20:.0f} MiB |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-src", type=Path, help="another checkout's core/src, measured beside this one")
    parser.add_argument("--no-record", action="store_true", help="print, but do not write bench/RESULTS.md")
    args = parser.parse_args()
    load_before = os.getloadavg()
    rows: list[str] = []
    sides = [("this tree", ROOT / "core" / "src", [600, 8_000, 16_000, 60_000])]
    if args.baseline_src:
        sides.append(("baseline", args.baseline_src, [600, 8_000, 16_000]))
    for label, src, sizes in sides:
        first = measure(sizes[0], "hcl", src)
        rows.append(row(label, sizes[0], "hcl", first, None))
        for entries in sizes[1:]:
            rows.append(row(label, entries, "hcl", measure(entries, "hcl", src), first))
            print(rows[-1], flush=True)
    for fmt in ("json", "yaml", "nomad"):
        first = measure(600, fmt, ROOT / "core" / "src")
        rows.append(row("this tree", 600, fmt, first, None))
        rows.append(row("this tree", 60_000, fmt, measure(60_000, fmt, ROOT / "core" / "src"), first))
        print(rows[-1], flush=True)
    load_after = os.getloadavg()
    body = (f"Load average (1, 5, 15 min) before: {', '.join(f'{x:.2f}' for x in load_before)}; after: "
            f"{', '.join(f'{x:.2f}' for x in load_after)}. Each case a fresh process; \"x 600\" is the CPU time "
            "against the same side's 600-entry job (linear: at most 150x for 60,000).\n\n"
            "| code | format | meta entries | CPU | wall | x 600 | peak RSS | RSS before reading |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|\n" + "\n".join(rows))
    print(body)
    if not args.no_record:
        command = "python bench/hcl_scaling.py" + (f" --baseline-src {args.baseline_src}" if args.baseline_src else "")
        write_section("HCL scaling", command, body)


if __name__ == "__main__":
    main()
