"""The HTTP API through a real agent: jobs, allocations, logs, exec, signals, errors."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.core.agent.conftest import ticker
from tests.support.agent import AgentProcess
from tests.support.waiting import wait_for


def test_health_drivers_plugins_and_the_openapi_document(shared_agent: AgentProcess) -> None:
    with shared_agent.http() as http:
        health = http.get("/v1/health").json()
        drivers = http.get("/v1/drivers").json()["drivers"]
        plugins = http.get("/v1/plugins").json()["plugins"]
        document = http.get("/v1/openapi.json").json()
    assert health["status"] == "ok"
    raw_exec = next(d for d in drivers if d["name"] == "raw_exec")
    assert raw_exec["detected"] and raw_exec["healthy"]
    assert any(p["name"] == "raw_exec" for p in plugins)
    assert {"/v1/jobs", "/v1/allocations/{alloc_id}", "/v1/allocations/{alloc_id}/exec", "/v1/events"} \
        <= set(document["paths"])


def test_a_job_runs_and_shows_its_status_events_and_logs(shared_agent: AgentProcess) -> None:
    submitted = shared_agent.submit(ticker("logs"))
    alloc_id = submitted["allocations"][0]["id"]
    shared_agent.wait_task(alloc_id, "t")
    with shared_agent.http() as http:
        status = http.get(f"/v1/allocations/{alloc_id[:6]}").json()  # a unique prefix will do
        assert status["id"] == alloc_id and status["job"] == "logs"
        assert [e["type"] for e in status["tasks"]["t"]["events"]][:3] == ["Received", "Task Setup", "Started"]
        assert status["ports"][0]["label"] == "http" and 2000 <= status["ports"][0]["value"] <= 12000
        assert http.get("/v1/jobs/logs").json()["status"] == "running"
        assert alloc_id in {a["id"] for a in http.get("/v1/allocations").json()["allocations"]}

        err = wait_for(lambda: http.get(f"/v1/allocations/{alloc_id}/logs/t", params={"stream": "stderr"}).content,
                       what="the task's stderr")
        assert err == b"oops\n"
        out = http.get(f"/v1/allocations/{alloc_id}/logs/t", params={"offset": 3})
        assert out.content == b"rted\n" and out.headers["X-Herder-Log-Offset"] == "3"
        tail = http.get(f"/v1/allocations/{alloc_id}/logs/t", params={"origin": "end", "offset": 3})
        assert tail.content == b"ed\n"

        # A followed log ends once the task is dead.
        with http.stream("GET", f"/v1/allocations/{alloc_id}/logs/t", params={"follow": "true"}) as followed:
            stopped = http.delete("/v1/jobs/logs")
            assert stopped.status_code == 200
            assert b"".join(followed.iter_bytes()) == b"started\n"
        shared_agent.wait_task(alloc_id, "t", "dead")
        assert http.get("/v1/jobs/logs").json()["status"] == "stopped"

        events = http.get("/v1/events", params={"alloc_id": alloc_id, "follow": "false"})
    assert events.headers["content-type"].startswith("text/event-stream")
    data = [json.loads(line[6:]) for line in events.text.splitlines() if line.startswith("data: ")]
    assert {"Started", "Killing", "Killed"} <= {e["type"] for e in data}
    assert all(e["alloc_id"] == alloc_id for e in data)


def test_exec_signal_and_restart(shared_agent: AgentProcess) -> None:
    alloc_id = shared_agent.submit(ticker("ops"))["allocations"][0]["id"]
    shared_agent.wait_task(alloc_id, "t")
    with shared_agent.http() as http:
        result = http.post(f"/v1/allocations/{alloc_id}/exec",
                           json={"task": "t", "command": ["sh", "-c", "echo $NOMAD_TASK_NAME; exit 7"]}).json()
        assert result == {"exit_code": 7, "output": "t\n"}

        assert http.post(f"/v1/allocations/{alloc_id}/restart", json={"task": "t"}).status_code == 200
        shared_agent.wait_event(alloc_id, "t", "Started", count=2)
        status = shared_agent.alloc(alloc_id)["tasks"]["t"]
        assert "Restart Signal" in [e["type"] for e in status["events"]]

        assert http.post(f"/v1/allocations/{alloc_id}/signal",
                         json={"task": "t", "signal": "SIGUSR1"}).status_code == 200
        shared_agent.wait_event(alloc_id, "t", "Signaling")
        assert http.post(f"/v1/allocations/{alloc_id}/signal", json={"signal": "SIGNOPE"}).status_code == 409
        assert http.post(f"/v1/allocations/{alloc_id}/exec",
                         json={"task": "nope", "command": ["true"]}).status_code == 404
        http.delete("/v1/jobs/ops")
    shared_agent.wait_task(alloc_id, "t", "dead")


def test_a_job_as_canonical_json_with_variables_and_resubmission(shared_agent: AgentProcess) -> None:
    job = {"variables": {"word": {"default": "x"}},
           "job": {"name": "canon", "type": "batch", "groups": [{"name": "g", "tasks": [
               {"name": "t", "driver": "raw_exec", "config": {"command": "sh", "args": ["-c", "echo ${var.word}"]}}]}]}}
    with shared_agent.http() as http:
        first = http.post("/v1/jobs", json={"job": job, "variables": {"word": "hello"}})
        assert first.status_code == 200, first.text
        alloc_id = first.json()["allocations"][0]["id"]
        shared_agent.wait_task(alloc_id, "t", "dead")
        assert http.get(f"/v1/allocations/{alloc_id}/logs/t").content == b"hello\n"
        assert http.get("/v1/jobs/canon").json()["status"] == "complete"


def test_errors_are_json_with_paths_and_never_500(shared_agent: AgentProcess) -> None:
    bad_job = 'job "bad" {\n  group "g" {\n    task "t" {\n      driver = "raw_exec"\n      config {}\n    }\n  }\n}\n'
    with shared_agent.http() as http:
        invalid = http.post("/v1/jobs", json={"text": bad_job})
        assert invalid.status_code == 400
        assert invalid.json()["error"] == "invalid job"
        assert invalid.json()["errors"] == ["api:5: job.groups[0].tasks[0].config.command: is required"]
        for response, code in [
            (http.post("/v1/jobs", content=b"{not json", headers={"content-type": "application/json"}), 422),
            (http.post("/v1/jobs", json={"text": "x", "job": {}}), 400),
            (http.post("/v1/jobs", json={"text": 'job "x" {', "format": "hcl"}), 400),
            (http.post("/v1/jobs", json={"text": "x", "format": "toml"}), 422),
            (http.get("/v1/allocations/nothing-like-this"), 404),
            (http.get("/v1/jobs/none"), 404),
            (http.delete("/v1/jobs/none"), 404),
            (http.get("/v1/allocations/x/logs/t", params={"offset": -1}), 422),
            (http.post("/v1/jobs", content=b"x" * (5 << 20), headers={"content-type": "application/json"}), 413),
            (http.get("/v1/nothing"), 404),
        ]:
            assert response.status_code == code, (response.request.url, response.text)
            assert "error" in response.json()


def test_a_streamed_body_over_the_limit_is_refused(shared_agent: AgentProcess) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(80):
            yield b"x" * 65536

    with shared_agent.http() as http:
        try:
            response = http.post("/v1/jobs", content=chunks(), headers={"content-type": "application/json"})
        except httpx.HTTPError:
            return  # the agent answered 413 and closed before the whole body was sent
    assert response.status_code == 413


def test_raw_exec_is_disabled_in_the_agent_unless_enabled(tmp_path: Path) -> None:
    agent = AgentProcess(tmp_path, raw_exec=False).start()
    try:
        with agent.http() as http:
            raw_exec = next(d for d in http.get("/v1/drivers").json()["drivers"] if d["name"] == "raw_exec")
            refused = http.post("/v1/jobs", json={"text": ticker()})
        assert not raw_exec["healthy"] or not raw_exec["detected"]
        assert "disabled" in raw_exec["description"]
        assert refused.status_code == 409 and "raw_exec" in refused.json()["error"]
    finally:
        agent.shutdown()


def test_a_kept_alive_connection_outlives_the_clients_idle_time(shared_agent: AgentProcess) -> None:
    """The server must not close an idle connection first: a client (httpx keeps one 5 s, as
    long as uvicorn's default) reusing it just as the server closes it gets a reset."""
    connection = http.client.HTTPConnection("127.0.0.1", shared_agent.port, timeout=30)
    try:
        connection.request("GET", "/v1/health", headers=shared_agent.headers)
        first = connection.getresponse()
        assert first.status == 200 and json.loads(first.read())["status"] == "ok"
        kept = connection.sock
        # deliberate sleep: the subject is a connection idle longer than httpx keeps one (and uvicorn's default)
        time.sleep(6)
        # On the same socket: http.client reconnects only if we closed it.
        connection.request("GET", "/v1/health", headers=shared_agent.headers)
        assert connection.sock is kept
        second = connection.getresponse()  # RemoteDisconnected if the server closed the connection
        assert second.status == 200 and json.loads(second.read())["status"] == "ok"
    finally:
        connection.close()
