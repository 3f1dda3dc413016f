"""The tests' waits: ``tests/support/waiting.py``, and the rule that tests wait through it."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest

from tests.support.waiting import DELIBERATE, poll, wait_for

TESTS = Path(__file__).resolve().parents[1]
WAITING = TESTS / "support" / "waiting.py"


def unexplained_sleeps(source: str) -> list[int]:
    """The lines of every call to a ``sleep`` (``time.sleep``, ``asyncio.sleep``, a bare ``sleep``, a wait
    on a fresh ``Event``) in ``source`` that neither its own line nor a comment line just above explains
    after :data:`DELIBERATE`.

    Code in strings (a task's program) is not looked at: a task may sleep to stay alive.
    """
    lines = ["", *source.splitlines()]  # numbered from 1, as the parser numbers them

    def reason(line: str) -> str:
        return line.partition(DELIBERATE)[2].strip()

    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        # A wait on an Event made for it (``threading.Event().wait(0.05)``) is a sleep too.
        on_a_fresh_event = (name == "wait" and isinstance(node.func, ast.Attribute)
                            and isinstance(node.func.value, ast.Call) and ast.unparse(node.func.value.func)
                            in ("Event", "threading.Event"))
        above = lines[node.lineno - 1]
        explained = reason(lines[node.lineno]) or (above.lstrip().startswith("#") and reason(above))
        if (name == "sleep" or on_a_fresh_event) and not explained:
            found.append(node.lineno)
    return sorted(found)


def test_no_test_sleeps_a_fixed_time_without_saying_why() -> None:
    found = [f"{path.relative_to(TESTS.parent)}:{line}" for path in sorted(TESTS.rglob("*.py")) if path != WAITING
             for line in unexplained_sleeps(path.read_text())]
    assert not found, (f"fixed sleeps in tests: wait for the condition with tests.support.waiting instead, "
                       f"or, where the time passing is the subject, say why after {DELIBERATE!r}: {found}")


def test_the_guard_sees_a_sleep_and_accepts_a_reason() -> None:
    source = ("import time\nfrom asyncio import sleep\n"
              "time.sleep(1)\n"
              f"time.sleep(2)  {DELIBERATE} the subject\n"
              f"{DELIBERATE} the kill comes at a random instant\n"
              "time.sleep(3)\n"
              f"time.sleep(4)  {DELIBERATE}\n"
              "sleep(5)\n"
              "TASK = 'time.sleep(6)'\n"
              "threading.Event().wait(0.05)\n"
              "stop.wait(0.05)\n")
    assert unexplained_sleeps(source) == [3, 7, 8, 10]


def test_wait_for_returns_the_first_true_value() -> None:
    answers = iter([0, [], "there"])
    assert wait_for(lambda: next(answers), what="an answer", interval=0) == "there"


def test_wait_for_names_what_it_waited_for_and_what_it_saw() -> None:
    with pytest.raises(AssertionError, match=r"timed out after 0\.1 s waiting for: the door to open"):
        wait_for(lambda: False, 0.1, "the door to open")
    seen = {"door": "shut"}
    with pytest.raises(AssertionError, match="the door to open; it is shut"):
        wait_for(lambda: seen["door"] == "open", 0.1, lambda: f"the door to open; it is {seen['door']}")


def test_poll_is_false_when_the_condition_never_comes() -> None:
    done = threading.Event()
    threading.Timer(0.05, done.set).start()
    assert poll(done.is_set)
    assert not poll(lambda: False, timeout=0.1)
