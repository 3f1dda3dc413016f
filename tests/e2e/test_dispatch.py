"""Parameterized jobs against a real agent and real processes: registered, dispatched, refused.

The tasks are shell scripts that print the meta they see and the payload file
they find; the tests read that output through the agent, as a user would.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent import AgentProcess

CONVERT = """
job "{name}" {{
  type = "batch"
  parameterized {{
    payload       = "{payload}"
    meta_required = ["input"]
    meta_optional = ["format"]
  }}
  group "g" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    task "convert" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", <<-EOS
          echo job=$NOMAD_JOB_NAME input=$NOMAD_META_input format=$NOMAD_META_format
          if [ -e local/in/data.txt ]; then echo payload=$(cat local/in/data.txt); else echo no payload; fi
          EOS
        ]
      }}
      dispatch_payload {{
        file = "in/data.txt"
      }}
    }}
  }}
}}
"""

REPO = Path(__file__).resolve().parents[2]
CHILD = re.compile(r"^(?P<parent>[a-z-]+)/dispatch-(?P<time>\d+)-[0-9a-f]{8}$")


def convert(name: str, payload: str = "optional") -> str:
    return CONVERT.format(name=name, payload=payload)


@pytest.fixture
def agent(shared_agent: AgentProcess) -> AgentProcess:
    return shared_agent


def jobs(agent: AgentProcess) -> dict[str, dict[str, Any]]:
    with agent.http() as http:
        return {job["name"]: job for job in http.get("/v1/jobs").json()["jobs"]}


def children(agent: AgentProcess, parent: str) -> list[str]:
    return sorted(name for name in jobs(agent) if name.startswith(f"{parent}/"))


def output(agent: AgentProcess, child: str) -> str:
    """What the child's one task printed, once it is done."""
    [alloc] = jobs(agent)[child]["allocations"]
    agent.wait_task(alloc["id"], "convert", "dead")
    return agent.cli("alloc", "logs", alloc["id"], "convert").stdout


def dispatch(agent: AgentProcess, name: str, meta: dict[str, str] | None = None, payload: bytes = b"") -> Any:
    with agent.http() as http:
        return http.post(f"/v1/jobs/{name}/dispatch",
                         json={"meta": meta or {}, "payload": base64.b64encode(payload).decode()})


def test_a_parameterized_job_is_registered_not_run(agent: AgentProcess, tmp_path: Path) -> None:
    job = tmp_path / "convert.hcl"
    job.write_text(convert("registered"))
    run = agent.cli("job", "run", str(job))
    assert run.returncode == 0, run.stderr
    assert "Job registered registered: parameterized, it runs when dispatched" in run.stderr
    assert "Warning" not in run.stderr
    entry = jobs(agent)["registered"]
    assert entry["parameterized"] and entry["status"] == "running" and entry["allocations"] == []
    with agent.http() as http:
        assert not [a for a in http.get("/v1/allocations").json()["allocations"] if a["job"] == "registered"]
    assert "registered  running  parameterized" in agent.cli("job", "status").stdout


def test_dispatch_with_meta_and_payload_reaches_the_task(agent: AgentProcess, tmp_path: Path) -> None:
    agent.submit(convert("frames"))
    payload = tmp_path / "payload.txt"
    payload.write_text("frame-0042")
    dispatched = agent.cli("job", "dispatch", "-meta", "input=a.png", "--meta", "format=webp", "frames",
                           str(payload))
    assert dispatched.returncode == 0, dispatched.stderr
    child = dispatched.stdout.strip()
    match = CHILD.match(child)
    assert match and match["parent"] == "frames", child
    assert output(agent, child) == f"job={child} input=a.png format=webp\npayload=frame-0042\n"

    # From stdin; an optional payload not given is no file at all, as in Nomad.
    piped = agent.cli("job", "dispatch", "--json", "-meta", "input=b.png", "frames", "-", input="from-stdin")
    assert piped.returncode == 0, piped.stderr
    answer = json.loads(piped.stdout)
    assert answer["parent"] == "frames" and CHILD.match(answer["name"])
    assert output(agent, answer["name"]).endswith("input=b.png format=\npayload=from-stdin\n")
    bare = agent.cli("job", "dispatch", "-meta", "input=c.png", "frames").stdout.strip()
    assert output(agent, bare).endswith("input=c.png format=\nno payload\n")

    # Children are ordinary jobs; the parent stays registered and never runs itself.
    assert children(agent, "frames") == sorted([child, answer["name"], bare])
    assert jobs(agent)["frames"]["allocations"] == []


