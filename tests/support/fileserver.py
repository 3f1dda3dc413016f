"""A real HTTP file server on a loopback port in 2000-12000, for artifact tests.

Files are served from a mapping of URL paths to bytes; the server records every
request (path and headers), can fail a path a number of times first (HTTP
503), and can insist on a header.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class FileServer:
    files: dict[str, bytes] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    """Path -> how many more requests of it get a 503."""
    required_headers: dict[str, str] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    port: int = 0
    _server: ThreadingHTTPServer | None = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def hits(self, path: str) -> int:
        return sum(1 for requested, _ in self.requests if requested.split("?")[0] == path)

    def start(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                owner.requests.append((self.path, dict(self.headers)))
                if owner.failures.get(path, 0) > 0:
                    owner.failures[path] -= 1
                    self.send_error(503, "try again")
                    return
                if any(self.headers.get(k) != v for k, v in owner.required_headers.items()):
                    self.send_error(401, "missing header")
                    return
                body = owner.files.get(path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        for _ in range(50):
            port = random.randint(2000, 12000)
            try:
                self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
            except OSError:
                continue
            self.port = port
            break
        else:
            raise RuntimeError("no free port in 2000-12000 for the file server")
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def serve() -> Iterator[FileServer]:
    """For a fixture: a started server, stopped afterwards."""
    server = FileServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
