"""Jobs as the real ``nomad`` 1.1 command line sends them, Nomad's API structs with every field
filled (zero values meaning unset, SPEC §17); ``nomad job validate``; ``job inspect``'s output sent back."""

from __future__ import annotations

import json
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from herder.errors import JobError
from herder.jobspec import load_job, validate_task_configs
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins
from tests.core.nomad_api.conftest import NomadAgent
from tests.support.waiting import wait_for

# An agent and the real nomad command line, as subprocesses: the API they test is the same on every Python.
pytestmark = pytest.mark.slow

CORPUS = Path(__file__).parents[1] / "jobspec" / "corpus"
IGNORING = re.compile(r"ignoring stanzas herder does not implement: (.*)")


def example(agent: NomadAgent, tmp_path: Path) -> Path:
    """``nomad job init``'s example.nomad, unchanged but its task (raw_exec, a Python serving the port
    of the group's service) and its check, uncommented (a tcp check of that port)."""
    init = agent.nomad("job", "init", cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    path = tmp_path / "example.nomad"
    text = path.read_text()
    text = text.replace('driver = "docker"', 'driver = "raw_exec"')
    text = re.sub(r'image = "redis:3\.2"\s*ports = \["db"\]',
                  f'command = "{sys.executable}"\n        args = ["-m", "http.server", "${{NOMAD_HOST_PORT_db}}"]',
                  text)
    text = re.sub(r"# check \{.*?# \}", lambda found: found.group(0).replace("# ", ""), text, flags=re.DOTALL)
    assert 'type     = "tcp"' in text and "http.server" in text, "nomad job init wrote another example"
    path.write_text(text)
    return path


def warned(output: str) -> set[str]:
    """The names of the stanzas a warning says herder ignores."""
    found = IGNORING.search(output)
    return set(found.group(1).split(", ")) if found else set()


def test_job_init_runs_with_its_service_and_check_and_inspect_round_trips(nomad_agent: NomadAgent,
                                                                          tmp_path: Path) -> None:
    run = nomad_agent.nomad("job", "run", "-detach", str(example(nomad_agent, tmp_path)))
    assert run.returncode == 0, run.stdout + run.stderr
    # Nothing: its migrate block means nothing on one node, and the CLI's fields sent at zero are read as unset.
    assert warned(run.stdout) == set(), run.stdout
    (alloc,) = nomad_agent.get("/v1/job/example/allocations")

    def check() -> list[dict[str, Any]] | None:
        checks = [c for task in nomad_agent.alloc(alloc["ID"])["tasks"].values() for c in task.get("checks", [])]
        return checks if checks and checks[0]["status"] == "passing" else None

    assert [(c["service"], c["check"]) for c in wait_for(check, what="the example's check passing")] \
        == [("redis-cache", "alive")]

    inspected = nomad_agent.nomad("job", "inspect", "example")
    assert inspected.returncode == 0, inspected.stderr
    def versions() -> list[tuple[int, int]]:
        return [(v["Version"], v["SubmitTime"]) for v in nomad_agent.get("/v1/job/example/versions")["Versions"]]

    before = versions()
    with nomad_agent.nomad_http() as http:
        again = http.put("/v1/jobs", content=inspected.stdout)
    assert again.status_code == 200, again.text
    assert versions() == before, json.dumps(nomad_agent.get("/v1/job/example/versions")["Versions"], indent=1)
    (same,) = nomad_agent.get("/v1/job/example/allocations")
    assert (same["ID"], same["ClientStatus"]) == (alloc["ID"], "running")
    assert all(state["Restarts"] == 0 for state in same["TaskStates"].values())
    stopped = nomad_agent.nomad("job", "stop", "example")
    assert stopped.returncode == 0, stopped.stderr


def test_every_corpus_job_herder_reads_as_hcl_it_reads_as_the_clis_json(nomad_agent: NomadAgent) -> None:
    """The CLI's HCL to JSON conversion (``job run -output``, no server asked) of each job file of the
    corpus, validated by the listener: what validates as HCL validates as JSON, with no other warning;
    a task whose driver this agent lacks is the same problem in both."""
    hooks = Hooks(load_plugins())  # the agent's plugins: the same installation

    def validated(path: Path) -> dict[str, Any] | None:
        """The listener's validation of the CLI's JSON of ``path``; None where the CLI cannot read it
        (a file newer than Nomad 1.1: node_pool, crons, ...)."""
        converted = nomad_agent.nomad("job", "run", "-output", str(path))
        if converted.returncode != 0:
            return None
        with nomad_agent.nomad_http() as http:
            answer = http.put("/v1/validate/job", content=converted.stdout)
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    paths = sorted(CORPUS.glob("*.hcl")) + sorted(CORPUS.glob("*.nomad"))
    with ThreadPoolExecutor(4) as pool:  # the command lines and requests wait while the HCL is read here
        answers = pool.map(validated, paths)
        compared: list[str] = []
        for path, result in zip(paths, answers, strict=True):
            try:
                job = load_job(path)
            except JobError:
                continue
            if result is None:
                continue
            expected = validate_task_configs(job, hooks.task_schemas(), hooks.plugins.unavailable())
            assert _paths(result["ValidationErrors"] or []) == _paths(expected), (path.name, result)
            assert warned(result["Warnings"]) <= warned("\n".join(job.warnings)), (path.name, result["Warnings"])
            compared.append(path.name)
    assert len(compared) >= 40, compared


def _paths(problems: list[str]) -> list[str]:
    """Problems without the file and line that place those of a file (``web.nomad:12: job.groups[0]...``)."""
    return sorted(problem[problem.index("job."):] if "job." in problem else problem for problem in problems)


INVALID = """
job "invalid" {
  datacenters = ["dc1"]
  group "g" {
    task "a" {
      driver = "raw_exec"
      config {
        nonsense = 1
      }
    }
    task "b" {
      driver = "nonesuch"
    }
  }
}
"""


def test_job_validate_checks_with_the_agents_drivers_and_runs_nothing(nomad_agent: NomadAgent,
                                                                      tmp_path: Path) -> None:
    path = example(nomad_agent, tmp_path)
    # A key herder does not implement, whose warning the agent's validation hands the CLI.
    vault = 'driver = "raw_exec"\n      vault { policies = ["read"] }'
    path.write_text(path.read_text().replace('driver = "raw_exec"', vault, 1))
    valid = nomad_agent.nomad("job", "validate", str(path))
    assert valid.returncode == 0, valid.stdout + valid.stderr
    assert "Job validation successful" in valid.stdout
    # The CLI checks locally, and says so, when the agent has no validation to offer.
    assert "Driver configuration not validated" not in valid.stdout
    assert "ignoring stanzas herder does not implement: vault" in valid.stdout

    path = tmp_path / "invalid.nomad"
    path.write_text(INVALID)
    invalid = nomad_agent.nomad("job", "validate", str(path))
    assert invalid.returncode == 1, invalid.stdout + invalid.stderr
    assert "Job validation errors:" in invalid.stderr
    assert "job.groups[0].tasks[0].config.nonsense: unknown key" in invalid.stderr
    assert "job.groups[0].tasks[1].driver: unknown driver 'nonesuch'" in invalid.stderr
    assert "invalid" not in [job["ID"] for job in nomad_agent.get("/v1/jobs")]
