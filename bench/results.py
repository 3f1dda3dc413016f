"""Writing a benchmark's section of ``bench/RESULTS.md``, replacing the previous one."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def machine() -> str:
    """One line describing where the numbers were measured."""
    return (f"{os.cpu_count()} cores, Linux {platform.release()}, "
            f"Python {platform.python_version()}")


def where(path: Path) -> str:
    """``path`` as a reader of the results can place it: relative to the project when inside it."""
    path = path.resolve()
    root = RESULTS.parent.parent
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def write_section(title: str, command: str, body: str) -> None:
    """Put ``## title`` (the command, the machine, then ``body``) in RESULTS.md."""
    section = f"## {title}\n\nCommand: `{command}` ({machine()})\n\n{body.strip()}\n"
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    pattern = re.compile(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", re.MULTILINE | re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text).rstrip("\n") + "\n"
    else:
        text = text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text)
