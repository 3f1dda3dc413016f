"""An isolated exec task runs what an artifact brought, configured by a template (real runc)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.core.client.artifact_support import tar_bytes
from tests.support.fileserver import FileServer, serve
from tests.support.running import run_job

SCRIPT = b"#!/bin/sh\n{ id -un; cat /local/app.conf; } > /local/out\n"


@pytest.fixture
def server() -> Iterator[FileServer]:
    yield from serve()


def test_an_exec_task_runs_its_artifact_with_its_rendered_config(exec_driver: str, server: FileServer,
                                                                 data_dir: Path) -> None:
    archive = tar_bytes([("bin/run.sh", SCRIPT)], "gz")
    server.files["/tool.tgz"] = archive
    job = f'''
job "j" {{
  type = "batch"
  group "g" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    task "t" {{
      driver = "exec"
      artifact {{
        source = "{server.url("/tool.tgz")}"
        options {{
          checksum = "sha256:{hashlib.sha256(archive).hexdigest()}"
        }}
      }}
      template {{
        data        = "task={{{{ env \\"NOMAD_TASK_NAME\\" }}}}"
        destination = "local/app.conf"
      }}
      config {{
        command = "/local/bin/run.sh"
      }}
    }}
  }}
}}
'''
    run = run_job(job, data_dir)
    assert run.status == "complete", [(r.event.type, r.event.message) for r in run.events]
    [out] = data_dir.glob("allocs/*/t/local/out")
    assert out.read_text() == "nobody\ntask=t"
