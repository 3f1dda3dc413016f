"""What ``java -version`` says: the version, the runtime and the VM.

``java -version`` writes three lines to stderr, in a format that changed
over the years and between vendors::

    openjdk version "17.0.15" 2025-04-15
    OpenJDK Runtime Environment (build 17.0.15+6-Debian-1deb12u1)
    OpenJDK 64-Bit Server VM (build 17.0.15+6-Debian-1deb12u1, mixed mode, sharing)

    java version "1.8.0_131"
    Java(TM) SE Runtime Environment (build 1.8.0_131-b11)
    Java HotSpot(TM) 64-Bit Server VM (build 25.131-b11, mixed mode)

Before them the launcher may print what it picked up from the environment
(``Picked up _JAVA_OPTIONS: ...``, ``Picked up JAVA_TOOL_OPTIONS: ...``,
``NOTE: Picked up JDK_JAVA_OPTIONS: ...``), and after them OpenJ9 and IBM's
J9 list their components (``OpenJ9 - ...``, ``OMR - ...``). The version
line is the one that says ``version "..."``; the runtime is the next line,
and the VM the one after it, as Nomad reports them (whole lines); a line
the VM writes as a warning in between is passed over.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_VERSION = re.compile(r'^\S.*?\bversion\s+"(?P<version>[^"]+)"')
_PICKED_UP = re.compile(r"^(NOTE:\s*)?Picked up \S+:")


@dataclass(frozen=True)
class JavaVersion:
    """``driver.java.version`` (``17.0.15``, ``1.8.0_131``), ``.runtime`` and ``.vm``."""

    version: str
    runtime: str
    vm: str

    def attributes(self) -> dict[str, str]:
        return {"driver.java.version": self.version, "driver.java.runtime": self.runtime,
                "driver.java.vm": self.vm}


def parse_version(output: str) -> JavaVersion:
    """Parse what ``java -version`` printed (stdout and stderr together).

    :raises ValueError: no line says ``version "..."``.
    """
    lines = [line.strip() for line in output.splitlines()]
    lines = [line for line in lines if line and not _PICKED_UP.match(line)]
    for index, line in enumerate(lines):
        found = _VERSION.match(line)
        if found:
            rest = lines[index + 1:]
            runtime = _first(rest, "Runtime Environment")
            vm = _first(rest[rest.index(runtime) + 1:] if runtime in rest else rest, " VM")
            return JavaVersion(found["version"], runtime, vm)
    first = lines[0] if lines else "nothing"
    raise ValueError(f"no version in the output of java -version (it printed {first!r})")


def _first(lines: list[str], words: str) -> str:
    """The first of ``lines`` with ``words`` in it, else the first line (else "")."""
    return next((line for line in lines if words in line and "warning:" not in line), lines[0] if lines else "")
