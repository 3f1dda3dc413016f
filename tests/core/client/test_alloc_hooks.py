"""The allocation hooks in their place (:class:`herder.client.alloc_hooks.AllocHooks`): prerun once
before the first task, postrun once after the last, and none again for a task an earlier process started."""

from __future__ import annotations

from pathlib import Path

import pytest

from herder import hookimpl
from herder.client.alloc_hooks import AllocHooks
from herder.objects import Alloc
from herder.plugins.hooks import Hooks
from herder.plugins.loader import PluginSet


class Seen:
    def __init__(self, fail_prerun: bool = False) -> None:
        self.calls: list[str] = []
        self.fail_prerun = fail_prerun

    @hookimpl
    def herder_alloc_prerun(self, alloc: Alloc) -> None:
        self.calls.append("prerun")
        if self.fail_prerun:
            raise RuntimeError("no room for this allocation")

    @hookimpl
    def herder_alloc_postrun(self, alloc: Alloc) -> None:
        self.calls.append("postrun")


def setup(fail_prerun: bool = False) -> tuple[Hooks, Seen]:
    hooks, seen = Hooks(PluginSet()), Seen(fail_prerun)
    hooks.add_builtins([("seen", seen)])
    return hooks, seen


def alloc() -> Alloc:
    return Alloc(id="a1", name="j.g[0]", index=0, job_name="j", group_name="g", dir=Path("/nonexistent"), tasks=[])


def test_prerun_before_the_first_task_and_postrun_after_the_last() -> None:
    hooks, seen = setup()
    allocation = AllocHooks(alloc())
    allocation.task_starts(hooks, "web")
    allocation.task_starts(hooks, "sidecar")
    allocation.task_starts(hooks, "web")  # started again
    assert seen.calls == ["prerun"]
    allocation.task_ends(hooks, "web")
    assert seen.calls == ["prerun"]
    allocation.task_ends(hooks, "sidecar")
    allocation.postrun(hooks)
    assert seen.calls == ["prerun", "postrun"]
    assert allocation.over


def test_a_task_an_earlier_process_started_gets_no_second_prerun() -> None:
    hooks, seen = setup()
    allocation = AllocHooks(alloc())
    allocation.task_recovered("web")
    allocation.task_starts(hooks, "poststop")
    allocation.task_ends(hooks, "web")
    allocation.task_ends(hooks, "poststop")
    assert seen.calls == ["postrun"]


def test_no_postrun_without_a_prerun_and_one_after_a_prerun_that_failed() -> None:
    hooks, seen = setup(fail_prerun=True)
    AllocHooks(alloc()).postrun(hooks)
    assert seen.calls == []
    allocation = AllocHooks(alloc())
    with pytest.raises(RuntimeError, match="no room"):
        allocation.prerun(hooks)
    allocation.prerun(hooks)
    allocation.postrun(hooks)
    assert seen.calls == ["prerun", "postrun"]
