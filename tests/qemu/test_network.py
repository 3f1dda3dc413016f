"""A virtual machine in its allocation's network namespace: QEMU runs there, and its user-mode network's
forwards listen there on each port's ``to``, which the bridge's port mapping carries the host port to
(through ``herder run`` with the real CNI plugins: host port -> namespace -> guest).

That the guest's own connections leave from the namespace is the conformance kit's test (test_contract.py).
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from pathlib import Path

import pytest

from herder.supervisor.netns import entered
from herder.testing import DriverHarness
from herder.testing.plugin import HarnessFactory
from tests.support.consul import free_ports
from tests.support.foreground import HerderRun, task_dirs
from tests.support.http import read_url
from tests.support.network import leftovers, remove_leftovers, require_networking
from tests.support.waiting import wait_for

from .helpers import APPEND, Guest

INSIDE = 8080
"""The port's ``to``: where the forward listens in the namespace."""
JOB = """
job "vm" {{
  group "g" {{
    network {{
      mode = "bridge"
      port "http" {{ to = {inside} }}
    }}
    task "guest" {{
      driver       = "qemu"
      kill_timeout = "2s"
      config {{
        kernel   = "{kernel}"
        initrd   = "{initrd}"
        append   = "{append} herder_alloc=${{NOMAD_ALLOC_NAME}}"
        port_map {{ http = 80 }}
      }}
      resources {{ memory = 160 }}
    }}
  }}
}}
"""
PORT_LINE = re.compile(r"vm\.g\[0\]: port http is ([\d.]+):(\d+)")


@pytest.mark.slow
def test_the_forward_listens_inside_the_namespace_on_the_ports_to(driver_harness: HarnessFactory,
                                                                   guest: Guest) -> None:
    harness: DriverHarness = driver_harness("qemu", guest.plugin_config)
    config = guest.config(port_map={"http": 80}, append=f"{APPEND} herder_alloc=${{NOMAD_ALLOC_NAME}}")
    run = harness.task(config, kill_timeout="1s", group_network=True,
                       resources={"memory": 160, "network": {"ports": [{"label": "http", "to": INSIDE}]}})
    assert run.network is not None
    run.start()
    [port] = run.ctx.ports
    served = wait_for(lambda: page_inside(run.network.path, INSIDE), 90,
                      lambda: f"the guest's page on 127.0.0.1:{INSIDE} in the namespace; "
                              f"console {run.output()[-1000:]!r}")
    assert served == f"hello from a qemu guest in {run.ctx.alloc_name}\n".encode()
    with pytest.raises(ConnectionRefusedError):  # the host port is the bridge's to map, not QEMU's to take
        socket.create_connection((port.host_ip, port.value), timeout=5).close()



@pytest.mark.slow
def test_the_host_port_reaches_the_guest_through_the_namespace(guest: Guest, tmp_path: Path,
                                                                config_file: Path) -> None:
    require_networking()
    [inside] = free_ports(1)
    config_file.write_text(config_file.read_text() + f'[plugin.qemu]\nimage_paths = ["{guest.directory}"]\n')
    job = tmp_path / "vm.hcl"
    job.write_text(JOB.format(inside=inside, kernel=guest.directory / "kernel", initrd=guest.directory / "initrd",
                              append=APPEND))
    data_dir = tmp_path / "data"
    run = HerderRun(job, data_dir, config=config_file)
    alloc_ids: list[str] = []
    try:
        run.wait_for("Started", timeout=60)
        alloc_ids += [path.parent.name for path in task_dirs(data_dir, "guest")]
        match = wait_for(lambda: PORT_LINE.search(run.stderr), what=lambda: f"the port line; stderr {run.stderr}")
        address, port = match[1], int(match[2])
        assert port != inside
        assert read_url(f"http://{address}:{port}/", timeout=90) == b"hello from a qemu guest in vm.g[0]\n"
        with pytest.raises(ConnectionRefusedError):  # the port inside is the namespace's, not the host's
            socket.create_connection(("127.0.0.1", inside), timeout=5).close()
    finally:
        assert run.interrupt() == 0, run.stderr
    left = {alloc_id: leftovers(alloc_id) for alloc_id in alloc_ids}
    for alloc_id, found in left.items():
        if found:
            remove_leftovers(alloc_id)
    assert not any(left.values()), f"left behind: {left}"


def page_inside(namespace: Path, port: int) -> bytes | None:
    """The body of ``GET /`` on ``127.0.0.1:port`` in the network namespace at ``namespace``; None while
    nothing answers (QEMU accepts, and closes, before the guest's server is up)."""
    connected: list[socket.socket] = []

    def connect() -> None:  # a socket is of its maker's namespace: a thread of its own goes there
        with entered(namespace), contextlib.suppress(OSError):
            connected.append(socket.create_connection(("127.0.0.1", port), timeout=5))

    thread = threading.Thread(target=connect)
    thread.start()
    thread.join()
    if not connected:
        return None
    with connected[0] as connection:
        try:
            connection.sendall(b"GET / HTTP/1.0\r\n\r\n")
            answer = b"".join(iter(lambda: connection.recv(65536), b""))
        except OSError:
            return None
    head, _, body = answer.partition(b"\r\n\r\n")
    return body if head.startswith(b"HTTP/1.") and b" 200 " in head.split(b"\r\n")[0] else None
