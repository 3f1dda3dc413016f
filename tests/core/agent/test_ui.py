"""The web UI without JavaScript, against a real agent (no token: loopback): every page reads as plain
HTML, and each action the command line has works as a form's POST. (The browser test is tests/ui; the
attacks, tests/security/test_ui.py.)"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from herder.agent.ui.client import ApiFailure
from herder.agent.ui.pages import parse_meta, size
from tests.support.agent import AgentProcess
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

JOBS = """
job "nightly" {
  type = "batch"
  periodic {
    crons = ["0 3 * * *"]
  }
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo nightly run"]
      }
    }
  }
}
"""

PARAMETERIZED = """
job "render" {
  type = "batch"
  parameterized {
    payload       = "required"
    meta_required = ["colour"]
  }
  group "g" {
    task "t" {
      driver = "raw_exec"
      dispatch_payload {
        file = "in.txt"
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "echo \\"$NOMAD_META_colour $(cat local/in.txt)\\""]
      }
    }
  }
}
"""

SERVICE = """
job "svc" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'echo got HUP' HUP; echo up; while :; do sleep 1 & wait; done"]
      }
      service {
        name = "svc"
        check {
          name     = "alive"
          type     = "script"
          command  = "/bin/sh"
          args     = ["-c", "echo all '<good>'"]
          interval = "1s"
          timeout  = "5s"
        }
      }
      kill_timeout = "5s"
    }
  }
}
"""

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    process = AgentProcess(tmp_path_factory.mktemp("ui")).start()
    try:
        for job in (JOBS, PARAMETERIZED, SERVICE):
            process.submit(job)
        yield process
    finally:
        process.shutdown()


@pytest.fixture
def ui(agent: AgentProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=agent.url + "/ui", timeout=30.0) as client:
        yield agent.sign_in(client)


def post(ui: httpx.Client, page: str, action: str, **fields: str) -> str:
    """Post a form of ``page`` to ``action``, as a browser would; the page redirected to."""
    form = ui.get(page)
    assert form.status_code == 200, form.text
    response = ui.post(action, data={"csrf": CSRF.findall(form.text)[0], **fields},
                       headers={"Origin": f"{ui.base_url.scheme}://{ui.base_url.netloc.decode()}"})
    assert response.status_code == 303, response.text
    shown = ui.get(response.headers["location"].removeprefix("/ui"))
    assert shown.status_code == 200
    return shown.text


def test_the_jobs_with_their_type_status_and_next_launch(agent: AgentProcess, ui: httpx.Client) -> None:
    page = ui.get("/")
    assert page.status_code == 200
    rows = {m[0]: m[1] for m in re.findall(r'<a href="/ui/jobs/([^"]+)">[^<]*</a>(.*?)</tr>', page.text, re.S)}
    assert set(rows) == {"nightly", "render", "svc"}
    assert "periodic" in rows["nightly"] and re.search(r"<td>\d{4}-\d\d-\d\dT03:00:00", rows["nightly"])
    assert "parameterized" in rows["render"] and "batch" in rows["render"]
    assert "service" in rows["svc"] and "running" in rows["svc"]
    assert ui.get("/?fragment=jobs").text.lstrip().startswith("<table")
    bare = httpx.get(f"{agent.url}/ui")
    assert bare.status_code == 307 and bare.headers["location"].endswith("/ui/")


def test_force_a_periodic_job(ui: httpx.Client) -> None:
    child = post(ui, "/jobs/nightly", "/jobs/nightly/force")
    name = re.search(r"launched (nightly/periodic-\d+)", child)
    assert name, child
    assert f"Job {name[1]}" in child
    parent = ui.get("/jobs/nightly").text
    assert f'href="/ui/jobs/{name[1]}"' in parent and "Next launch" in parent


def test_dispatch_a_parameterized_job(agent: AgentProcess, ui: httpx.Client) -> None:
    refused = post(ui, "/jobs/render", "/jobs/render/dispatch", meta="", payload="x")
    assert "cannot dispatch the job" in refused and "colour" in refused
    assert "not KEY=VALUE" in post(ui, "/jobs/render", "/jobs/render/dispatch", meta="colour", payload="x")
    child = post(ui, "/jobs/render", "/jobs/render/dispatch", meta="colour=blue\n", payload="a square")
    name = re.search(r"dispatched (render/dispatch-[0-9a-f-]+)", child)
    assert name, child
    alloc = re.search(r'href="/ui/allocations/([0-9a-f-]+)"', child)
    assert alloc
    wait_for(lambda: "blue a square" in ui.get(f"/allocations/{alloc[1]}/logs/t").text, what="the child's output")


def test_restart_and_signal_a_task_then_stop_the_job(agent: AgentProcess, ui: httpx.Client) -> None:
    alloc = re.findall(r'href="/ui/allocations/([0-9a-f-]+)"', ui.get("/jobs/svc").text)[0]
    agent.wait_task(alloc, "t")
    page = f"/allocations/{alloc}"
    wait_for(lambda: re.search(r"<td>svc</td><td>alive</td><td>.*passing.*all &lt;good&gt;",
                               ui.get(f"{page}?fragment=tasks").text), what="the check shown, passing")
    shown = post(ui, page, f"{page}/signal", task="t", signal="SIGHUP")
    assert "SIGHUP sent to t" in shown
    wait_for(lambda: "got HUP" in ui.get(f"{page}/logs/t").text, what="the task's trap")
    assert "restarting t" in post(ui, page, f"{page}/restart", task="t")
    agent.wait_event(alloc, "t", "Restart Signal")
    wait_for(lambda: "restarts 1" in ui.get(f"{page}?fragment=tasks").text, what="the restart counted")
    assert "Restart requested in the web UI" in ui.get(page).text
    # The restarted task's usage is shown once the collector has sampled its new process.
    def sampled() -> str | None:
        text = ui.get(f"{page}?fragment=stats").text
        return text if "MiB" in text else None

    stats = wait_for(sampled, what="the restarted task's usage")
    assert '<table id="stats">' in stats
    # Followed through the UI, the log streams what the API streams.
    with ui.stream("GET", f"/stream/allocations/{alloc}/logs/t", params={"stream": "stdout"}) as log:
        assert log.status_code == 200 and b"up\n" in log.read()
    events = ui.get("/stream/events", params={"alloc_id": alloc, "follow": "false"})
    assert events.headers["content-type"].startswith("text/event-stream") and "Restart Signal" in events.text
    assert "job svc stopping" in post(ui, "/jobs/svc", "/jobs/svc/stop")
    with agent.http() as http:
        wait_for(lambda: http.get("/v1/jobs/svc").json()["status"] == "stopped", what="svc stopped")
    # (a stopped task has no restart button: the form of another page posts it)
    assert "is not running" in post(ui, "/jobs/svc", f"{page}/restart", task="t")


def test_what_is_not_there(ui: httpx.Client) -> None:
    missing = ui.get("/jobs/nothing")
    assert missing.status_code == 404 and "no job" in missing.text and "<!doctype html>" in missing.text
    assert ui.get("/allocations/0000").status_code == 404
    gone = ui.get("/allocations/0000?fragment=tasks")  # a page's part, of an allocation collected meanwhile
    assert gone.status_code == 404 and "no allocation" in gone.text
    assert ui.get("/?fragment=../layout").status_code == 404
    assert ui.get("/jobs/svc?fragment=tasks").status_code == 404  # another page's part
    assert ui.get("/static/nothing.js").status_code == 404


def test_helpers() -> None:
    assert [size(None), size(3 << 20), size(5 << 30)] == ["-", "3.0 MiB", "5120.0 MiB"]
    assert parse_meta("a=1\n\n b = x=y\n") == {"a": "1", "b": " x=y"}
    for wrong in ("novalue", "=value"):
        with pytest.raises(ApiFailure, match="cannot dispatch"):
            parse_meta(wrong)

