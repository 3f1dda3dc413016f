"""The real ``nomad`` 1.1 command line's allocation commands against the agent: ``alloc status``
(addresses, task resources, usage), ``alloc fs`` and ``alloc stop`` (SPEC §17).

One service job serves the module: its allocation has two group ports (one mapped ``to`` another
number), a task with its resources, files in its ``local`` and ``secrets`` and a file that grows.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.core.nomad_api.conftest import NomadAgent
from tests.support.consul import free_ports
from tests.support.waiting import TIMEOUT, wait_for

# Agents and the real nomad command line, as subprocesses: the API they test is the same on every Python.
pytestmark = pytest.mark.slow

JOB = """
job "files" {
  datacenters = ["dc1"]
  group "g" {
    network {
      port "http" {}
      port "db" { to = 6379 }
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", <<EOF
printf 'hello from local\\n' > local/hello.txt
printf '{"a": 1}' > local/data.json
printf 'top secret\\n' > secrets/token
while :; do echo tick >> local/ticks.log; sleep 0.2; done
EOF
        ]
      }
      resources {
        cpu    = 150
        memory = 64
      }
    }
  }
}
"""


@pytest.fixture(scope="module")
def alloc(nomad_agent: NomadAgent, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The running allocation of job ``files``, once its files are written; the job is stopped after."""
    path = tmp_path_factory.mktemp("job") / "files.nomad"
    path.write_text(textwrap.dedent(JOB))
    run = nomad_agent.nomad("job", "run", "-detach", str(path))
    assert run.returncode == 0, run.stdout + run.stderr

    def ready() -> dict[str, Any] | None:
        running = [a for a in nomad_agent.get("/v1/job/files/allocations") if a["ClientStatus"] == "running"]
        if not running:
            return None
        with nomad_agent.nomad_http() as http:
            written = http.get(f"/v1/client/fs/stat/{running[0]['ID']}", params={"path": "t/local/ticks.log"})
        return nomad_agent.get(f"/v1/allocation/{running[0]['ID']}") if written.status_code == 200 else None

    yield wait_for(ready, what="the allocation of files running, its files written")
    nomad_agent.nomad("job", "stop", "-detach", "files")


def section(output: str, title: str) -> list[str]:
    """The lines of the part of ``alloc status`` output under ``title``, to the next blank line."""
    assert f"\n{title}\n" in output, output
    return output.split(f"\n{title}\n", 1)[1].split("\n\n", 1)[0].splitlines()


def test_alloc_status_shows_addresses_task_resources_and_usage(nomad_agent: NomadAgent,
                                                                 alloc: dict[str, Any]) -> None:
    ports = {p["Label"]: p for p in alloc["AllocatedResources"]["Shared"]["Ports"]}
    assert ports["db"]["To"] == 6379 and ports["http"]["To"] == 0

    status = nomad_agent.nomad("alloc", "status", alloc["ID"])
    assert status.returncode == 0, status.stderr
    addresses = section(status.stdout, "Allocation Addresses")
    assert addresses[0].split() == ["Label", "Dynamic", "Address"]
    assert ["*http", "yes", f"127.0.0.1:{ports['http']['Value']}"] in [row.split() for row in addresses]
    assert ["*db", "yes", f"127.0.0.1:{ports['db']['Value']}", "->", "6379"] in [row.split() for row in addresses]
    resources = section(status.stdout, "Task Resources")
    assert resources[0].split() == ["CPU", "Memory", "Disk", "Addresses"]
    cpu, memory = resources[1].split()[:3], resources[1].split("MHz")[1].split()[:2]
    assert cpu[0].endswith("/150") and cpu[1] == "MHz", resources  # used/asked, the usage from the stats route
    assert memory[1].endswith("/64"), resources  # "1.6 MiB/64 MiB": used/asked
    assert "Memory Stats" not in status.stdout and "CPU Stats" not in status.stdout

    def cpu_measured() -> bool:  # the collector's first two looks at the task make its CPU percent
        usage = nomad_agent.get(f"/v1/client/allocation/{alloc['ID']}/stats")["Tasks"]["t"]["ResourceUsage"]
        return bool(usage["CpuStats"]["Measured"])

    wait_for(cpu_measured, what="the task's CPU percent measured")
    stats = nomad_agent.nomad("alloc", "status", "-stats", alloc["ID"])
    assert stats.returncode == 0, stats.stderr
    memory_stats = section(stats.stdout, "Memory Stats")
    assert memory_stats[0].split()[0] == "RSS" and memory_stats[1].split()[1] in ("KiB", "MiB"), memory_stats
    assert section(stats.stdout, "CPU Stats")[0].split() == ["Percent"]

    verbose = nomad_agent.nomad("alloc", "status", "-verbose", alloc["ID"])
    assert verbose.returncode == 0, verbose.stderr
    assert f"Eval ID             = {alloc['EvalID']}" in verbose.stdout  # full IDs
    assert "Evaluated Nodes     = 1" in verbose.stdout
    events = section(verbose.stdout, "Recent Events:")
    assert events[0].split() == ["Time", "Type", "Description"]
    assert any(row.split()[1:3] == ["Received", "Task"] and row.startswith("20") for row in events), events


