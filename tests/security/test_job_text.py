"""A job's author describes work; the text is data (SPEC §14).

Each test is an attack by a job's author: reading the agent's files through
``file()``, making the parser, the evaluator or a template spend unbounded time
or memory. Each must fail cleanly (a 400, an invalid job, a failed task with a
message), leak nothing, and leave the agent answering.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from herder.errors import JobError
from herder.jobspec import load, load_job_text
from tests.support.agent import AgentProcess

REFUSED = "file() is not available to jobs submitted to the agent: use `herder job run`, which reads files on your side"
SECRET = "s3cret-4c1d-never-show-me"


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[AgentProcess]:
    (tmp_path / "agent").mkdir()
    process = AgentProcess(tmp_path / "agent")
    process.start()
    try:
        yield process
    finally:
        process.shutdown()


def batch_job(name: str, config: str, extra: str = "") -> str:
    return textwrap.dedent(f"""
        job "{name}" {{
          type = "batch"
          group "g" {{
            restart {{
              attempts = 0
              mode     = "fail"
            }}
            task "t" {{
              driver = "raw_exec"
              config {{
                {config}
              }}
              {extra}
            }}
          }}
        }}
    """)


def post_job(agent: AgentProcess, body: dict[str, Any], timeout: float = 30.0) -> httpx.Response:
    with agent.http() as http:
        return http.post("/v1/jobs", json=body, timeout=timeout)


# -- file() ------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["hcl", "yaml"])
def test_file_in_a_job_sent_to_the_agent_is_refused_and_leaks_nothing(agent: AgentProcess, tmp_path: Path,
                                                                      fmt: str) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    if fmt == "hcl":
        text = batch_job("leak", f'command = "/bin/true"\nargs = [tonumber(file("{secret}"))]')
    else:
        text = textwrap.dedent(f"""
            job:
              name: leak
              type: batch
              groups:
                - name: g
                  tasks:
                    - name: t
                      driver: raw_exec
                      config: {{command: /bin/true, args: ['${{tonumber(file("{secret}"))}}']}}
        """)
    response = post_job(agent, {"text": text, "format": fmt})
    assert response.status_code == 400, response.text
    assert SECRET not in response.text
    assert any(REFUSED in error for error in response.json()["errors"]), response.text


def test_the_source_field_does_not_choose_where_file_reads(agent: AgentProcess, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text(SECRET)
    text = batch_job("leak", 'command = "/bin/true"\nargs = [tonumber(file("secret.txt"))]')
    response = post_job(agent, {"text": text, "format": "hcl", "source": str(tmp_path / "job.hcl")})
    assert response.status_code == 400, response.text
    assert SECRET not in response.text
    assert any(REFUSED in error for error in response.json()["errors"]), response.text


def herder(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "herder", *args], capture_output=True, text=True, timeout=120)


def test_validate_keeps_file_inside_the_job_files_directory(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text(SECRET)
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "inside.txt").write_text("inside")
    (jobs / "link.txt").symlink_to(tmp_path / "outside.txt")
    config = tmp_path / "herder.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n[plugin.raw_exec]\nenabled = true\n')
    job = jobs / "web.hcl"

    def validate(path: str, *flags: str, config_file: Path = config) -> subprocess.CompletedProcess[str]:
        job.write_text(batch_job("web", f'command = "/bin/true"\nargs = [tonumber(file("{path}"))]'))
        return herder("validate", "--config", str(config_file), *flags, str(job))

    for escape in ("../outside.txt", str(tmp_path / "outside.txt"), "link.txt", "inside/../../outside.txt"):
        refused = validate(escape)
        assert refused.returncode == 2, refused.stderr
        assert SECRET not in refused.stderr + refused.stdout
        assert "file()" in refused.stderr and "--allow-file-outside" in refused.stderr, refused.stderr

    inside = validate("inside.txt")  # read, and "inside" is no number: the content shows, as it is the user's
    assert inside.returncode == 2 and "'inside'" in inside.stderr, inside.stderr

    allowed = validate("../outside.txt", "--allow-file-outside")
    assert allowed.returncode == 2 and SECRET in allowed.stderr, allowed.stderr  # read: the user allowed it
    configured = tmp_path / "outside.toml"
    configured.write_text(config.read_text().replace("[plugin.raw_exec]", "[client]\nallow_file_outside = true\n"
                                                                         "[plugin.raw_exec]"))
    assert SECRET in validate("link.txt", config_file=configured).stderr


def test_job_run_evaluates_file_on_the_users_side(agent: AgentProcess, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "local.txt").write_text("hello from local.txt")
    (jobs / "web.hcl").write_text(batch_job("local", 'command = "/bin/sh"\nargs = ["-c", "printf %s \\"$CONTENT\\""]',
                                            'env { CONTENT = file("local.txt") }'))
    run = agent.cli("job", "run", "web.hcl", cwd=jobs)  # the agent's own directory is another
    assert run.returncode == 0, run.stderr
    [alloc] = json.loads(agent.cli("job", "status", "--json", "local").stdout)["allocations"]
    assert agent.cli("alloc", "logs", alloc["id"], "t").stdout == "hello from local.txt"


# -- bounded parsing and evaluation --------------------------------------------------------

ALIAS_BOMB = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
job: {name: bomb, meta: {x: *g}}
"""
BOMB_PROBE = """
import json, resource, sys, time, tracemalloc
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # a regression fails here, not on the machine
from herder.errors import JobError
from herder.jobspec import load, load_job_text
tracemalloc.start()
start = time.monotonic()
try:
    load_job_text(sys.stdin.read(), "yaml", "bomb.yaml")
    errors = []
except JobError as exc:
    errors = exc.errors
print(json.dumps({"errors": errors, "seconds": time.monotonic() - start, "peak": tracemalloc.get_traced_memory()[1]}))
"""


