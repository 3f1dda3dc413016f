"""A client of Nomad's API written by others, python-nomad (PyPI), drives the agent."""

from __future__ import annotations

from typing import Any

import pytest

from tests.core.nomad_api.conftest import NomadAgent
from tests.support.waiting import wait_for

# An agent and a third-party client, as on test_cli.py: on the first Python only.
pytestmark = pytest.mark.slow

nomad = pytest.importorskip("nomad", reason="python-nomad is not installed")

JOB: dict[str, Any] = {"Job": {
    "ID": "pyclient", "Name": "pyclient", "Type": "service", "Datacenters": ["dc1"],
    "TaskGroups": [{"Name": "g", "Count": 1, "Tasks": [{
        "Name": "t", "Driver": "raw_exec", "KillTimeout": 5_000_000_000,
        "Config": {"command": "/bin/sh", "args": ["-c", "echo from-python-nomad; exec sleep 3600"]}}]}]}}


def test_python_nomad_registers_reads_and_stops_a_job(nomad_agent: NomadAgent) -> None:
    client = nomad.Nomad(host="127.0.0.1", port=nomad_agent.nomad_port, timeout=30, token=nomad_agent.token)
    registered = client.job.register_job("pyclient", JOB)
    assert client.evaluation.get_evaluation(registered["EvalID"])["Status"] == "complete"

    def running() -> dict[str, Any] | None:
        found = client.job.get_allocations("pyclient")
        return found[0] if found and found[0]["ClientStatus"] == "running" else None

    alloc = wait_for(running, what="the allocation running")
    detail = client.allocation.get_allocation(alloc["ID"])
    assert detail["JobID"] == "pyclient" and detail["TaskStates"]["t"]["State"] == "running"
    assert "pyclient" in [job["ID"] for job in client.jobs.get_jobs()]
    assert client.job.get_job("pyclient")["TaskGroups"][0]["Tasks"][0]["Driver"] == "raw_exec"

    client.job.deregister_job("pyclient")
    wait_for(lambda: client.allocation.get_allocation(alloc["ID"])["ClientStatus"] == "complete",
             what="the allocation stopped")
    assert client.job.get_job("pyclient")["Status"] == "dead"
