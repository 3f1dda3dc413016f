"""Virtual machines as tasks: the console, the network, memory, power-off, images, and what is refused."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import pytest
from herder_qemu.qmp import SOCKET

from herder import DriverError, RecoverableError
from herder.testing import DriverHarness, TaskRun
from herder.testing.plugin import HarnessFactory
from tests.support.http import read_url
from tests.support.waiting import wait_for

from .helpers import APPEND, ARGS_ALLOWLIST, DEBUG_EXIT, Guest, boot_sector

POWER_OFF = b"guest: power button pressed, powering off"
DISK_LINE = b"herder-disk: booted"


def wait_for_output(run: TaskRun, text: bytes, timeout: float = 60.0) -> bytes:
    """The task's stdout once it holds ``text``."""
    def holding() -> bytes | None:
        output = run.output()
        return output if text in output else None

    return wait_for(holding, timeout, lambda: f"{text!r} in the console output: {run.output()[-2000:]!r}",
                    interval=0.1)


@pytest.fixture
def harness(guest: Guest, driver_harness: HarnessFactory) -> DriverHarness:
    return driver_harness("qemu", guest.plugin_config)


@pytest.mark.slow
def test_serves_http_through_its_port_sees_its_memory_and_powers_off_gracefully(harness: DriverHarness,
                                                                                 guest: Guest) -> None:
    config = guest.config(port_map={"http": 80}, graceful_shutdown=True,
                          append=f"{APPEND} herder_alloc=${{NOMAD_ALLOC_NAME}}")
    run = harness.task(config, kill_timeout="30s",
                       resources={"memory": 160, "network": {"ports": [{"label": "http"}]}})
    run.prestart()
    assert run.ctx.env["NOMAD_PORT_http"] == "80"
    run.start()
    [port] = run.ctx.ports
    page = read_url(f"http://{port.host_ip}:{port.value}/", timeout=90)
    assert page == f"hello from a qemu guest in {run.ctx.alloc_name}\n".encode()

    memory = re.search(rb"MemTotal: (\d+) kB", run.output())
    assert memory is not None, run.output()
    assert 100 * 1024 < int(memory[1]) <= 160 * 1024, f"the guest of a 160 MB task sees {memory[0]!r}"
    assert (run.ctx.task_dir.secrets_dir / SOCKET).is_socket()

    started = time.monotonic()
    run.kill()
    elapsed = time.monotonic() - started
    result = run.wait(0)
    assert result is not None and result.successful, result
    assert elapsed < 30, f"the guest took {elapsed:.1f}s to power off: it was killed"
    assert POWER_OFF in run.output(), run.output()[-2000:]
    run.cleanup()
    assert not (run.ctx.task_dir.secrets_dir / SOCKET).exists()


@pytest.mark.slow
def test_forwards_udp_and_without_graceful_shutdown_qemu_gets_the_kill_signal(harness: DriverHarness,
                                                                             guest: Guest) -> None:
    """The udp side of a port is QEMU's too (the guest's busybox has no udp server to reach end to end)."""
    run = harness.task(guest.config("sleep 3600", port_map={"dns": 53}), kill_timeout="30s", kill_signal="SIGTERM",
                       resources={"network": {"ports": [{"label": "dns"}]}})
    run.start()
    wait_for_output(run, b"guest: up")
    [port] = run.ctx.ports
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken, pytest.raises(OSError, match="in use"):
        taken.bind((port.host_ip, port.value))
    run.kill()
    assert run.wait(30) is not None
    assert POWER_OFF not in run.output()
    assert b"terminating on signal 15" in run.output("stderr")


@pytest.mark.parametrize("where", ["task_dir", "image_paths"])
def test_boots_a_raw_disk_image(guest: Guest, driver_harness: HarnessFactory, readable_dir: Path,
                                where: str) -> None:
    images = readable_dir
    harness = driver_harness("qemu", {"image_paths": [str(images)], "args_allowlist": ARGS_ALLOWLIST})
    image = "local/disk.img" if where == "task_dir" else str(images / "disk.img")
    run = harness.task({"image_path": image, "args": ["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"]})
    disk = run.ctx.task_dir.dir / image if where == "task_dir" else Path(image)
    disk.write_bytes(boot_sector(DISK_LINE, 2))
    run.start()
    result = run.wait(60)
    assert result is not None and result.exit_code == 5, (result, run.output("stderr"))
    assert DISK_LINE in run.output()


