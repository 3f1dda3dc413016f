"""examples/artifact-web: a Nomad job file that downloads, checks, unpacks, configures and runs a program.

The example's archive is served by a local HTTP server; ``herder run`` runs the
job file unchanged but for the server's address (a job variable).
"""

from __future__ import annotations

import gzip
import importlib.util
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fileserver import FileServer, serve
from tests.support.http import read_url

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "artifact-web"


@pytest.fixture
def server() -> Iterator[FileServer]:
    yield from serve()


def test_the_archive_is_the_one_build_py_makes_from_app() -> None:
    spec = importlib.util.spec_from_file_location("build", EXAMPLE / "build.py")
    assert spec is not None and spec.loader is not None
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    # The tar inside, not the gzip bytes: the gzip header's OS byte depends on the Python
    # version (3.13 writes 255, "unknown"), and the archive is committed once.
    assert gzip.decompress(build.build()) == gzip.decompress((EXAMPLE / "app.tar.gz").read_bytes())


def test_the_example_downloads_configures_and_serves(server: FileServer, config_file: Path) -> None:
    server.files["/app.tar.gz"] = (EXAMPLE / "app.tar.gz").read_bytes()
    proc = subprocess.Popen([sys.executable, "-m", "herder", "run", "--config", str(config_file),
                             "--var", f"artifact_server=http://127.0.0.1:{server.port}", str(EXAMPLE / "job.nomad")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        match = re.search(r"port http is ([\d.]+):(\d+)", first)
        assert match, first
        assert read_url(f"http://{match[1]}:{match[2]}/") == b"Hello from greeter of ARTIFACT-WEB\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "Downloading Artifacts" in out and "Started" in out
    assert server.hits("/app.tar.gz") == 1