def test_alloc_fs_lists_stats_and_reads_the_tasks_view(nomad_agent: NomadAgent, alloc: dict[str, Any]) -> None:
    alloc_id = alloc["ID"]
    top = nomad_agent.nomad("alloc", "fs", alloc_id)
    assert top.returncode == 0, top.stderr
    assert [row.split()[-1] for row in top.stdout.splitlines()[1:]] == ["alloc/", "t/"]
    task = nomad_agent.nomad("alloc", "fs", alloc_id, "t")
    assert {row.split()[0] + " " + row.split()[-1] for row in task.stdout.splitlines()[1:]} >= {
        "drwx------ secrets/", "dtrwxrwxrwx tmp/"}, task.stdout
    local = nomad_agent.nomad("alloc", "fs", "-H", alloc_id, "t/local")
    hello = next(row.split()[:2] for row in local.stdout.splitlines() if row.endswith(" hello.txt"))
    assert hello == ["-rw-r--r--", "17"], local.stdout

    cat = nomad_agent.nomad("alloc", "fs", alloc_id, "t/local/hello.txt")
    assert (cat.returncode, cat.stdout) == (0, "hello from local\n"), cat.stderr
    tail = nomad_agent.nomad("alloc", "fs", "-tail", "-c", "6", alloc_id, "t/local/hello.txt")
    assert (tail.returncode, tail.stdout) == (0, "local\n"), tail.stderr
    stat = nomad_agent.nomad("alloc", "fs", "-stat", alloc_id, "t/local/hello.txt")
    assert "text/plain; charset=utf-8" in stat.stdout, stat.stdout
    assert "application/json" in nomad_agent.nomad("alloc", "fs", "-stat", alloc_id, "t/local/data.json").stdout

    # A task's secrets are listed, never read (as Nomad); a path not there is an error, exit 1.
    assert "token" in nomad_agent.nomad("alloc", "fs", alloc_id, "t/secrets").stdout
    secret = nomad_agent.nomad("alloc", "fs", alloc_id, "t/secrets/token")
    assert secret.returncode == 1 and "Reading secret file prohibited" in secret.stderr, secret
    assert "top secret" not in secret.stdout
    missing = nomad_agent.nomad("alloc", "fs", alloc_id, "t/local/nothing")
    assert missing.returncode == 1 and "404 (t/local/nothing: no such file or directory)" in missing.stderr
    escape = nomad_agent.nomad("alloc", "fs", alloc_id, "../..")
    assert escape.returncode == 1 and "'..'" in escape.stderr, escape.stderr