def test_a_yaml_alias_bomb_is_refused_in_bounded_time_and_memory() -> None:
    probe = subprocess.run([sys.executable, "-c", BOMB_PROBE], input=ALIAS_BOMB, capture_output=True, text=True,
                           timeout=120)
    assert probe.returncode == 0, probe.stderr[-2000:]
    result = json.loads(probe.stdout)
    assert result["errors"] and "alias" in result["errors"][0], result
    assert result["seconds"] < 30, result
    assert result["peak"] < 32 << 20, result  # the document is a few hundred bytes: a few MiB at most


def test_a_catastrophic_regex_neither_hangs_nor_freezes_the_agent(agent: AgentProcess) -> None:
    text = batch_job("redos", 'command = "/bin/true"', 'meta { x = replace("' + "a" * 64 + '!", "/(a+)+$/", "") }')
    answered: list[httpx.Response] = []
    submitting = threading.Thread(target=lambda: answered.append(post_job(agent, {"text": text}, timeout=120)))
    submitting.start()
    try:
        with agent.http() as http:  # the agent answers meanwhile: no evaluation holds it
            assert http.get("/v1/health", timeout=30.0).status_code == 200
    finally:
        submitting.join(150)
    assert answered and answered[0].status_code == 200, answered
    with agent.http() as http:
        alloc_id = answered[0].json()["allocations"][0]["id"]
        assert http.get(f"/v1/allocations/{alloc_id}").status_code == 200


@pytest.mark.parametrize(("expression", "message"), [
    ('format("%999999999d", 1)', "format(): width 999999999 is over"),
    ('join("", formatlist("%-999999999s", ["a"]))', "formatlist(): width 999999999 is over"),
    ('indent(999999999, "a\\nb")', "indent(): the result would be longer than"),
    ('join("", [for i in range(64): join("", [for j in range(1024): "xxxxxxxxxxxxxxxxxxxx"])])',
     "join(): the result would be longer than"),
    ("length([for a in range(1024): [for b in range(1024): [for c in range(1024): c]]])",
     "the job's expressions take more than 1000000 steps"),
])
def test_an_amplifying_function_is_refused(expression: str, message: str) -> None:
    started = time.monotonic()
    with pytest.raises(JobError) as caught:
        load_job_text(batch_job("fmt", 'command = "/bin/true"', f"meta {{ x = {expression} }}"), "hcl", "j.hcl")
    assert message in caught.value.errors[0], caught.value.errors
    assert time.monotonic() - started < 30


def meta_job(entries: int) -> str:
    meta = "".join(f'    key_{i:06d} = "value number {i} of the meta block"\n' for i in range(entries))
    return batch_job("big", 'command = "/bin/true"', f"meta {{\n{meta}}}")


def test_sixty_thousand_meta_entries_are_read_whole() -> None:
    job = load_job_text(meta_job(60_000), "hcl", "big.hcl")  # in time: bench/hcl_scaling.py measures it
    meta = job.groups[0].tasks[0].meta
    assert len(meta) == 60_000
    assert meta["key_059999"] == "value number 59999 of the meta block"


