"""An agent per test (one per module, for the tests that only read, is ``shared_agent``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agent import AgentProcess

TICKER = """
job "{name}" {{
  group "g" {{
    count = {count}
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "sh"
        args    = ["-c", "echo started; echo oops >&2; exec sleep 3600"]
      }}
      resources {{
        network {{
          port "http" {{}}
        }}
      }}
      kill_timeout = "5s"
    }}
  }}
}}
"""


def ticker(name: str = "ticker", count: int = 1) -> str:
    """A service job whose task prints a line on each stream and runs until TERM."""
    return TICKER.format(name=name, count=count)


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[AgentProcess]:
    process = AgentProcess(tmp_path)
    process.start()
    try:
        yield process
    finally:
        process.shutdown()
