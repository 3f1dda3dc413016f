"""A test double of a Docker registry: just enough of the Registry HTTP API v2 for ``docker pull``.

It is not a registry. It is read-only, has no authentication, no TLS, no
catalog, no uploads, no manifest lists and no range requests; it serves, from
memory, images exported from the local engine with ``docker save``
(:meth:`Registry.add_image`), each as a schema 2 manifest whose layers are the
saved layer tars, gzipped:

- ``GET/HEAD /v2/``: 200 with ``Docker-Distribution-API-Version: registry/2.0``;
- ``GET/HEAD /v2/<name>/manifests/<tag or digest>``: the manifest, with
  ``Docker-Content-Digest``;
- ``GET/HEAD /v2/<name>/blobs/<digest>``: the config or a gzipped layer; with
  ``slow`` it is sent in chunks with a sleep between them, so that the daemon
  reports download progress and overlapping downloads can be seen;
- anything else: 404 with a registry-style JSON error (``MANIFEST_UNKNOWN``,
  ``BLOB_UNKNOWN``, ``NAME_UNKNOWN``), or 405 for methods other than GET/HEAD.

It counts the requests it answers, per method and path, so that tests can
say how many manifest and blob fetches a pull made.

It listens on plain HTTP on 127.0.0.1, at a random free port in 2000-12000
(the range the tests keep to): the Docker daemon treats registries in
127.0.0.0/8 as insecure, so it pulls from ``127.0.0.1:PORT/<name>:<tag>``
without TLS and without any daemon configuration.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import io
import json
import random
import re
import tarfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"
CONFIG_V1 = "application/vnd.docker.container.image.v1+json"
LAYER_GZIP = "application/vnd.docker.image.rootfs.diff.tar.gzip"

PORT_RANGE = (2000, 12000)
BIND_ATTEMPTS = 100
CHUNK = 64 * 1024
"""Bytes sent between two sleeps when blobs are slow."""

_PATH = re.compile(r"^/v2/(?P<name>[a-z0-9]+(?:[._/-][a-z0-9]+)*)/(?P<kind>manifests|blobs)/(?P<reference>[^/]+)$")


def sha256(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


@dataclass(frozen=True)
class ServedImage:
    """An image the registry serves, as ``docker pull`` asks for it."""

    ref: str
    """What to pull: ``127.0.0.1:PORT/<name>:<tag>``."""
    name: str
    tag: str
    manifest_digest: str
    config_digest: str
    """Also the image's id once pulled."""
    layer_digests: tuple[str, ...]
    """The gzipped layers' digests (not the uncompressed diff ids)."""

    @property
    def blobs(self) -> tuple[str, ...]:
        return (self.config_digest, *self.layer_digests)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    registry: Registry


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the daemon's HTTPS probe alone would log a 400 of binary junk."""

    def do_GET(self) -> None:
        self.server.registry._answer(self, body=True)

    def do_HEAD(self) -> None:
        self.server.registry._answer(self, body=False)

    def _refuse(self) -> None:
        self.close_connection = True  # the request's body, if any, is not read
        self.server.registry._error(self, 405, "UNSUPPORTED", "this registry is read-only", body=True)

    do_POST = do_PUT = do_PATCH = do_DELETE = _refuse