def test_a_taken_host_port_is_a_recoverable_error(harness: DriverHarness, guest: Guest) -> None:
    run = harness.task(guest.config("sleep 3600", port_map={"http": 80}),
                       resources={"network": {"ports": [{"label": "http"}]}})
    run.prestart()
    [port] = run.ctx.ports
    with socket.socket() as taken:
        taken.bind((port.host_ip, port.value))
        taken.listen()
        with pytest.raises(RecoverableError, match=rf"could not forward a host port.*{port.value}"):
            run.start()


@pytest.mark.parametrize("path", ["/etc/hostname", "../../../../etc/hostname", "local/../../../x.img"])
def test_an_image_outside_the_task_dir_and_image_paths_is_refused(harness: DriverHarness, path: str) -> None:
    run = harness.task({"image_path": path})
    with pytest.raises(DriverError, match=r"job\.group\[\w+\]\.task\[\w+\]\.config\.image_path: .*outside the "
                                          r"task directory and the directories \[plugin\.qemu\] image_paths"):
        run.prestart()


def test_a_missing_image_is_named(harness: DriverHarness) -> None:
    run = harness.task({"image_path": "local/nothing.qcow2"})
    with pytest.raises(DriverError, match=r"config\.image_path: no such file: local/nothing\.qcow2"):
        run.prestart()


def test_a_disk_image_and_a_kernel_together_are_refused(harness: DriverHarness, guest: Guest) -> None:
    run = harness.task({**guest.config(), "image_path": "local/disk.img"})
    with pytest.raises(DriverError, match=r"config\.image_path and config\.kernel: give a disk image or a kernel"):
        run.prestart()


def test_a_port_map_label_that_is_not_a_port_is_refused(harness: DriverHarness, guest: Guest) -> None:
    run = harness.task(guest.config(port_map={"http": 80, "admin": 81}),
                       resources={"network": {"ports": [{"label": "http"}]}})
    with pytest.raises(DriverError, match=r"config\.port_map: admin not a port of the task \(ports: http\)"):
        run.prestart()


def test_kvm_is_refused_where_the_probe_says_it_does_not_work(harness: DriverHarness, guest: Guest) -> None:
    if harness.fingerprint.attributes["driver.qemu.kvm"] == "true":
        pytest.skip("KVM works on this host")
    run = harness.task(guest.config(accelerator="kvm"))
    with pytest.raises(DriverError, match=r"config\.accelerator: kvm does not work on this host: .+"):
        run.prestart()


def test_a_machine_qemu_cannot_set_up_fails_the_start_with_its_message(harness: DriverHarness, guest: Guest) -> None:
    run = harness.task(guest.config("true", args=("-device", "no-such-device")))
    with pytest.raises(DriverError, match=r"QEMU could not start the machine: .*'no-such-device'"):
        run.start()


def test_a_guest_done_before_qemu_was_reached_is_no_failure(guest: Guest, driver_harness: HarnessFactory) -> None:
    """A disk that ends QEMU at once, through isa-debug-exit, exits 3 as a task would."""
    harness = driver_harness("qemu", {"args_allowlist": ARGS_ALLOWLIST})
    run = harness.task({"image_path": "local/disk.img", "args": list(DEBUG_EXIT)})
    (run.ctx.task_dir.dir / "local" / "disk.img").write_bytes(boot_sector(b"", 1))
    run.start()
    result = run.wait(60)
    assert result is not None and result.exit_code == 3, result


def test_args_outside_the_allowlist_are_refused(guest: Guest, driver_harness: HarnessFactory) -> None:
    harness = driver_harness("qemu", {**guest.plugin_config, "args_allowlist": ["-smp", "-device"]})
    allowed = harness.task(guest.config(args=("-smp", "1")))
    allowed.prestart()
    refused = harness.task(guest.config(args=("-smp", "1", "-drive", "file=/dev/sda", "-usb")))
    with pytest.raises(DriverError, match=r"config\.args: -drive, -usb not allowed by \[plugin\.qemu\] "
                                          r"args_allowlist \(-smp, -device\)"):
        refused.prestart()
