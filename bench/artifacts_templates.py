"""Artifact download-and-unpack throughput, and template render time.

Artifacts: a ``.tar.gz`` of ``--size-mib`` MiB of random data in 64 files,
served by ``http.server`` on a loopback port (2000-12000), fetched into a
fresh directory, best of ``--runs`` after a warm-up:

(a) ``curl -s URL | tar xzf - -C DIR``, the everyday way, as the baseline;
(b) herder's artifacts plugin: download with progress, sha256 check, member
    by member unpacking with every safety check, move into place.

Templates: a 40-line template of the kind Nomad jobs carry (``env``,
``range`` over services, ``printf``, ``if``), rendered ``--renders`` times:

(c) Python's ``str.format`` writing the same text (no template language at
    all: the floor);
(d) herder's engine, parse and execute each time (what prestart does);
(e) herder's engine, execute only (a parsed template rendered again).

Records the result in ``bench/RESULTS.md`` under "## Artifacts and templates".
Usage::

    python bench/artifacts_templates.py [--size-mib 64] [--runs 3] [--renders 1000] [--no-record]
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import io
import os
import random
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from results import write_section

from herder.client.hooks.artifacts import ArtifactsPlugin
from herder.client.hooks.gotemplate import Template as GoTemplate
from herder.context import TaskContext, TaskDir
from herder.model import Artifact

TITLE = "Artifacts and templates"
SERVICES = [{"Address": f"10.0.0.{i}", "Port": 8000 + i, "ID": f"web-{i}"} for i in range(10)]
ENV = {"NOMAD_PORT_http": "8080", "NOMAD_TASK_NAME": "api", "NOMAD_ALLOC_INDEX": "0"}
TEMPLATE = (
    'listen = {{ env "NOMAD_PORT_http" }}\n'
    'name = {{ env "NOMAD_TASK_NAME" | toUpper }}\n'
    "{{ range $i, $s := service \"web\" }}"
    'upstream {{ $i }} = {{ printf "%s:%d" $s.Address $s.Port }}{{ if eq $i 0 }} # primary{{ end }}\n'
    "{{ end }}"
    + "".join(f'option_{i} = {{{{ env "NOMAD_ALLOC_INDEX" }}}}\n' for i in range(28))
)


def _format_baseline() -> str:
    lines = [f"listen = {ENV['NOMAD_PORT_http']}", f"name = {ENV['NOMAD_TASK_NAME'].upper()}"]
    lines += [f"upstream {i} = {s['Address']}:{s['Port']}{' # primary' if i == 0 else ''}"
              for i, s in enumerate(SERVICES)]
    lines += [f"option_{i} = {ENV['NOMAD_ALLOC_INDEX']}" for i in range(28)]
    return "\n".join(lines) + "\n"


FUNCTIONS: dict[str, Callable[..., object]] = {
    "env": lambda name: ENV.get(name, ""), "service": lambda name: SERVICES, "toUpper": str.upper,
}


def _archive(size_mib: int) -> bytes:
    rng = random.Random(1)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        per_file = size_mib * (1 << 20) // 64
        for index in range(64):
            data = rng.randbytes(per_file)
            info = tarfile.TarInfo(f"app/data/{index:02d}.bin")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _serve(directory: Path) -> tuple[ThreadingHTTPServer, int]:
    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(directory))
    for _ in range(50):
        port = random.randint(2000, 12000)
        try:
            server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        except OSError:
            continue
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server, port
    raise RuntimeError("no free port in 2000-12000")


def _context(root: Path) -> TaskContext:
    task = root / "task"
    for path in (root / "alloc" / "logs", task / "local", task / "secrets", task / "tmp"):
        path.mkdir(parents=True)
    sink = open(os.devnull, "wb")  # noqa: SIM115 (lives as long as the context)
    return TaskContext(alloc_id="bench", alloc_name="b.b[0]", alloc_index=0, job_name="b", group_name="b",
                       task_name="t", env={}, ports=[], stdout=sink, stderr=sink,
                       task_dir=TaskDir(dir=task, local_dir=task / "local", secrets_dir=task / "secrets",
                                        tmp_dir=task / "tmp", alloc_dir=root / "alloc",
                                        logs_dir=root / "alloc" / "logs"))


def _best(runs: int, action: Callable[[int], None]) -> float:
    action(-1)  # warm-up
    times = []
    for run in range(runs):
        start = time.perf_counter()
        action(run)
        times.append(time.perf_counter() - start)
    return min(times)


def bench_artifacts(size_mib: int, runs: int, work: Path) -> tuple[float, float, int]:
    served = work / "served"
    served.mkdir()
    data = _archive(size_mib)
    (served / "app.tar.gz").write_bytes(data)
    checksum = "sha256:" + hashlib.sha256(data).hexdigest()
    server, port = _serve(served)
    url = f"http://127.0.0.1:{port}/app.tar.gz"
    plugin = ArtifactsPlugin()
    try:
        def curl(run: int) -> None:
            target = work / f"curl{run}"
            target.mkdir()
            subprocess.run(f"curl -sf {url} | tar xzf - -C {target}", shell=True, check=True)
            shutil.rmtree(target)

        def herder(run: int) -> None:
            ctx = _context(work / f"herder{run}")
            plugin.fetch(Artifact(source=url, options={"checksum": checksum}), ctx)
            assert (ctx.task_dir.local_dir / "app" / "data" / "63.bin").exists()
            shutil.rmtree(work / f"herder{run}")

        return _best(runs, curl), _best(runs, herder), len(data)
    finally:
        plugin.close()
        server.shutdown()
        server.server_close()


def bench_templates(renders: int) -> tuple[float, float, float]:
    expected = _format_baseline()
    assert GoTemplate(TEMPLATE, functions=FUNCTIONS).execute() == expected
    parsed = GoTemplate(TEMPLATE, functions=FUNCTIONS)

    def timed(action: Callable[[], object]) -> float:
        start = time.perf_counter()
        for _ in range(renders):
            action()
        return (time.perf_counter() - start) / renders

    return (timed(_format_baseline), timed(lambda: GoTemplate(TEMPLATE, functions=FUNCTIONS).execute()),
            timed(parsed.execute))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--renders", type=int, default=1000)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="herder-bench-") as temp:
        curl, herder, size = bench_artifacts(args.size_mib, args.runs, Path(temp))
    floor, full, execute = bench_templates(args.renders)
    mib = args.size_mib
    body = f"""
