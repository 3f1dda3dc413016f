"""Services of a bridge-mode allocation: advertised at the host's address and port, which reach it, and
their script checks run inside its namespace."""

from __future__ import annotations

from pathlib import Path

from tests.support.consul import free_ports
from tests.support.running import start_job

JOB = """
job "web" {{
  group "app" {{
    network {{
      mode = "bridge"
      port "http" {{ to = {inside} }}
    }}
    service {{
      name = "web"
      port = "http"
      check {{
        name     = "outside"
        type     = "http"
        path     = "/"
        interval = "0.5s"
        timeout  = "1s"
      }}
      check {{
        name     = "inside"
        type     = "script"
        task     = "server"
        command  = "python3"
        args     = ["-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:{inside}/', timeout=2)"]
        interval = "0.5s"
        timeout  = "3s"
      }}
    }}
    task "server" {{
      driver       = "raw_exec"
      kill_timeout = "2s"
      config {{
        command = "python3"
        args    = ["-m", "http.server", "${{NOMAD_PORT_http}}"]
      }}
    }}
  }}
}}
"""


def test_checks_reach_the_service_from_outside_at_the_host_port_and_from_inside(data_dir: Path) -> None:
    [inside] = free_ports(1)
    run, wait = start_job(JOB.format(inside=inside), data_dir)
    try:
        run.wait_for("Started", "server")
        # The http check goes to the advertised address: the host's, through the mapped port.
        run.wait_for_health("outside", "passing")
        # The script check reaches the port inside, which only the namespace has.
        run.wait_for_health("inside", "passing")
        [port] = run.runner.allocs[0].ports
        assert port.value != inside
    finally:
        run.runner.stop()
        assert wait() == "stopped"
