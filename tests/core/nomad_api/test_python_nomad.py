"""A client of Nomad's API written by others, python-nomad (PyPI), drives the agent."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from tests.core.nomad_api.conftest import NomadAgent
from tests.support.waiting import wait_for

# An agent and a third-party client, as on test_cli.py: on the first Python only.
pytestmark = pytest.mark.slow

nomad = pytest.importorskip("nomad", reason="python-nomad is not installed")

JOB: dict[str, Any] = {"Job": {
    "ID": "pyclient", "Name": "pyclient", "Type": "service", "Datacenters": ["dc1"],
    "TaskGroups": [{
        "Name": "g", "Count": 1,
        "Networks": [{"DynamicPorts": [{"Label": "http"}]}],
        # As python-nomad's users write them: Nomad's field names, zero values where they mean nothing.
        "Services": [{"Name": "pyclient-web", "PortLabel": "http", "AddressMode": "", "TaskName": "", "Checks": [
            {"Name": "alive", "Type": "tcp", "Interval": 1_000_000_000, "Timeout": 1_000_000_000, "Id": "",
             "TaskName": "", "Expose": False}]}],
        "Tasks": [{
            "Name": "t", "Driver": "raw_exec", "KillTimeout": 5_000_000_000, "Leader": False, "Kind": "",
            "Config": {"command": sys.executable, "args": [
                "-c", "import http.server, os; print('from-python-nomad', flush=True); "
                      "http.server.HTTPServer(('', int(os.environ['NOMAD_PORT_http'])), "
                      "http.server.SimpleHTTPRequestHandler).serve_forever()"]}}]}]}}


def test_python_nomad_registers_reads_and_stops_a_job_with_a_service(nomad_agent: NomadAgent) -> None:
    client = nomad.Nomad(host="127.0.0.1", port=nomad_agent.nomad_port, timeout=30, token=nomad_agent.token)
    checked = client.validate.validate_job(JOB).json()  # python-nomad gives this one back as it came
    assert (checked["Error"], checked["Warnings"]) == ("", "")
    registered = client.job.register_job("pyclient", JOB)
    assert registered["Warnings"] == ""
    assert client.evaluation.get_evaluation(registered["EvalID"])["Status"] == "complete"

    def running() -> dict[str, Any] | None:
        found = client.job.get_allocations("pyclient")
        return found[0] if found and found[0]["ClientStatus"] == "running" else None

    alloc = wait_for(running, what="the allocation running")
    detail = client.allocation.get_allocation(alloc["ID"])
    assert detail["JobID"] == "pyclient" and detail["TaskStates"]["t"]["State"] == "running"
    assert "pyclient" in [job["ID"] for job in client.jobs.get_jobs()]
    assert client.job.get_job("pyclient")["TaskGroups"][0]["Services"][0]["Name"] == "pyclient-web"

    def passing() -> list[dict[str, Any]] | None:
        checks = nomad_agent.alloc(alloc["ID"])["tasks"]["t"].get("checks", [])
        return checks if checks and all(c["status"] == "passing" for c in checks) else None

    assert [(c["service"], c["check"]) for c in wait_for(passing, what="the service's check passing")] \
        == [("pyclient-web", "alive")]

    stats = wait_for(lambda: client.client.allocation.read_allocation_stats(alloc["ID"])["Tasks"].get("t"),
                     what="the task's stats")
    assert stats["ResourceUsage"]["MemoryStats"]["RSS"] > 0
    frames = client.client.stream_logs.stream(alloc["ID"], "t", "stdout", plain=True)
    assert "from-python-nomad" in frames

    client.job.deregister_job("pyclient")
    wait_for(lambda: client.allocation.get_allocation(alloc["ID"])["ClientStatus"] == "complete",
             what="the allocation stopped")
    assert client.job.get_job("pyclient")["Status"] == "dead"
