"""Java start: the example's JVM serving HTTP through herder (plain and isolated) against a bare ``java -jar``.

    python bench/java_start.py [--rounds 5] [--port 9781]

The application is ``examples/java-hello`` (``Hello.java``, compiled into a
temporary directory first). herder's side runs the example's job through the
in-process runner, with ``[plugin.java] isolation`` ``none`` and, where
herder-exec can isolate, ``exec``: the time runs from placement until the
JVM answers an HTTP request on its (static) port: directories, the prestart
task copying the jar, the driver's checks, the supervisor, runc, and the
JVM's own start-up included. The baseline starts the same command line (the
same ``-Xmx`` and options) with ``subprocess.Popen`` and times it the same
way. Rounds are interleaved; best and median of ROUNDS each, and for herder
the median time until the JVM task's ``Started`` event (herder's own part:
placement, fingerprints, the prestart task, the start). The result
replaces the "Java start" section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from herder.app import ForegroundRun
from herder.client.alloc_runner import EventRecord
from herder.client.client import JobSource
from herder.client.config import Config, PortsConfig
from herder.jobspec import load_job_text
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import write_section

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "java-hello"
MEMORY = 128
OPTIONS = ["-XX:+UseSerialGC"]
"""As the example's job file has them."""


def build(where: Path) -> Path:
    subprocess.run(["javac", "-d", str(where / "classes"), str(EXAMPLE / "Hello.java")], check=True)
    subprocess.run(["jar", "--create", "--file", str(where / "hello.jar"), "--main-class", "Hello",
                    "-C", str(where / "classes"), "."], check=True)
    return where / "hello.jar"


def serving(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1) as response:
                response.read()
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.005)


Timing = tuple[float, float | None]
"""Seconds until the JVM answered; until its task's ``Started`` event (herder only)."""


def bare(jar: Path, port: int) -> Timing:
    java = shutil.which("java") or "java"
    start = time.perf_counter()
    proc = subprocess.Popen([java, *OPTIONS, f"-Xmx{MEMORY}m", "-jar", str(jar)],
                            env={"NOMAD_PORT_http": str(port), "NOMAD_ALLOC_NAME": "bare"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        serving(port)
        return time.perf_counter() - start, None
    finally:
        proc.terminate()
        proc.wait()


def through_herder(jar: Path, port: int, isolation: str) -> Timing:
    text = (EXAMPLE / "hello.hcl").read_text().replace('port "http" {}', f'port "http" {{\n static = {port}\n }}')
    with tempfile.TemporaryDirectory() as data_dir:
        config = Config(data_dir=Path(data_dir), ports=PortsConfig(min=2000, max=12000),
                        plugin={"java": {"isolation": isolation}})
        hooks = Hooks(load_plugins(config.plugin))
        job = load_job_text(text, "hcl", "hello.hcl", variables={"jar": str(jar)})
        started: list[float] = []

        def on_event(record: EventRecord) -> None:
            if record.task == "hello" and record.event.type == "Started":
                started.append(time.perf_counter() - start)

        start = time.perf_counter()
        runner = ForegroundRun(config, hooks, job, JobSource(text=text, format="hcl", source="hello.hcl",
                                                             variables={"jar": str(jar)}), on_event=on_event)
        try:
            runner.place()
            thread = threading.Thread(target=runner.run, daemon=True)
            thread.start()
            serving(port)
            elapsed = time.perf_counter() - start
            runner.stop()
            thread.join(120)
        finally:
            runner.close()
    return elapsed, started[0] if started else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--port", type=int, default=9781)
    args = parser.parse_args()
    fingerprint = Hooks(load_plugins({"java": {"isolation": "exec"}})).fingerprint("java")
    sides: dict[str, Callable[[Path, int], Timing]] = {
        "bare `java -jar` (Popen)": bare,
        "herder, plain process": lambda jar, port: through_herder(jar, port, "none"),
    }
    if fingerprint.healthy:
        sides["herder, isolated (herder-exec)"] = lambda jar, port: through_herder(jar, port, "exec")
    with tempfile.TemporaryDirectory() as where:
        jar = build(Path(where))
        Path(where).chmod(0o755)
        for side in sides.values():  # warm up: page cache, imports, the supervisor's code
            side(jar, args.port)
        times: dict[str, list[Timing]] = {name: [] for name in sides}
        for _ in range(args.rounds):
            for name, side in sides.items():
                times[name].append(side(jar, args.port))
    base = min(serving for serving, _ in times["bare `java -jar` (Popen)"])
    rows = []
    for name, timings in times.items():
        served = [serving for serving, _ in timings]
        started = [value for _, value in timings if value is not None]
        until_started = f"{statistics.median(started) * 1e3:.0f} ms" if started else "—"
        rows.append(f"| {name} | {min(served) * 1e3:.0f} ms | {statistics.median(served) * 1e3:.0f} ms "
                    f"| {min(served) / base:.2f} | {until_started} |")
    table = "\n".join([
        f"| start until the JVM answers HTTP | best of {args.rounds} | median | best / bare "
        "| median until `Started` |",
        "|---|---|---|---|---|",
        *rows,
        "",
        f"JVM: {fingerprint.attributes.get('driver.java.version', '?')} "
        f"({fingerprint.attributes.get('driver.java.vm', '?')}); -Xmx{MEMORY}m {' '.join(OPTIONS)}."
        + ("" if fingerprint.healthy else f" Not isolated: {fingerprint.description}")
        + f" Load average when done: {os.getloadavg()[0]:.1f}. herder's side is a fresh herder each round, as"
        " `herder run` is: its time includes the drivers' fingerprints (`java -version` starts a JVM; isolated,"
        " exec's probe container) and the supervisor's start.",
    ])
    print(table)
    write_section("Java start", f"python bench/java_start.py --rounds {args.rounds}", table)


if __name__ == "__main__":
    main()