A `.tar.gz` of {mib} MiB of random data in 64 files ({size / (1 << 20):.1f} MiB compressed) from `http.server` on
loopback, best of {args.runs} after a warm-up; herder's time includes the sha256 check, the per-member checks and
the move into place.

| artifact case | time | MiB/s unpacked | vs curl \\| tar |
|---|---:|---:|---:|
| `curl -s URL \\| tar xzf -` | {curl * 1000:.0f} ms | {mib / curl:,.0f} | 100% |
| herder artifacts plugin | {herder * 1000:.0f} ms | {mib / herder:,.0f} | {curl / herder:.0%} |

Target: herder at least half the speed of `curl | tar`: {"met" if herder <= 2 * curl else "NOT met"}.

A 40-line template (`env`, `range` over 10 service instances, `printf`, `if`), mean of {args.renders} renders:

| template case | per render |
|---|---:|
| Python `str.format` of the same text (floor) | {floor * 1e6:.1f} µs |
| herder engine, parse and execute (prestart) | {full * 1e6:.1f} µs |
| herder engine, execute a parsed template | {execute * 1e6:.1f} µs |

Target: a typical template renders in under 1 ms: {"met" if full < 1e-3 else "NOT met"}.
"""
    print(body)
    if not args.no_record:
        write_section(TITLE, "python bench/artifacts_templates.py", body)


if __name__ == "__main__":
    main()
