"""``network { mode = "cni/NAME" }``: the operator's configuration list from ``[client] cni_config_dir``."""

from __future__ import annotations

import json
import random
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.network.test_bridge import alloc_ids, host_port, write_job
from tests.support.consul import free_ports
from tests.support.foreground import HerderRun
from tests.support.http import read_url
from tests.support.network import leftovers


@pytest.fixture
def operator_network(tmp_path: Path) -> Iterator[tuple[Path, str, Path]]:
    """A configuration directory holding ``testnet``: a bridge and a subnet of the test's own, leases
    kept in the test's directory; the bridge is removed after the test."""
    bridge = f"hdt{uuid.uuid4().hex[:8]}"
    subnet = f"10.{random.randint(100, 199)}.{random.randint(0, 255)}.0/24"
    leases = tmp_path / "leases"
    config_dir = tmp_path / "cni"
    config_dir.mkdir()
    (config_dir / "00-other.conf").write_text(json.dumps({"cniVersion": "0.4.0", "name": "other",
                                                           "type": "loopback"}))
    (config_dir / "10-testnet.conflist").write_text(json.dumps({"cniVersion": "0.4.0", "name": "testnet", "plugins": [
        {"type": "loopback"},
        {"type": "bridge", "bridge": bridge, "isGateway": True, "ipMasq": False,
         "ipam": {"type": "host-local", "ranges": [[{"subnet": subnet}]], "dataDir": str(leases)}},
        {"type": "portmap", "capabilities": {"portMappings": True}, "snat": True},
    ]}))
    try:
        yield config_dir, subnet, leases
    finally:
        subprocess.run(["ip", "link", "delete", bridge], capture_output=True, timeout=30, check=False)


def test_the_operators_configuration_attaches_the_allocation(tmp_path: Path, config_file: Path,
                                                             operator_network: tuple[Path, str, Path]) -> None:
    config_dir, subnet, leases = operator_network
    config_file.write_text(config_file.read_text() + f'[client]\ncni_config_dir = "{config_dir}"\n')
    [inside] = free_ports(1)
    data_dir = tmp_path / "data"
    run = HerderRun(write_job(tmp_path, inside, mode="cni/testnet"), data_dir, config=config_file)
    try:
        run.wait_for("Started", count=2, timeout=60)
        [alloc_id] = alloc_ids(data_dir)
        address, port = host_port(run)
        env = json.loads(read_url(f"http://{address}:{port}/"))
        assert env["NOMAD_ALLOC_IP_http"].startswith(subnet.rsplit(".", 1)[0] + ".")
        assert any(alloc_id in lease.read_text() for lease in leases.glob("*/*"))
    finally:
        assert run.interrupt() == 0, run.stderr
    assert leftovers(alloc_id, lease_dirs=[leases]) == []


def test_an_unknown_configuration_fails_the_allocation_saying_why(tmp_path: Path, config_file: Path,
                                                                  operator_network: tuple[Path, str, Path]) -> None:
    config_dir, _, _ = operator_network
    config_file.write_text(config_file.read_text() + f'[client]\ncni_config_dir = "{config_dir}"\n')
    run = HerderRun(write_job(tmp_path, free_ports(1)[0], mode="cni/nosuch"), tmp_path / "data", config=config_file)
    [failure] = run.wait_for("Setup Failure", timeout=60)[:1]
    assert f"no CNI network configuration named 'nosuch' in {config_dir}" in failure["message"], failure
    run.finish()
