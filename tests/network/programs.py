"""The programs the network tests' tasks run: a server that tells its environment, a client of it."""

from __future__ import annotations

from pathlib import Path

# Serves its NOMAD_* variables as JSON on every address of its namespace, at NOMAD_PORT_http.
SERVER = """
import http.server, json, os

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({k: v for k, v in os.environ.items() if k.startswith("NOMAD_")}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

http.server.ThreadingHTTPServer(("", int(os.environ["NOMAD_PORT_http"])), Handler).serve_forever()
"""

# Reaches its sibling on 127.0.0.1 (retrying while it starts), prints what it answered, then waits.
CLIENT = """
import os, signal, time, urllib.request
url = "http://127.0.0.1:%s/" % os.environ["NOMAD_PORT_http"]
while True:  # until the sibling listens, however long a loaded machine takes to start it
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            print("sibling said", answer.read().decode(), flush=True)
            break
    except OSError:
        time.sleep(0.1)  # the sibling is starting: a retry interval, not a wait for it
signal.pause()
"""


def write_programs(directory: Path) -> tuple[Path, Path]:
    server, client = directory / "server.py", directory / "client.py"
    server.write_text(SERVER)
    client.write_text(CLIENT)
    return server, client
