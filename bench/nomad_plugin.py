"""The herder plugin's cost to a Nomad agent: handshake, shutdown, and the agent's start.

    python bench/nomad_plugin.py [--rounds 5] [--agents 3]

1. Handshake: from starting ``nomad-driver-herder`` (with Nomad's magic
   cookie) to its handshake line on stdout; baseline, the same Python
   starting and exiting (``python -c pass``). Nomad starts the plugin twice at
   every agent start (to read its info, then to use it).
2. Shutdown: from ``GRPCController.Shutdown`` to the plugin's exit. Without
   that service go-plugin waits 2 s for a plugin to leave before killing it.
3. Agent start: ``nomad agent -dev`` (the ``nomad`` on PATH) until its node is
   ready with the herder driver fingerprinted healthy; baseline, the same agent
   with an empty plugin dir until its node is ready.

Best and median of ROUNDS (AGENTS for 3). Ports in 2000-12000, data in a temp
dir. The result replaces the "Nomad plugin" section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import grpc  # noqa: E402
from results import write_section  # noqa: E402

from herder_nomad.plugin import MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE  # noqa: E402
from herder_nomad.wire import grpc_controller_pb2, grpc_controller_pb2_grpc  # noqa: E402
from tests.nomad.helpers import PLUGIN, NomadCluster  # noqa: E402


def handshake_and_shutdown() -> tuple[float, float]:
    env = {**os.environ, MAGIC_COOKIE_KEY: MAGIC_COOKIE_VALUE, "PLUGIN_PROTOCOL_VERSIONS": "2"}
    started = time.perf_counter()
    process = subprocess.Popen([str(PLUGIN)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert process.stdout is not None
    line = process.stdout.readline()
    handshake = time.perf_counter() - started
    address = line.strip().split("|")[3]
    with grpc.insecure_channel(f"unix:{address}") as channel:
        stopping = time.perf_counter()
        grpc_controller_pb2_grpc.GRPCControllerStub(channel).Shutdown(grpc_controller_pb2.Empty(), timeout=10)
        process.wait(10)
        shutdown = time.perf_counter() - stopping
    return handshake, shutdown


def python_start() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - started


def agent_start(root: Path, with_plugin: bool) -> float:
    cluster = NomadCluster(root)
    if not with_plugin:
        (cluster.plugin_dir / "herder").unlink()
    started = time.perf_counter()
    try:
        cluster.add("dev", mode="dev")
        if with_plugin:
            cluster.wait_ready()
        else:
            until(lambda: [n for n in cluster.try_api("/v1/nodes") or [] if n.get("Status") == "ready"])
        return time.perf_counter() - started
    finally:
        cluster.close()


def until(check: Callable[[], object]) -> None:
    deadline = time.monotonic() + 90
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit("the agent did not become ready")
        time.sleep(0.05)


def ms(values: list[float]) -> str:
    return f"{min(values) * 1000:.0f} ms / {statistics.median(values) * 1000:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--agents", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("nomad") is None or not PLUGIN.exists():
        raise SystemExit("needs nomad on PATH and herder-nomad installed")
    handshakes, shutdowns, pythons = [], [], []
    for _ in range(args.rounds):
        pythons.append(python_start())
        handshake, shutdown = handshake_and_shutdown()
        handshakes.append(handshake)
        shutdowns.append(shutdown)
    bare, herder = [], []
    with tempfile.TemporaryDirectory(prefix="herder-bench-nomad-") as tmp:
        for round in range(args.agents):
            bare.append(agent_start(Path(tmp) / f"bare{round}", with_plugin=False))
            herder.append(agent_start(Path(tmp) / f"herder{round}", with_plugin=True))
    version = subprocess.run(["nomad", "version"], capture_output=True, text=True).stdout.splitlines()[0]
    body = f"""
| what | best / median |
|---|---|
| `python -c pass` (baseline: the interpreter alone) | {ms(pythons)} |
| `nomad-driver-herder` started until its handshake line | {ms(handshakes)} |
| `GRPCController.Shutdown` until the plugin exited (go-plugin's wait without it: 2000 ms) | {ms(shutdowns)} |
| `nomad agent -dev` until its node is ready, empty plugin dir (baseline) | {ms(bare)} |
| `nomad agent -dev` until its node is ready with `herder` healthy | {ms(herder)} |

{args.rounds} rounds of the first three, {args.agents} agents of each kind. {version}.
"""
    write_section("Nomad plugin", f"python bench/nomad_plugin.py --rounds {args.rounds} --agents {args.agents}", body)
    print(body)


if __name__ == "__main__":
    main()