def test_the_api_dispatches_with_a_base64_payload(agent: AgentProcess) -> None:
    agent.submit(convert("api-convert", payload="required"))
    answer = dispatch(agent, "api-convert", {"input": "x"}, b"sent as base64")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["parent"] == "api-convert" and CHILD.match(body["name"]) and len(body["allocations"]) == 1
    assert output(agent, body["name"]).endswith("payload=sent as base64\n")


REFUSALS = [
    ("forbid", "forbidden", {"input": "x"}, b"data", "the job forbids a payload and one of 4 bytes was given"),
    ("need", "required", {"input": "x"}, b"", "the job requires a payload and none was given"),
    ("meta", "optional", {}, b"", "missing required meta 'input'"),
    ("undeclared", "optional", {"input": "x", "colour": "red"}, b"",
     "meta 'colour' not declared by the job (meta_required: 'input'; meta_optional: 'format')"),
    ("big", "optional", {"input": "x"}, b"x" * (16 * 1024 + 1),
     "the payload is 16385 bytes, more than the 16384 (16 KiB) allowed"),
]


@pytest.mark.parametrize(("name", "payload_rule", "meta", "payload", "message"), REFUSALS,
                         ids=[refusal[0] for refusal in REFUSALS])
def test_each_refusal_names_what_is_wrong_and_dispatches_nothing(
        agent: AgentProcess, tmp_path: Path, name: str, payload_rule: str, meta: dict[str, str], payload: bytes,
        message: str) -> None:
    agent.submit(convert(name, payload=payload_rule))
    answer = dispatch(agent, name, meta, payload)
    assert answer.status_code == 400, answer.text
    assert answer.json() == {"error": "cannot dispatch the job", "errors": [f"cannot dispatch job {name!r}: {message}"]}

    (tmp_path / "payload").write_bytes(payload)
    args = [arg for key, value in meta.items() for arg in ("-meta", f"{key}={value}")]
    refused = agent.cli("job", "dispatch", *args, name, *([str(tmp_path / "payload")] if payload else []))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert refused.stdout == "" and "Traceback" not in refused.stderr
    # The command line refuses an oversized payload itself, without sending it.
    assert message in refused.stderr or (name == "big" and "larger than the 16384 bytes" in refused.stderr)
    assert children(agent, name) == []


def test_only_a_parameterized_job_is_dispatched(agent: AgentProcess) -> None:
    agent.submit('job "plain" {\n type = "batch"\n task "t" {\n driver = "raw_exec"\n'
                 ' config {\n command = "true"\n }\n }\n}\n')
    answer = dispatch(agent, "plain")
    assert answer.status_code == 400
    assert answer.json()["errors"] == ["job 'plain' is not parameterized: only a parameterized job is dispatched"]
    refused = agent.cli("job", "dispatch", "plain")
    assert refused.returncode == 1 and "is not parameterized" in refused.stderr
    assert dispatch(agent, "nowhere").status_code == 404
    missing = agent.cli("job", "dispatch", "nowhere")
    assert missing.returncode == 1 and "no job 'nowhere'" in missing.stderr
    assert children(agent, "plain") == []


