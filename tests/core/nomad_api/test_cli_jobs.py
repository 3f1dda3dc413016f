"""The real ``nomad`` 1.1 command line plans, checks, purges and finds jobs (SPEC §17), exit codes included."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.core.nomad_api.conftest import NomadAgent
from tests.core.nomad_api.test_cli import allocs, running_alloc, service
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow


def plan(agent: NomadAgent, path: Path, *args: str) -> tuple[int, str]:
    done = agent.nomad("job", "plan", *args, str(path))
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 255: an error
    return done.returncode, done.stdout


def test_plan_says_what_a_run_would_do_and_check_index_enforces_it(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    path = service(tmp_path, "planned")
    code, out = plan(nomad_agent, path)
    assert code == 1, out  # allocations would be created
    assert '+ Job: "planned"' in out and '+ Task Group: "g" (1 create)' in out and '+ Task: "t" (forces create)' in out
    assert "All tasks successfully allocated." in out
    assert "nomad job run -check-index 0" in out

    ran = nomad_agent.nomad("job", "run", "-detach", "-check-index", "0", str(path))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    running_alloc(nomad_agent, "planned")

    code, out = plan(nomad_agent, path)
    assert code == 0, out  # nothing changes
    assert 'Job: "planned"' in out and 'Task Group: "g" (1 ignore)' in out
    index = int(out.split("Job Modify Index: ")[1].split()[0])
    assert index > 0 and nomad_agent.get("/v1/job/planned")["JobModifyIndex"] == index

    changed = service(tmp_path, "planned", word="changed")
    code, out = plan(nomad_agent, changed)
    assert code == 1, out
    assert '+/- Task Group: "g" (1 create/destroy update)' in out, out
    assert '+/- Task: "t" (forces create/destroy update)' in out
    assert "+/- Config {" in out and 'echo hello;' in out and 'echo changed;' in out

    restarted = tmp_path / "restarted.nomad"
    original = service(tmp_path, "planned").read_text()
    restarted.write_text(original.replace("update {", "restart {\n      attempts = 5\n    }\n    update {"))
    code, out = plan(nomad_agent, restarted)
    assert code == 0, out  # in place: no allocation is created or destroyed
    assert '+/- Task Group: "g" (1 in-place update)' in out and '+/- Task: "t" (forces in-place update)' in out
    assert '+/- Attempts: "2" => "5"' in out and 'Mode:     "fail"' in out

    scaled = service(tmp_path, "planned", count=3)
    code, out = plan(nomad_agent, scaled)
    assert code == 1, out
    assert '+/- Count: "1" => "3" (forces create)' in out and "(2 create, 1 in-place update)" in out

    stale = nomad_agent.nomad("job", "run", "-detach", "-check-index", str(index + 1000), str(changed))
    assert stale.returncode == 1
    assert (f"Enforcing job modify index {index + 1000}: job exists with conflicting job modify index: {index}"
            in stale.stderr), stale.stderr
    assert len({a["JobVersion"] for a in allocs(nomad_agent, "planned")}) == 1  # nothing was submitted

    with nomad_agent.nomad_http() as http:  # Nomad's other two refusals
        job = {"ID": "planned", "TaskGroups": []}
        exists = http.put("/v1/jobs", json={"Job": job, "EnforceIndex": True, "JobModifyIndex": 0})
        assert (exists.status_code, exists.text) == (409, "Enforcing job modify index 0: job already exists")
        job = {"ID": "never-registered", "TaskGroups": []}
        missing = http.put("/v1/jobs", json={"Job": job, "EnforceIndex": True, "JobModifyIndex": 7})
        assert (missing.status_code, missing.text) == (409, "Enforcing job modify index 7: job does not exist")

    fresh = nomad_agent.nomad("job", "run", "-detach", "-check-index", str(index), str(changed))
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    assert nomad_agent.get("/v1/job/planned")["JobModifyIndex"] > index
    purge(nomad_agent, "planned")


def test_plan_of_an_invalid_job_exits_255(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    with nomad_agent.nomad_http() as http:
        answer = http.put("/v1/job/bad/plan", json={"Job": {"ID": "bad", "TaskGroups": [{"Name": "g", "Count": -1}]}})
    assert answer.status_code == 400 and answer.headers["content-type"].startswith("text/plain"), answer.text
    path.write_text('job "bad" {\n  group "g" {\n    task "t" {\n      driver = "nothing-here"\n    }\n  }\n}\n')
    done = nomad_agent.nomad("job", "plan", str(path))
    assert done.returncode == 1, done.stdout + done.stderr  # an unknown driver places nothing, as Nomad's
    assert 'Task Group "g" (failed to place 1 allocation)' in done.stdout, done.stdout
    assert "missing drivers" in done.stdout


def purge(agent: NomadAgent, job: str) -> None:
    stopped = agent.nomad("job", "stop", "-purge", job)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr


def test_stop_purge_forgets_the_job_after_stopping_its_allocations(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    ran = nomad_agent.nomad("job", "run", "-detach", str(service(tmp_path, "purged")))
    assert ran.returncode == 0, ran.stderr
    alloc = running_alloc(nomad_agent, "purged")
    purge(nomad_agent, "purged")

    status = nomad_agent.nomad("job", "status", "purged")
    assert status.returncode == 1 and 'No job(s) with prefix or id "purged" found' in status.stderr, status
    assert "purged" not in nomad_agent.nomad("job", "status").stdout
    with nomad_agent.http() as http:  # herder's own API forgets it too
        assert http.get("/v1/jobs/purged").status_code == 404
    # Its allocation was stopped, then collected.
    wait_for(lambda: all(a["ID"] != alloc for a in nomad_agent.get("/v1/allocations")), what="the allocation collected")
    again = nomad_agent.nomad("job", "run", "-detach", str(service(tmp_path, "purged")))
    assert again.returncode == 0, again.stderr  # the name is free again
    purge(nomad_agent, "purged")


def test_stop_purge_of_a_periodic_job_leaves_its_children(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    path = tmp_path / "nightly.nomad"
    path.write_text('job "nightly" {\n  type = "batch"\n  periodic {\n    cron = "0 0 * * *"\n  }\n'
                    '  group "g" {\n    task "t" {\n      driver = "raw_exec"\n'
                    '      config {\n        command = "/bin/sleep"\n        args = ["3600"]\n      }\n    }\n  }\n}\n')
    ran = nomad_agent.nomad("job", "run", str(path))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    forced = nomad_agent.nomad("job", "periodic", "force", "-detach", "nightly")
    assert forced.returncode == 0, forced.stderr
    child = wait_for(lambda: next((j["ID"] for j in nomad_agent.get("/v1/jobs") if j["ParentID"] == "nightly"), None),
                     what="the launched child")
    purge(nomad_agent, "nightly")
    with nomad_agent.nomad_http() as http:
        assert http.get("/v1/job/nightly").status_code == 404  # (`job status nightly` finds the child, a prefix)
    listed = {j["ID"]: j for j in nomad_agent.get("/v1/jobs")}
    assert "nightly" not in listed and child in listed  # stopped, as Nomad stops a periodic job's children
    wait_for(lambda: nomad_agent.get(f"/v1/job/{child}")["Status"] == "dead", what="the child stopped")
    purge(nomad_agent, child)


def test_status_and_search_find_jobs_allocations_and_the_node(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    ran = nomad_agent.nomad("job", "run", "-detach", str(service(tmp_path, "searched")))
    assert ran.returncode == 0, ran.stderr
    alloc = running_alloc(nomad_agent, "searched")

    job = nomad_agent.nomad("status", "searc")
    assert job.returncode == 0, job.stderr
    assert "ID            = searched" in job.stdout
    shown = nomad_agent.nomad("status", alloc[:8])
    assert shown.returncode == 0 and f"ID                  = {alloc}" in shown.stdout, shown.stdout + shown.stderr
    node = nomad_agent.get("/v1/nodes")[0]["ID"]
    assert nomad_agent.nomad("status", node[:8]).stdout.count("Status") >= 1
    missing = nomad_agent.nomad("status", "no-such-thing")
    assert missing.returncode == 1 and 'Unable to resolve ID: "no-such-thing"' in missing.stderr

    with nomad_agent.nomad_http() as http:
        found = http.put("/v1/search", json={"Prefix": "searc", "Context": "jobs"}).json()
        assert found["Matches"] == {"jobs": ["searched"]} and found["Truncations"] == {"jobs": False}
        fuzzy = http.put("/v1/search/fuzzy", json={"Text": "earche", "Context": "all"}).json()
        assert {"ID": "searched", "Scope": ["default", "searched"]} in fuzzy["Matches"]["jobs"]
        assert {"ID": "searched.g[0]", "Scope": ["default", alloc]} in fuzzy["Matches"]["allocs"]
        command = http.put("/v1/search/fuzzy", json={"Text": "bin/s", "Context": "commands"}).json()
        assert {"ID": "/bin/sh", "Scope": ["default", "searched", "g", "t"]} in command["Matches"]["commands"]
        short = http.put("/v1/search/fuzzy", json={"Text": "s"})
        assert short.status_code == 400 and short.text == "fuzzy search query must be at least 2 characters, got 1"
        unknown = http.put("/v1/search", json={"Prefix": "s", "Context": "bogus"})
        assert unknown.status_code == 400 and "context must be one of" in unknown.text
    purge(nomad_agent, "searched")


def test_ui_opens_the_web_ui_which_asks_for_the_token(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    ran = nomad_agent.nomad("job", "run", "-detach", str(service(tmp_path, "shown")))
    assert ran.returncode == 0, ran.stderr
    opened = nomad_agent.nomad("ui", "shown")
    assert f'Opening URL "{nomad_agent.nomad_url}/ui/jobs/shown"' in opened.stdout, opened.stdout + opened.stderr

    # The URL the command line opens, as a browser opens it: no token, no cookie.
    with httpx.Client(timeout=30.0) as browser:
        answer = browser.get(f"{nomad_agent.nomad_url}/ui/jobs/shown")
        assert answer.status_code == 307
        assert answer.headers["location"] == f"{nomad_agent.url}/ui/jobs/shown"
        page = browser.get(answer.headers["location"])
    # The sign-in form (a URL opens no session), which then shows the job.
    assert page.status_code == 401 and 'type="password"' in page.text
    assert 'name="then" value="/jobs/shown"' in page.text
    purge(nomad_agent, "shown")