class Registry:
    """A read-only registry serving images from memory on ``127.0.0.1:PORT``; see the module docstring.

    ``slow``: seconds to sleep after each chunk of a blob (0: send it at once);
    may be changed while it runs. ``credentials`` (user, password): every
    request must carry them (HTTP basic authentication), as a private
    registry wants; a request without them is answered 401.
    """

    def __init__(self, slow: float = 0.0, credentials: tuple[str, str] | None = None) -> None:
        self.slow = slow
        self._authorization = ("Basic " + base64.b64encode(":".join(credentials).encode()).decode()
                               if credentials else None)
        self._lock = threading.Lock()
        self._blobs: dict[str, bytes] = {}
        self._manifests: dict[str, bytes] = {}
        self._repositories: dict[str, dict[str, str]] = {}  # name -> tag -> manifest digest
        self._repository_blobs: dict[str, set[str]] = {}  # name -> the digests its manifests refer to
        self._counts: Counter[tuple[str, str]] = Counter()
        self.served: list[ServedImage] = []
        """Every image added, in order."""
        self._blobs_in_flight = 0
        self.max_blobs_in_flight = 0
        """The most blob downloads that were in progress at once."""
        self._server = self._bind()
        self._server.registry = self
        self._thread: threading.Thread | None = None

    @staticmethod
    def _bind() -> _Server:
        for _ in range(BIND_ATTEMPTS):
            port = random.randint(*PORT_RANGE)
            with contextlib.suppress(OSError):
                return _Server(("127.0.0.1", port), _Handler)
        raise RuntimeError(f"no free port in {PORT_RANGE[0]}-{PORT_RANGE[1]} after {BIND_ATTEMPTS} attempts")

    @property
    def host(self) -> str:
        """``127.0.0.1:PORT``, the registry part of the references it serves."""
        return f"127.0.0.1:{self._server.server_address[1]}"

    # -- life ------------------------------------------------------------------------

    def start(self) -> Registry:
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"registry-{self.host}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(10)
        self._server.server_close()

    def __enter__(self) -> Registry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- content ---------------------------------------------------------------------

    def add_image(self, client: Any, ref_in_engine: str, name: str, tag: str) -> ServedImage:
        """Serve the engine's image ``ref_in_engine`` as ``<name>:<tag>``.

        The image is exported with ``docker save``; its config is served as is
        (so the pulled image has the same id) and each layer tar gzipped.
        """
        saved = io.BytesIO()
        for chunk in client.images.get(ref_in_engine).save(named=False):
            saved.write(chunk)
        saved.seek(0)
        with tarfile.open(fileobj=saved) as archive:

            def read(member: str) -> bytes:
                extracted = archive.extractfile(member)  # follows the links docker save makes for repeated layers
                if extracted is None:
                    raise ValueError(f"{member} in the saved image of {ref_in_engine} is not a file")
                return extracted.read()

            [entry] = json.loads(read("manifest.json"))
            config = read(entry["Config"])
            layers = [gzip.compress(read(path), compresslevel=1, mtime=0) for path in entry["Layers"]]
        manifest = json.dumps({
            "schemaVersion": 2,
            "mediaType": MANIFEST_V2,
            "config": {"mediaType": CONFIG_V1, "size": len(config), "digest": sha256(config)},
            "layers": [{"mediaType": LAYER_GZIP, "size": len(layer), "digest": sha256(layer)} for layer in layers],
        }).encode()
        served = ServedImage(ref=f"{self.host}/{name}:{tag}", name=name, tag=tag, manifest_digest=sha256(manifest),
                             config_digest=sha256(config), layer_digests=tuple(sha256(layer) for layer in layers))
        with self._lock:
            for blob in (config, *layers):
                self._blobs[sha256(blob)] = blob
            self._manifests[served.manifest_digest] = manifest
            self._repositories.setdefault(name, {})[tag] = served.manifest_digest
            self._repository_blobs.setdefault(name, set()).update(served.blobs)
            self.served.append(served)
        return served

    # -- what was asked --------------------------------------------------------------

    def requests(self, path: str, method: str | None = None) -> int:
        """How many requests (of ``method``, or of any) were answered for ``path``."""
        with self._lock:
            return sum(n for (m, p), n in self._counts.items() if p == path and method in (None, m))

    def manifest_requests(self, image: ServedImage, method: str | None = "GET", *, by: str = "tag") -> int:
        """Requests for the image's manifest by its tag (``by="tag"``) or by its digest (``by="digest"``)."""
        reference = image.tag if by == "tag" else image.manifest_digest
        return self.requests(f"/v2/{image.name}/manifests/{reference}", method)

    def blob_requests(self, image: ServedImage, digest: str, method: str | None = "GET") -> int:
        return self.requests(f"/v2/{image.name}/blobs/{digest}", method)

    def all_requests(self) -> dict[tuple[str, str], int]:
        """Every (method, path) answered, with its count."""
        with self._lock:
            return dict(self._counts)

    # -- answers ---------------------------------------------------------------------

    def _answer(self, handler: _Handler, body: bool) -> None:
        path = handler.path.split("?", 1)[0]
        with self._lock:
            self._counts[handler.command, path] += 1
        if self._authorization is not None and handler.headers.get("Authorization") != self._authorization:
            self._error(handler, 401, "UNAUTHORIZED", "authentication required", body=body,
                        headers={"WWW-Authenticate": 'Basic realm="herder-test"'})
            return
        if path in ("/v2", "/v2/"):
            self._send(handler, 200, b"{}", "application/json", body=body)
            return
        match = _PATH.match(path)
        if match is None:
            self._error(handler, 404, "NAME_UNKNOWN", "repository name not known to registry", body=body)
            return
        name, kind, reference = match["name"], match["kind"], match["reference"]
        with self._lock:
            tags = self._repositories.get(name)
            if tags is None:
                found = None
            elif kind == "manifests":
                digest = tags.get(reference, reference)
                found = self._manifests.get(digest) if digest in tags.values() else None
            else:
                digest = reference
                found = self._blobs.get(digest) if digest in self._repository_blobs[name] else None
        if tags is None:
            self._error(handler, 404, "NAME_UNKNOWN", "repository name not known to registry", body=body,
                        detail={"name": name})
        elif found is None and kind == "manifests":
            self._error(handler, 404, "MANIFEST_UNKNOWN", "manifest unknown", body=body,
                        detail={"Digest" if reference.startswith("sha256:") else "Tag": reference})
        elif found is None:
            self._error(handler, 404, "BLOB_UNKNOWN", "blob unknown to registry", body=body,
                        detail={"Digest": reference})
        elif kind == "manifests":
            self._send(handler, 200, found, MANIFEST_V2, body=body, digest=digest)
        else:
            self._send_blob(handler, found, digest, body=body)

    @staticmethod
    def _send(handler: _Handler, status: int, data: bytes, content_type: str, *, body: bool,
              digest: str = "", headers: dict[str, str] | None = None) -> None:
        handler.send_response(status)
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.send_header("Docker-Distribution-API-Version", "registry/2.0")
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        if digest:
            handler.send_header("Docker-Content-Digest", digest)
            handler.send_header("ETag", f'"{digest}"')
        handler.end_headers()
        if body:
            handler.wfile.write(data)

    def _error(self, handler: _Handler, status: int, code: str, message: str, *, body: bool,
               detail: dict[str, str] | None = None, headers: dict[str, str] | None = None) -> None:
        error = {"errors": [{"code": code, "message": message, "detail": detail or {}}]}
        self._send(handler, status, json.dumps(error).encode(), "application/json", body=body, headers=headers)

    def _send_blob(self, handler: _Handler, data: bytes, digest: str, *, body: bool) -> None:
        handler.send_response(200)
        handler.send_header("Docker-Distribution-API-Version", "registry/2.0")
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("Docker-Content-Digest", digest)
        handler.send_header("ETag", f'"{digest}"')
        handler.end_headers()
        if not body:
            return
        with self._lock:
            self._blobs_in_flight += 1
            self.max_blobs_in_flight = max(self.max_blobs_in_flight, self._blobs_in_flight)
        try:
            slow = self.slow
            if not slow:
                handler.wfile.write(data)
                return
            for start in range(0, len(data), CHUNK):
                handler.wfile.write(data[start:start + CHUNK])
                handler.wfile.flush()
                time.sleep(slow)  # deliberate sleep: a slow registry is what the test asks for
        except (BrokenPipeError, ConnectionResetError):  # the daemon gave up on this download
            handler.close_connection = True
        finally:
            with self._lock:
                self._blobs_in_flight -= 1
