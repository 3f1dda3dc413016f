"""Portmap throughput: requests through a bridge-mode allocation's mapped port against the same server on a host port.

    python bench/portmap_throughput.py [--rounds 5] [--seconds 5] [--connections 16] [--dir DIR]

Each side is one raw_exec task running the same HTTP/1.1 server (a keep-alive
asyncio loop answering every request with a 2-byte body, so that the server
is not what bounds the rate), on a static host port:
in host mode it listens on that port itself; in bridge mode it listens on
8080 inside its allocation's namespace and ``wrk`` reaches it through the
portmap plugin's DNAT of the host port (on the host's loopback address).
``wrk`` runs SECONDS with CONNECTIONS connections against each side in turn,
ROUNDS rounds, once every task has started; medians of requests per second.
Needs root, the CNI plugins and ``wrk``. The result replaces the "Portmap
throughput" section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jobs import load, until_started
from results import where, write_section

SERVER = """
import asyncio, os

RESPONSE = b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nok"

async def answer(reader, writer):
    try:
        while True:
            await reader.readuntil(b"\\r\\n\\r\\n")
            writer.write(RESPONSE)
            await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        writer.close()

async def main():
    server = await asyncio.start_server(answer, "", int(os.environ["NOMAD_PORT_http"]))
    await server.serve_forever()

asyncio.run(main())
"""

JOB = """
job "bench-portmap-{suffix}" {{
  group "g" {{
    network {{
      mode = "{mode}"
      port "http" {{
        static = {port}
        {to}
      }}
    }}
    task "server" {{
      driver       = "raw_exec"
      kill_timeout = "1s"
      config {{
        command = "{python}"
        args    = ["{server}"]
      }}
    }}
  }}
}}
"""


def free_port() -> int:
    while True:
        port = random.randint(2000, 12000)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def wrk(port: int, seconds: int, connections: int) -> float:
    """Requests per second ``wrk`` got from 127.0.0.1:PORT, once the server answers."""
    url = f"http://127.0.0.1:{port}/"
    for _ in range(300):  # the server's interpreter is starting: retried every 0.1 s, at most 30 s
        if subprocess.run(["curl", "-sf", "-m", "1", "-o", "/dev/null", url], check=False).returncode == 0:
            break
        time.sleep(0.1)
    out = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", url], capture_output=True, text=True,
                         check=True).stdout
    match = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if match is None or "Non-2xx" in out or "Socket errors" in out:
        raise SystemExit(f"wrk did not measure cleanly:\n{out}")
    return float(match[1])


def side(hooks: Hooks, mode: str, server: Path, args: argparse.Namespace) -> float:
    port = free_port()
    text = JOB.format(suffix=uuid.uuid4().hex[:8], mode=mode, port=port, python=sys.executable, server=server,
                      to="to = 8080" if mode == "bridge" else "")
    measured: list[float] = []
    until_started(hooks, text, 1, args.dir, on_started=lambda: measured.append(wrk(port, args.seconds,
                                                                                   args.connections)))
    return measured[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / ".data",
                        help="where herder's data dirs are made")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk)")
    args.dir.mkdir(parents=True, exist_ok=True)
    hooks = Hooks(load_plugins())
    load_before = load()
    with tempfile.TemporaryDirectory() as scratch:
        server = Path(scratch) / "server.py"
        server.write_text(SERVER)
        host, bridge = [], []
        for _ in range(args.rounds):  # interleaved, so both sides see the same machine
            host.append(side(hooks, "host", server, args))
            bridge.append(side(hooks, "bridge", server, args))
    ratio = statistics.median(bridge) / statistics.median(host)
    verdict = "met" if ratio >= 0.8 else "NOT met"
    table = "\n".join([
        f"| what | requests/s (median of {args.rounds}) |",
        "|---|---:|",
        f"| the server on a host port (host mode) | {statistics.median(host):,.0f} |",
        f"| the same server behind the mapped port of a bridge-mode allocation | {statistics.median(bridge):,.0f} |",
        f"| ratio bridge / host | {ratio:.2f} (target ≥ 0.8: {verdict}) |",
        "",
        f"`wrk -t2 -c{args.connections} -d{args.seconds}s` against 127.0.0.1. All rounds (requests/s, taking "
        f"turns): host {', '.join(f'{v:.0f}' for v in host)}; bridge {', '.join(f'{v:.0f}' for v in bridge)}. "
        f"herder's data dirs in `{where(args.dir)}`. Load average (1, 5, 15 min) before: {load_before}; "
        f"after: {load()}.",
    ])
    print(table)
    write_section("Portmap throughput", f"python bench/portmap_throughput.py --rounds {args.rounds}", table)


if __name__ == "__main__":
    main()
