"""A task makes herder (root) read a huge file for a template (SPEC §14).

A template's ``file`` and ``source`` read files of the task and alloc dirs,
which the task writes: herder read them whole into its memory, so a sparse
file of some gigabytes (no disk used) took the agent's memory. A read is
bounded as a render's output is (1 MiB), and one over it fails the render,
naming the file and the limit.
"""

from __future__ import annotations

import pytest

from tests.support.agent import AgentProcess

JOB = """
job "{name}" {{
  type = "batch"
  group "g" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    task "plant" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", "truncate -s 64M ../alloc/data/big.part && mv ../alloc/data/big.part ../alloc/data/big"]
      }}
    }}
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "/bin/true"
      }}
      template {{
        {template}
        destination = "local/out"
      }}
    }}
  }}
}}
"""


@pytest.mark.parametrize(("name", "template", "read"), [
    ("tpl-file", 'data = "{{ $big := file \\"../alloc/data/big\\" }}small"', "file(../alloc/data/big)"),
    ("tpl-source", 'source = "../alloc/data/big"', "source(../alloc/data/big)"),
])
def test_a_huge_file_planted_for_a_template_is_not_read_whole(shared_agent: AgentProcess, name: str, template: str,
                                                              read: str) -> None:
    [alloc] = shared_agent.submit(JOB.format(name=name, template=template))["allocations"]
    try:
        task = shared_agent.wait_task(alloc["id"], "t", "dead")
        failures = [e["message"] for e in task["events"] if e["type"] == "Setup Failure"]
        assert failures and f"{read}: data/big: larger than the limit of 1048576 bytes" in failures[-1], task["events"]
        assert task["failed"]
    finally:
        shared_agent.cli("job", "stop", name)
