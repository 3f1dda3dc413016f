"""qemu start and stop: a guest serving HTTP through herder's qemu driver, against the same QEMU run bare.

    python bench/qemu_start.py [--rounds 3]

The guest is the example's (``examples/qemu-web/build-guest.py``, built
into a temporary directory): the host's kernel and a busybox initramfs whose
``/init`` serves a page on port 80. Each round boots it twice, one after the
other, under TCG:

- bare: ``qemu-system-x86_64`` started with ``subprocess`` with the command
  line the driver builds (the same machine, memory, console, QMP socket,
  user network with the port forwarded), then powered off through QMP;
- through herder: a task of the qemu driver with ``graceful_shutdown``,
  through the driver conformance kit's harness (herder's hooks, the task's
  directory and environment, the supervisor), then stopped with ``kill``.

Each side is timed from the start until the page is read through the host
port (``read``), and from the stop until QEMU has exited (``stop``). Best
of ROUNDS each. A last row boots the compressed kernel (bzImage) bare, for
what the ELF ``vmlinux`` the builder extracts saves. The result replaces
the "qemu start" section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from herder_qemu.driver import qemu_version
from herder_qemu.qmp import powerdown

from herder.testing import DriverHarness

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from results import write_section  # noqa: E402

from tests.support.http import read_url  # noqa: E402

BUILDER = REPO / "examples" / "qemu-web" / "build-guest.py"
MEMORY = 192
APPEND = "console=ttyS0 quiet panic=-1"
TIMEOUT = 120.0
PAGE_POLL = 0.02
"""QEMU accepts connections before the guest listens: the page is asked for again this often,
so that the retries add little to the time measured."""


def free_port() -> int:
    for port in range(9100, 12000):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise SystemExit("no free port in 9100-12000")


def bare(kernel: Path, initrd: Path, workdir: Path) -> tuple[float, float]:
    """QEMU alone: seconds until the page is read, and from the power button until QEMU exited."""
    port = free_port()
    argv = ["qemu-system-x86_64", "-machine", "type=pc,accel=tcg", "-m", f"{MEMORY}M", "-display", "none",
            "-serial", "stdio", "-monitor", "none", "-qmp", "unix:qmp.sock,server=on,wait=off",
            "-kernel", str(kernel), "-initrd", str(initrd), "-append", APPEND,
            "-netdev", f"user,id=user.0,hostfwd=tcp:127.0.0.1:{port}-:80,hostfwd=udp:127.0.0.1:{port}-:80",
            "-device", "virtio-net-pci,netdev=user.0"]
    (workdir / "qmp.sock").unlink(missing_ok=True)
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=workdir, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        read_url(f"http://127.0.0.1:{port}/", TIMEOUT, PAGE_POLL)
        served = time.perf_counter() - start
        start = time.perf_counter()
        powerdown(workdir / "qmp.sock", 5)
        proc.wait(TIMEOUT)
        return served, time.perf_counter() - start
    finally:
        proc.kill()
        proc.wait()


def through_herder(harness: DriverHarness, kernel: Path, initrd: Path) -> tuple[float, float]:
    """A task of the qemu driver: seconds from its start until the page is read, and from kill until it exited."""
    config = {"kernel": str(kernel), "initrd": str(initrd), "append": APPEND, "graceful_shutdown": True,
              "port_map": {"http": 80}}
    run = harness.task(config, kill_timeout="60s",
                       resources={"memory": MEMORY, "network": {"ports": [{"label": "http"}]}})
    start = time.perf_counter()
    run.start()
    [port] = run.ctx.ports
    read_url(f"http://{port.host_ip}:{port.value}/", TIMEOUT, PAGE_POLL)
    served = time.perf_counter() - start
    start = time.perf_counter()
    run.kill()
    stopped = time.perf_counter() - start
    assert run.wait(0) is not None
    run.cleanup()
    return served, stopped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="herder-bench-qemu-") as root:
        guest = Path(root, "guest")
        subprocess.run([sys.executable, str(BUILDER), "--out", str(guest)], check=True, capture_output=True)
        kernel, initrd = guest / "kernel", guest / "initrd"
        bzimage = sorted(Path("/boot").glob("vmlinuz-*"))[-1]
        with DriverHarness("qemu", {"image_paths": [str(guest), "/boot"]}, data_dir=Path(root, "data")) as harness:
            if not harness.fingerprint.healthy:
                raise SystemExit(f"the qemu driver is not healthy: {harness.fingerprint.description}")
            plain, herder, compressed = [], [], []
            for _ in range(args.rounds):  # interleaved, so both sides see the same machine
                plain.append(bare(kernel, initrd, Path(root)))
                herder.append(through_herder(harness, kernel, initrd))
            compressed.append(bare(bzimage, initrd, Path(root)))
    load = os.getloadavg()[0]

    def best(samples: list[tuple[float, float]], index: int) -> float:
        return min(sample[index] for sample in samples)

    def ms(value: float) -> str:
        return f"{value * 1e3:.0f} ms"

    table = "\n".join([
        f"| what (TCG, {MEMORY} MB, best of {args.rounds}) | start until the page is read | stop until QEMU exited |",
        "|---|---|---|",
        f"| bare `qemu-system-x86_64`, ELF vmlinux, powered off through QMP | {ms(best(plain, 0))} "
        f"| {ms(best(plain, 1))} |",
        f"| qemu task through herder (hooks, supervisor), `graceful_shutdown`, `kill` | {ms(best(herder, 0))} "
        f"| {ms(best(herder, 1))} |",
        f"| herder - bare | {ms(best(herder, 0) - best(plain, 0))} | {ms(best(herder, 1) - best(plain, 1))} |",
        f"| bare, compressed kernel ({bzimage.name}), once | {ms(compressed[0][0])} | {ms(compressed[0][1])} |",
        "",
        f"All rounds (ms, read/stop): bare {json.dumps([[round(a * 1e3), round(b * 1e3)] for a, b in plain])}; "
        f"herder {json.dumps([[round(a * 1e3), round(b * 1e3)] for a, b in herder])}. "
        f"QEMU {qemu_version('qemu-system-x86_64')}; load average {load:.1f} when done "
        "(the machine is shared: TCG times grow with the load).",
    ])
    print(table)
    write_section("qemu start", "python bench/qemu_start.py", table)


if __name__ == "__main__":
    main()