def test_registration_survives_a_killed_agent_and_stopping_ends_dispatches(tmp_path: Path) -> None:
    agent = AgentProcess(tmp_path)
    agent.start()
    try:
        agent.submit(convert("kept"))
        agent.kill()
        agent.start()
        assert jobs(agent)["kept"]["parameterized"]
        answer = dispatch(agent, "kept", {"input": "after-restart"})
        assert answer.status_code == 200, answer.text
        assert "input=after-restart" in output(agent, answer.json()["name"])

        stopped = agent.cli("job", "stop", "kept")
        assert stopped.returncode == 0, stopped.stderr
        assert dispatch(agent, "kept", {"input": "x"}).status_code == 409
        agent.kill()
        agent.start()
        assert jobs(agent)["kept"]["status"] == "stopped"
        assert dispatch(agent, "kept", {"input": "x"}).status_code == 409
    finally:
        agent.shutdown()


def test_herder_run_dispatches_once_in_the_foreground(tmp_path: Path) -> None:
    job = tmp_path / "convert.hcl"
    job.write_text(convert("local"))
    payload = tmp_path / "payload.txt"
    payload.write_text("from-a-file")

    def herder(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "herder", "run", str(job), "--data-dir", str(tmp_path / "data"),
                               *args], capture_output=True, text=True, timeout=120)

    run = herder("--logs", "--meta", "input=in.png", "-meta", "format=gif", "--payload", str(payload))
    assert run.returncode == 0, run.stderr
    dispatched = re.search(r"Dispatched job (\S+)", run.stderr)
    assert dispatched and CHILD.match(dispatched[1]), run.stderr
    child = dispatched[1]
    shown = run.stdout + run.stderr
    assert f"job={child} input=in.png format=gif" in shown and "payload=from-a-file" in shown
    assert f"Job {child}: complete" in run.stderr

    refused = herder("--meta", "format=gif")
    assert refused.returncode == 2
    assert "cannot dispatch job 'local': missing required meta 'input'" in refused.stderr
    assert "Received" not in refused.stderr + refused.stdout

    plain = tmp_path / "plain.hcl"
    plain.write_text('job "plain" {\n type = "batch"\n task "t" {\n driver = "raw_exec"\n'
                     ' config {\n command = "true"\n }\n }\n}\n')
    misused = subprocess.run([sys.executable, "-m", "herder", "run", str(plain), "--data-dir", str(tmp_path / "data"),
                              "--meta", "input=x"], capture_output=True, text=True, timeout=120)
    assert misused.returncode == 2
    assert "--meta and --payload dispatch a parameterized job; job plain is not one" in misused.stderr


def test_meta_that_is_not_key_value_is_a_usage_error(agent: AgentProcess) -> None:
    result = agent.cli("job", "dispatch", "-meta", "novalue", "frames")
    assert result.returncode == 2 and "'novalue': expected KEY=VALUE" in result.stderr


def test_the_example_is_dispatched_as_its_comments_say(agent: AgentProcess) -> None:
    run = agent.cli("job", "run", str(REPO / "examples" / "convert.hcl"))
    assert run.returncode == 0 and "registered" in run.stderr, run.stderr
    dispatched = agent.cli("job", "dispatch", "-meta", "input=photo.png", "-meta", "format=webp", "convert", "-",
                           input='{"width": 640}')
    assert dispatched.returncode == 0, dispatched.stderr
    child = dispatched.stdout.strip()
    [alloc] = jobs(agent)[child]["allocations"]
    agent.wait_task(alloc["id"], "convert", "dead")
    assert agent.cli("alloc", "logs", alloc["id"], "convert").stdout == (
        f"converting photo.png to webp (job {child})\noptions: {{\"width\": 640}}\n")


@pytest.mark.parametrize("payload", ["!!", "é", "YQ"])
def test_a_payload_that_is_not_base64_is_a_400(agent: AgentProcess, payload: str) -> None:
    with agent.http() as http:
        answer = http.post("/v1/jobs/nowhere/dispatch", json={"payload": payload})
    assert answer.status_code == 400 and answer.json()["error"] == "payload: not base64"
