"""The real ``nomad`` 1.1 command line against the agent itself (SPEC §17): its members, information,
metrics, log stream, collection, and its node's drain and eligibility, exit codes included."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from pathlib import Path

import httpx
import pytest

from tests.core.nomad_api.conftest import NomadAgent
from tests.core.nomad_api.test_cli import allocs, running_alloc, service
from tests.support.waiting import TIMEOUT, wait_for

pytestmark = pytest.mark.slow


def ok(agent: NomadAgent, *args: str) -> str:
    done = agent.nomad(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_members_agent_info_and_version(nomad_agent: NomadAgent) -> None:
    rows = ok(nomad_agent, "server", "members").splitlines()
    assert rows[0].split() == ["Name", "Address", "Port", "Status", "Leader", "Protocol", "Build", "Datacenter",
                               "Region"]
    assert len(rows) == 2 and rows[1].split()[3:7] == ["alive", "true", "2", "1.1.2"], rows

    info = ok(nomad_agent, "agent-info")
    sections = [line for line in info.splitlines() if not line.startswith(" ")]
    assert {"client", "nomad", "runtime", "herder"} <= set(sections), info
    me = nomad_agent.get("/v1/agent/self")
    assert me["config"]["Version"]["Version"] == "1.1.2"  # the API herder speaks; its own beside it
    assert me["config"]["HerderVersion"] == me["stats"]["herder"]["version"] != "1.1.2"
    node = nomad_agent.get("/v1/node/" + me["stats"]["client"]["node_id"])
    assert node["Attributes"]["nomad.version"] == "1.1.2" and node["Attributes"]["herder.version"]


def test_ui_without_a_job_opens_the_root_which_is_the_ui(nomad_agent: NomadAgent) -> None:
    opened = ok(nomad_agent, "ui")
    assert f'Opening URL "{nomad_agent.nomad_url}"' in opened
    with httpx.Client(timeout=30.0) as browser:
        root = browser.get(nomad_agent.nomad_url + "/")
        assert root.status_code == 307 and root.headers["location"] == "/ui/"
        ui = browser.get(nomad_agent.nomad_url + "/ui/")
        assert ui.status_code == 307 and ui.headers["location"] == f"{nomad_agent.url}/ui/"


def test_operator_metrics_as_json_and_prometheus(nomad_agent: NomadAgent) -> None:
    summary = json.loads(ok(nomad_agent, "operator", "metrics"))
    assert {"Gauges", "Counters", "Samples", "Timestamp"} <= set(summary)
    assert any(g["Name"] == "herder_agent_info" for g in summary["Gauges"]), summary["Gauges"][:3]
    text = ok(nomad_agent, "operator", "metrics", "-format", "prometheus")
    assert "# TYPE herder_agent_info gauge" in text


def test_system_gc_collects_what_finished(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    path = tmp_path / "once.nomad"
    path.write_text('job "once" {\n  type = "batch"\n  group "g" {\n    task "t" {\n      driver = "raw_exec"\n'
                    '      config {\n        command = "/bin/true"\n      }\n    }\n  }\n}\n')
    ok(nomad_agent, "job", "run", "-detach", str(path))
    wait_for(lambda: [a["ClientStatus"] for a in allocs(nomad_agent, "once")] == ["complete"], what="once complete")
    before = {a["ID"] for a in nomad_agent.get("/v1/allocations")}
    assert ok(nomad_agent, "system", "gc") == ""
    after = {a["ID"] for a in nomad_agent.get("/v1/allocations")}
    # The agent's collection ran: with the default threshold nothing that recent is purged, so both
    # say the same allocations; the route answers as Nomad's, with nothing.
    assert after <= before


def test_monitor_streams_the_agents_log(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    env = {**os.environ, "NOMAD_ADDR": nomad_agent.nomad_url, "NOMAD_TOKEN": nomad_agent.token}
    lines: queue.Queue[str] = queue.Queue()
    with subprocess.Popen(["nomad", "monitor", "-log-level", "info"], stdout=subprocess.PIPE, text=True,
                          env=env, stdin=subprocess.DEVNULL) as monitor:
        reader = threading.Thread(target=lambda: [lines.put(line) for line in monitor.stdout or ()], daemon=True)
        reader.start()
        try:
            attempts = iter(range(1_000))

            def submitted() -> bool:  # a new version each time: the stream may start after a first submission
                ok(nomad_agent, "job", "run", "-detach", str(service(tmp_path, "monitored", word=str(next(attempts)))))
                try:
                    while True:
                        if "job monitored submitted" in lines.get(timeout=1.0):
                            return True
                except queue.Empty:
                    return False

            wait_for(submitted, what="the submission's log line in nomad monitor")
        finally:
            monitor.terminate()
            monitor.wait(TIMEOUT)
    bad = nomad_agent.nomad("monitor", "-log-level", "loud")
    assert bad.returncode == 1 and "Unknown log level: loud" in bad.stderr, bad.stderr
    ok(nomad_agent, "job", "stop", "-purge", "monitored")


def test_node_eligibility_then_drain_close_the_node_to_new_jobs(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    ok(nomad_agent, "job", "run", "-detach", str(service(tmp_path, "drained")))
    alloc = running_alloc(nomad_agent, "drained")

    assert "Node" in ok(nomad_agent, "node", "eligibility", "-disable", "-self")
    assert "ineligible" in ok(nomad_agent, "node", "status", "-self")
    refused = nomad_agent.nomad("job", "run", "-detach", str(service(tmp_path, "refused")))
    assert refused.returncode == 1 and "takes no new job" in refused.stderr, refused.stderr
    assert nomad_agent.get(f"/v1/allocation/{alloc}")["ClientStatus"] == "running"  # left alone
    ok(nomad_agent, "node", "eligibility", "-enable", "-self")

    drained = ok(nomad_agent, "node", "drain", "-enable", "-yes", "-self")
    assert "Drain complete" in drained and "All allocations on node" in drained, drained
    assert nomad_agent.get(f"/v1/allocation/{alloc}")["ClientStatus"] == "complete"
    node = nomad_agent.get("/v1/node/" + nomad_agent.get("/v1/nodes")[0]["ID"])
    assert node["SchedulingEligibility"] == "ineligible" and node["DrainStrategy"] is None
    assert nomad_agent.nomad("job", "run", "-detach", str(service(tmp_path, "refused"))).returncode == 1
    # Nothing left to stop: the drain completes at once, and the command line's watch sees it.
    assert "Drain complete" in ok(nomad_agent, "node", "drain", "-enable", "-yes", "-self")

    ok(nomad_agent, "node", "drain", "-disable", "-yes", "-self")
    assert nomad_agent.get("/v1/nodes")[0]["SchedulingEligibility"] == "eligible"
    ok(nomad_agent, "job", "run", "-detach", str(service(tmp_path, "drained")))
    running_alloc(nomad_agent, "drained")
    ok(nomad_agent, "job", "stop", "-purge", "drained")
