"""A job's author asks for a setuid (setgid, sticky) rendered template: refused, never applied.

herder runs as root and renders templates as root: ``perms = "4755"`` on a
file the task controls would be a setuid-root binary handed to the task.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

Herder = Callable[..., subprocess.CompletedProcess[str]]

JOB = """
job "perms" {{
  group "g" {{
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", "ls -l local"]
      }}
      template {{
        data        = "#!/bin/sh\\nid\\n"
        destination = "local/tool"
        perms       = "{perms}"
      }}
    }}
  }}
}}
"""


@pytest.mark.parametrize("perms", ["4755", "2755", "1755", "6777", "7777"])
def test_special_bits_are_refused_by_validate_naming_the_setting(herder: Herder, tmp_path: Path,
                                                                 perms: str) -> None:
    job = tmp_path / "job.hcl"
    job.write_text(JOB.format(perms=perms))
    result = herder("validate", str(job))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "job.groups[0].tasks[0].templates[0].perms" in result.stderr
    assert "setuid, setgid or sticky" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("perms", ["4755", "2755", "1755"])
def test_run_refuses_it_too_and_no_setuid_file_appears(herder: Herder, tmp_path: Path, config_file: Path,
                                                      perms: str) -> None:
    job = tmp_path / "job.hcl"
    job.write_text(JOB.format(perms=perms))
    result = herder("run", "--config", str(config_file), str(job))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "templates[0].perms" in result.stderr
    special = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX
    for directory, _, files in os.walk(tmp_path / "data"):
        for name in files:
            assert not os.lstat(os.path.join(directory, name)).st_mode & special, name


@pytest.mark.parametrize("perms", ["0755", "755", "0640", "600"])
def test_plain_perms_are_valid(herder: Herder, tmp_path: Path, perms: str) -> None:
    job = tmp_path / "job.hcl"
    job.write_text(JOB.format(perms=perms))
    result = herder("validate", str(job))
    assert result.returncode == 0, result.stderr
