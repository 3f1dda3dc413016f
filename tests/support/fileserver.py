"""A real HTTP(S) file server on a loopback port in 2000-12000, for artifact tests.

Files are served from a mapping of URL paths to bytes; the server records every
request (path and headers), can fail a path a number of times first (HTTP
503), can insist on a header (HTTP 401 without it, asking for Basic
credentials, git repositories included), redirect a path, run a test's callback before it
sends a body (so a test acts at a known point of a download, without
sleeping), and trickle a body one byte at a time. With ``tls`` (a certificate
and its key, as :func:`tests.support.tls.make_certificates` makes them) it serves HTTPS. With ``git_root``,
paths under ``/git/`` are git repositories of that directory, served by
``git http-backend`` (git's smart HTTP protocol, as a forge serves it).
"""

from __future__ import annotations

import os
import random
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class FileServer:
    files: dict[str, bytes] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    """Path -> how many more requests of it get a 503."""
    required_headers: dict[str, str] = field(default_factory=dict)
    redirects: dict[str, str] = field(default_factory=dict)
    """Path -> the URL a request of it is sent to (HTTP 302)."""
    before_body: dict[str, Callable[[], None]] = field(default_factory=dict)
    """Path -> called in the server's thread after the headers of its response, before its body."""
    trickle: dict[str, float] = field(default_factory=dict)
    """Path -> seconds between two bytes of its body."""
    tls: tuple[Path, Path] | None = None
    """(certificate, key): serve HTTPS."""
    git_root: Path | None = None
    """Serve the git repositories of this directory under ``/git/``."""
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    port: int = 0
    _server: ThreadingHTTPServer | None = None
    _stopped: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    def hits(self, path: str) -> int:
        return sum(1 for requested, _ in self.requests if requested.split("?")[0] == path)

    def start(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                owner.requests.append((self.path, dict(self.headers)))
                if self.authorized():
                    self.git_backend()

            def authorized(self) -> bool:
                """Whether the request has the required headers; if not, it is answered 401."""
                if all(self.headers.get(k) == v for k, v in owner.required_headers.items()):
                    return True
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="files"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return False

            def git_backend(self) -> None:
                """Run ``git http-backend`` as the CGI program it is."""
                assert owner.git_root is not None
                path, _, query = self.path.partition("?")
                length = int(self.headers.get("Content-Length") or 0)
                env = {"PATH": os.environ["PATH"], "GIT_PROJECT_ROOT": str(owner.git_root),
                       "GIT_HTTP_EXPORT_ALL": "1", "REQUEST_METHOD": self.command,
                       "PATH_INFO": path.removeprefix("/git"), "QUERY_STRING": query,
                       "CONTENT_TYPE": self.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(length),
                       "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""), "REMOTE_ADDR": "127.0.0.1"}
                result = subprocess.run(["git", "http-backend"], input=self.rfile.read(length), env=env,
                                        capture_output=True, check=False)
                head, _, body = result.stdout.partition(b"\r\n\r\n")
                headers = [line.split(b":", 1) for line in head.split(b"\r\n") if b":" in line]
                status = next((int(value.split()[0]) for name, value in headers if name.lower() == b"status"), 200)
                self.send_response(status)
                for name, value in headers:
                    if name.lower() != b"status":
                        self.send_header(name.decode(), value.strip().decode())
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                owner.requests.append((self.path, dict(self.headers)))
                if owner.git_root is not None and path.startswith("/git/"):
                    if self.authorized():
                        self.git_backend()
                    return
                if owner.failures.get(path, 0) > 0:
                    owner.failures[path] -= 1
                    self.send_error(503, "try again")
                    return
                if not self.authorized():
                    return
                if path in owner.redirects:
                    self.send_response(302)
                    self.send_header("Location", owner.redirects[path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = owner.files.get(path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if path in owner.before_body:
                    owner.before_body[path]()
                if path in owner.trickle:
                    self.send_slowly(body, owner.trickle[path])
                else:
                    self.wfile.write(body)

            def send_slowly(self, body: bytes, interval: float) -> None:
                for offset in range(len(body)):
                    if owner._stopped.wait(interval):
                        return
                    try:
                        self.wfile.write(body[offset:offset + 1])
                        self.wfile.flush()
                    except OSError:  # the client gave up
                        return

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
        if self.tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*self.tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._stopped.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def serve(tls: tuple[Path, Path] | None = None, git_root: Path | None = None) -> Iterator[FileServer]:
    """For a fixture: a started server, stopped afterwards."""
    server = FileServer(tls=tls, git_root=git_root)
    server.start()
    try:
        yield server
    finally:
        server.stop()
