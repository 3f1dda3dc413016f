"""Helpers for the rkt driver's tests: an ACI built from the host's static busybox, rkt as the tests see it."""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import uuid
from pathlib import Path
from typing import Any

try:
    from herder_rkt.cli import Rkt, parse_status_text, parse_table
except ImportError:  # the fixtures skip (or fail, under HERDER_REQUIRE) before any helper needs it
    Rkt = None  # type: ignore[assignment, misc]

BUSYBOX = Path("/bin/busybox")
APPLETS = ("sh", "echo", "printf", "sleep", "cat", "ls", "env", "id", "httpd", "hostname", "wc", "true", "false",
           "kill", "ps", "mkdir", "touch", "tr", "grep")
IMAGE_NAME = "example.local/busybox"
IMAGE_VERSION = "1.0.0"
FLY_STAGE1_NAME = "stage1-fly.aci"


def rkt_binary() -> str | None:
    return shutil.which("rkt")


def stage1_path() -> Path | None:
    """The fly stage1 image beside the rkt binary on PATH (as the peers folder holds them)."""
    binary = rkt_binary()
    if binary is None:
        return None
    path = Path(binary).resolve().parent / FLY_STAGE1_NAME
    return path if path.is_file() else None


def store_config(store: Path) -> dict[str, Any]:
    """The ``[plugin.rkt]`` table of a driver whose rkt keeps its state in ``store``; the test image is
    not signed, so tasks may run it with ``insecure_options = ["image"]``."""
    stage1 = stage1_path()
    # A loaded test machine can take seconds to start a pod: the default start_timeout (5s) is tested on its own.
    return {"dir": str(store / "data"), "local_config": str(store / "etc"), "system_config": str(store / "sys"),
            "start_timeout": "30s", "allow_insecure": True, **({"stage1_path": str(stage1)} if stage1 else {})}


def rkt_for(store: Path) -> Rkt:
    assert Rkt is not None, "herder-rkt is not installed"
    config = store_config(store)
    return Rkt(rkt_binary() or "rkt", dir=config["dir"], local_config=config["local_config"],
               system_config=config["system_config"])


def listed_pods(rkt: Rkt) -> list[tuple[str, str]]:
    """Every pod of the store, ``(uuid, state)``, from the text listing: the JSON one leaves out pods it
    cannot print (a prepare aborted by a kill)."""
    return [(row[0], row[4]) for row in parse_table(rkt.call("list", "--full", "--no-legend"))]


def app_pid(rkt: Rkt, uuid: str) -> int:
    """The host pid of a running pod's app (``rkt status``: under fly, the ``rkt run`` process it became)."""
    status = parse_status_text(rkt.call("status", uuid))
    assert status["state"] == "running", status
    return int(status["pid"])


def build_aci(path: Path, *, name: str = IMAGE_NAME, version: str = IMAGE_VERSION,
              exec: tuple[str, ...] = ("/bin/sh", "-c", "echo hello from the image")) -> Path:
    """Write an ACI to ``path``: a tar of a ``manifest`` and a ``rootfs/`` with the static busybox and its
    applets (``/bin/sh`` ...), ``/etc`` and ``/tmp``. A different ``version`` gives a different image."""
    manifest = {
        "acKind": "ImageManifest", "acVersion": "0.8.11", "name": name,
        "labels": [{"name": "version", "value": version}, {"name": "os", "value": "linux"},
                   {"name": "arch", "value": "amd64"}],
        "app": {"exec": list(exec), "user": "0", "group": "0",
                "ports": [{"name": "http", "protocol": "tcp", "port": 8080}]},
    }
    with tarfile.open(path, "w") as archive:
        _add_bytes(archive, "manifest", json.dumps(manifest).encode(), 0o644)
        for directory in ("rootfs", "rootfs/bin", "rootfs/etc", "rootfs/tmp"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if directory.endswith("tmp") else 0o755
            archive.addfile(info)
        archive.add(BUSYBOX, "rootfs/bin/busybox")
        for applet in APPLETS:
            link = tarfile.TarInfo(f"rootfs/bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            archive.addfile(link)
        _add_bytes(archive, "rootfs/etc/passwd", b"root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n",
                   0o644)
        _add_bytes(archive, "rootfs/etc/group", b"root:x:0:\nnogroup:x:65534:\n", 0o644)
    return path


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    archive.addfile(info, io.BytesIO(data))


def mounts_under(path: Path) -> list[str]:
    """The mount points under ``path``, as /proc/mounts lists them."""
    prefix = str(path)
    found = []
    for line in Path("/proc/mounts").read_text().splitlines():
        where = line.split()[1].replace("\\040", " ")
        if where == prefix or where.startswith(prefix + "/"):
            found.append(where)
    return found


def processes_rooted_under(path: Path) -> dict[int, str]:
    """Processes whose root directory is under ``path``: a pod's, chrooted in rkt's store (pid -> command)."""
    prefix = str(path)
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            root = os.readlink(entry / "root")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if root.startswith(prefix + "/") and cmdline:
            found[int(entry.name)] = cmdline
    return found


def sh(script: str, image: str = f"{IMAGE_NAME}:{IMAGE_VERSION}", **config: Any) -> dict[str, Any]:
    """A rkt task config running ``/bin/sh -c SCRIPT`` in ``image``."""
    return {"image": image, "command": "/bin/sh", "args": ["-c", script], "insecure_options": ["image"], **config}


def job(config: dict[str, Any], *, name: str | None = None, ports: list[dict[str, Any]] | None = None,
        **task: Any) -> dict[str, Any]:
    """A canonical batch job document: one group, one rkt task ``t``, failing at its first exit."""
    return {"job": {
        "name": name or f"rkt-{uuid.uuid4().hex[:8]}", "type": "batch",
        "groups": [{
            "name": "g",
            "restart": {"attempts": 0, "interval": "1m", "delay": "0s", "mode": "fail"},
            "tasks": [{"name": "t", "driver": "rkt", "config": config,
                       "resources": {"cpu": 100, "memory": 64, "network": {"ports": ports or []}}, **task}],
        }],
    }}