def test_alloc_fs_streams_a_growing_file(nomad_agent: NomadAgent, alloc: dict[str, Any]) -> None:
    alloc_id = alloc["ID"]
    with nomad_agent.nomad_http() as http:
        whole = http.get(f"/v1/client/fs/stream/{alloc_id}", params={"path": "t/local/hello.txt", "follow": "false"})
        assert whole.status_code == 200, whole.text
        [frame] = [json.loads(line) for line in whole.text.replace("}{", "}\n{").splitlines()]
        assert base64.b64decode(frame["Data"]) == b"hello from local\n" and frame["File"] == "t/local/hello.txt"
        readat = http.get(f"/v1/client/fs/readat/{alloc_id}",
                          params={"path": "t/local/hello.txt", "offset": 6, "limit": 4})
        assert readat.text == "from" and readat.headers["x-content-type-options"] == "nosniff"

    # `alloc fs -f` follows the file as the task writes it, until interrupted.
    env = {**os.environ, "NOMAD_ADDR": nomad_agent.nomad_url, "NOMAD_TOKEN": nomad_agent.token}
    follow = subprocess.Popen(["nomad", "alloc", "fs", "-f", "-tail", "-n", "1", alloc_id, "t/local/ticks.log"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert follow.stdout is not None
        seen = [follow.stdout.readline() for _ in range(3)]  # the last line, then lines written since
        assert seen == ["tick\n"] * 3, seen
    finally:
        follow.send_signal(signal.SIGINT)
        follow.wait(timeout=TIMEOUT)
    assert follow.returncode == 0, follow.stderr


def test_alloc_stop_replaces_the_allocation(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    path = tmp_path / "replaced.nomad"
    path.write_text(JOB.replace('job "files"', 'job "replaced"'))
    assert nomad_agent.nomad("job", "run", "-detach", str(path)).returncode == 0

    def running() -> list[dict[str, Any]]:
        return [a for a in nomad_agent.get("/v1/job/replaced/allocations") if a["ClientStatus"] == "running"]

    [first] = wait_for(running, what="the allocation of replaced running")
    stopped = nomad_agent.nomad("alloc", "stop", first["ID"][:8])
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert 'finished with status "complete"' in stopped.stdout and " created: node " in stopped.stdout

    [second] = wait_for(lambda: [a for a in running() if a["ID"] != first["ID"]], what="the replacement running")
    assert second["Name"] == first["Name"] == "replaced.g[0]"
    old = nomad_agent.get(f"/v1/allocation/{first['ID']}")
    assert (old["DesiredStatus"], old["ClientStatus"]) == ("stop", "complete")
    assert second["ID"][:8] in stopped.stdout

    # A stopped allocation stopped again is not replaced again (exit 0, as Nomad); an unknown one is an error.
    again = nomad_agent.nomad("alloc", "stop", "-detach", first["ID"])
    assert again.returncode == 0, again.stderr
    assert len(nomad_agent.get("/v1/job/replaced/allocations")) == 2
    unknown = nomad_agent.nomad("alloc", "stop", "00000000")
    assert unknown.returncode == 1 and "No allocation(s) with prefix or id" in unknown.stderr
    with nomad_agent.nomad_http() as http:
        assert http.put("/v1/allocation/00000000-0000-0000-0000-000000000000/stop").status_code == 404
    nomad_agent.nomad("job", "stop", "-detach", "replaced")


def test_alloc_stop_replaces_an_allocation_on_a_static_port_once_the_port_is_free(nomad_agent: NomadAgent,
                                                                                  tmp_path: Path) -> None:
    [port] = free_ports(1, low=2000, high=12000)
    path = tmp_path / "static.nomad"
    path.write_text(textwrap.dedent(STATIC.format(port=port)))
    assert nomad_agent.nomad("job", "run", "-detach", str(path)).returncode == 0

    def running() -> list[dict[str, Any]]:
        return [a for a in nomad_agent.get("/v1/job/static/allocations") if a["ClientStatus"] == "running"]

    [first] = wait_for(running, what="the allocation of static running")
    stopped = nomad_agent.nomad("alloc", "stop", first["ID"])
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    [second] = wait_for(lambda: [a for a in running() if a["ID"] != first["ID"]], what="the replacement running")
    ports = nomad_agent.get(f"/v1/allocation/{second['ID']}")["AllocatedResources"]["Shared"]["Ports"]
    assert [(p["Label"], p["Value"]) for p in ports] == [("http", port)]
    nomad_agent.nomad("job", "stop", "-detach", "static")


STATIC = """
job "static" {{
  datacenters = ["dc1"]
  group "g" {{
    network {{
      port "http" {{ static = {port} }}
    }}
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", "exec sleep 3600"]
      }}
    }}
  }}
}}
"""
