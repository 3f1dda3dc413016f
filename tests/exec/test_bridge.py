"""exec tasks of a ``network { mode = "bridge" }`` group through ``herder run``, with runc and the real CNI
plugins: siblings on ``127.0.0.1``, the host port mapped to the port inside, the group's hostname and
dns in every container, and nothing of the allocation's network left once it is over."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.consul import free_ports
from tests.support.foreground import HerderRun, task_dirs
from tests.support.http import read_url
from tests.support.network import leftovers, remove_leftovers, require_networking
from tests.support.waiting import wait_for

from .helpers import containers_under

JOB = """
job "bridged" {{
  group "g" {{
    network {{
      mode     = "bridge"
      hostname = "web-1"
      dns {{
        servers  = ["192.0.2.53"]
        searches = ["svc.example"]
      }}
      port "http" {{ to = {inside} }}
    }}
    task "server" {{
      driver       = "exec"
      kill_timeout = "2s"
      config {{
        command = "/bin/sh"
        args    = ["-c", "{server}"]
      }}
    }}
    task "client" {{
      driver       = "exec"
      kill_timeout = "2s"
      config {{
        command = "/bin/sh"
        args    = ["-c", "{client}"]
      }}
    }}
  }}
}}
"""
SERVER = ("hostname > /local/index.html; trap 'exit 0' INT TERM; "
          "/bin/busybox httpd -f -p ${NOMAD_PORT_http} -h /local & wait")
"""Serves its hostname on 127.0.0.1 of the namespace, at the port inside."""
CLIENT = ("trap 'exit 0' INT TERM; cat /etc/resolv.conf /etc/hosts > /local/etc; "
          "until printf 'GET / HTTP/1.0\\\\r\\\\n\\\\r\\\\n' | /bin/busybox nc 127.0.0.1 ${NOMAD_PORT_http} "
          "> /local/sibling && grep -q web-1 /local/sibling; do sleep 0.2; done; sleep 3600 & wait")
"""Reaches its sibling on 127.0.0.1 (trying again while the server starts), then waits."""
PORT_LINE = re.compile(r"bridged\.g\[0\]: port http is ([\d.]+):(\d+)")


def test_exec_tasks_share_the_allocations_network(exec_driver: str, tmp_path: Path, config_file: Path) -> None:
    require_networking()
    [inside] = free_ports(1)
    job = tmp_path / "bridged.hcl"
    job.write_text(JOB.format(inside=inside, server=SERVER, client=CLIENT))
    data_dir = tmp_path / "data"
    run = HerderRun(job, data_dir, config=config_file)
    alloc_ids: list[str] = []
    try:
        run.wait_for("Started", count=2, timeout=60)
        alloc_ids += [path.parent.name for path in task_dirs(data_dir, "server")]
        match = wait_for(lambda: PORT_LINE.search(run.stderr), what=lambda: f"the port line; stderr {run.stderr}")
        address, port = match[1], int(match[2])
        assert port != inside
        assert read_url(f"http://{address}:{port}/") == b"web-1\n"  # the server's hostname is the group's
        [client] = task_dirs(data_dir, "client")
        sibling = client / "local" / "sibling"
        wait_for(lambda: sibling.exists() and "web-1" in sibling.read_text(),
                 what=lambda: f"the client's answer from 127.0.0.1:{inside}; {run.stderr[-2000:]}")
        etc = (client / "local" / "etc").read_text().splitlines()
        assert "nameserver 192.0.2.53" in etc and "search svc.example" in etc, etc
        assert re.fullmatch(r"172\.26\.\d+\.\d+ web-1", etc[-1]), etc
    finally:
        assert run.interrupt() == 0, run.stderr
    assert containers_under(tmp_path) == []
    left = {alloc_id: leftovers(alloc_id) for alloc_id in alloc_ids}
    for alloc_id, found in left.items():
        if found:
            remove_leftovers(alloc_id)
    assert not any(left.values()), f"left behind: {left}"
