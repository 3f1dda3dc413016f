"""The qemu driver through the command line: ``drivers``, and the example run, reattached after herder was
killed, then powered off gracefully by Ctrl-C."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.foreground import HerderRun
from tests.support.http import read_url

from .helpers import EXAMPLE, Guest

Herder = Callable[..., subprocess.CompletedProcess[str]]
PORT_LINE = re.compile(r"qemu-web\.web\[0\]: port http is ([\d.]+:\d+)")


def test_drivers_shows_qemu_with_its_attributes(qemu_driver: str, herder: Herder, config_file: Path) -> None:
    result = herder("drivers", "--json", "--config", str(config_file))
    assert result.returncode == 0, result.stderr
    qemu = {d["name"]: d for d in json.loads(result.stdout)["drivers"]}["qemu"]
    assert qemu["distribution"] == "herder-qemu"
    assert (qemu["detected"], qemu["healthy"]) == (True, True), qemu
    assert re.fullmatch(r"\d+\.\d+(\.\d+)*", qemu["attributes"]["driver.qemu.version"])
    assert qemu["attributes"]["driver.qemu.kvm"] in ("true", "false")
    assert "accelerator kvm" in qemu["description"]


@pytest.mark.slow
def test_the_example_serves_outlives_herder_and_powers_off_on_ctrl_c(guest: Guest, tmp_path: Path,
                                                                     config_file: Path) -> None:
    config_file.write_text(config_file.read_text() + f'[plugin.qemu]\nimage_paths = ["{guest.directory}"]\n')
    data_dir, job = tmp_path / "data", EXAMPLE / "web.hcl"
    args = ("--keep", "--var", f"guest={guest.directory}")
    first = HerderRun(job, data_dir, *args, config=config_file)
    first.wait_for("Started", timeout=60)
    address = PORT_LINE.search(first.stderr)
    assert address is not None, first.stderr
    url = f"http://{address[1]}/"
    assert read_url(url, timeout=90) == b"hello from a qemu guest in qemu-web.web[0]\n"
    first.kill()

    # herder is gone: the guest serves on
    assert read_url(url) == b"hello from a qemu guest in qemu-web.web[0]\n"

    second = HerderRun(job, data_dir, *args, config=config_file)
    try:
        second.wait_for("Reattached", timeout=60)
        assert second.of("Started") == [], "the virtual machine was started twice"
        assert read_url(url) == b"hello from a qemu guest in qemu-web.web[0]\n"
    finally:
        assert second.interrupt() == 0, second.stderr
    [log] = data_dir.glob("allocs/*/alloc/logs/vm.stdout.0")
    assert b"guest: power button pressed, powering off" in log.read_bytes()
    [terminated] = second.of("Terminated")
    assert terminated["details"].get("exit_code") == 0, terminated