SLOW_STEPS = """
locals {
  spaces = join("", [for i in range(100): format("%10000s", "")])
}
job "slow" {
  meta {
    matches = length(flatten([for i in range(1024): [for j in range(8): length(regexall("[^x]+y", local.spaces))]]))
  }
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
"""


def test_a_slow_evaluation_of_few_steps_is_refused_by_its_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    # 8,192 scans of a megabyte in about 40,000 steps: the step counter sees nothing wrong, the clock does.
    monkeypatch.setattr(load, "MAX_SECONDS", 0.5)
    with pytest.raises(JobError) as caught:
        load_job_text(SLOW_STEPS, "hcl", "slow.hcl")
    assert caught.value.errors == ["slow.hcl: reading the job (parse and evaluation) takes more than 0.5 s "
                                   "of CPU time (its limit)"]


NESTED_TEMPLATES = "".join(
    f'{{{{define "t{n}"}}}}{{{{template "t{n - 1}" .}}}}{{{{template "t{n - 1}" .}}}}{{{{end}}}}' for n in range(1, 60)
)


@pytest.mark.parametrize("data", [
    '{{define "t0"}}xxxxxxxxxxxxxxxx{{end}}' + NESTED_TEMPLATES + '{{template "t59" .}}',
    '{{ range 100000 }}{{ printf "%999999d" 1 }}{{ end }}',
])
def test_a_template_bomb_fails_the_task_with_a_clear_error(agent: AgentProcess, data: str) -> None:
    template = "template {\n  data = " + json.dumps(data) + '\n  destination = "local/bomb.conf"\n}'
    submitted = agent.submit(batch_job("bomb", 'command = "/bin/true"', template))
    alloc_id = submitted["allocations"][0]["id"]
    status = agent.wait_task(alloc_id, "t", "dead", timeout=60)
    assert status["failed"]
    messages = " | ".join(event["message"] for event in status["events"])
    assert "local/bomb.conf" in messages and "template output exceeds 1048576 bytes" in messages, messages
    with agent.http() as http:
        assert http.get("/v1/health").status_code == 200


SPARSE_SIBLING = textwrap.dedent("""
    job "sparse" {
      type = "batch"
      group "g" {
        restart {
          attempts = 0
          mode     = "fail"
        }
        task "maker" {
          driver = "raw_exec"
          config {
            command = "/bin/sh"
            args = ["-c", "cd \\"$NOMAD_ALLOC_DIR/data\\" && truncate -s 1536M .big && mv .big big && exec sleep 600"]
          }
        }
        task "reader" {
          driver = "raw_exec"
          config {
            command = "/bin/true"
          }
          template {
            data        = "{{ file \\"alloc/data/big\\" | len }}"
            destination = "local/size.txt"
          }
        }
      }
    }
""")


def peak_memory(pid: int) -> int:
    """The most memory the process ``pid`` has held (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for {pid}")


def test_a_huge_sparse_file_from_a_sibling_is_refused_by_template_file_unread(agent: AgentProcess) -> None:
    submitted = agent.submit(SPARSE_SIBLING)
    alloc_id = submitted["allocations"][0]["id"]
    status = agent.wait_task(alloc_id, "reader", "dead", timeout=60)
    assert status["failed"]
    messages = " | ".join(event["message"] for event in status["events"])
    assert "file(alloc/data/big)" in messages and "larger than the limit of 1048576 bytes" in messages, messages
    assert agent.proc is not None
    assert peak_memory(agent.proc.pid) < 512 << 20  # the file is 1.5 GiB: it was never read into memory
    with agent.http() as http:
        assert http.get("/v1/health").status_code == 200


@pytest.mark.parametrize("body", [
    '{"job": {"name": "deep", "meta": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}}}",
    json.dumps({"text": '{"job": ' + "[" * 100_000 + "]" * 100_000 + "}", "format": "json"}),
    json.dumps({"text": "job: " + "[" * 100_000 + "]" * 100_000, "format": "yaml"}),
    json.dumps({"text": 'job "deep" {\n meta = { x = ' + "[" * 20_000 + "]" * 20_000 + " }\n}", "format": "hcl"}),
])
def test_deeply_nested_job_text_is_a_clean_400(agent: AgentProcess, body: str) -> None:
    with agent.http() as http:
        response = http.post("/v1/jobs", content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 400, response.text
        assert http.get("/v1/health").status_code == 200
