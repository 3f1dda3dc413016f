"""The hook callers of :class:`herder.plugins.hooks.Hooks`, chosen once per hook and phase."""

from __future__ import annotations

from pathlib import Path

from herder import hookimpl
from herder.objects import Alloc
from herder.plugins.hooks import Hooks
from herder.plugins.loader import PluginSet


class Prerun:
    def __init__(self) -> None:
        self.seen: list[str] = []

    @hookimpl
    def herder_alloc_prerun(self, alloc: Alloc) -> None:
        self.seen.append(alloc.id)


def alloc(alloc_id: str) -> Alloc:
    return Alloc(id=alloc_id, name="j.g[0]", index=0, job_name="j", group_name="g", dir=Path("/nonexistent"), tasks=[])


def test_a_plugin_added_after_a_call_without_implementations_is_called() -> None:
    hooks = Hooks(PluginSet())
    hooks.alloc_prerun(alloc("before"))  # no plugin implements it yet: the caller for nothing is cached
    plugin = Prerun()
    hooks.add_builtins([("prerun", plugin)])
    hooks.alloc_prerun(alloc("after"))
    assert plugin.seen == ["after"]


def test_a_removed_plugin_is_no_longer_called() -> None:
    hooks = Hooks(PluginSet())
    plugin = Prerun()
    hooks.add_builtins([("prerun", plugin)])
    hooks.alloc_prerun(alloc("first"))
    hooks.remove_builtins(["prerun"])
    hooks.alloc_prerun(alloc("second"))
    assert plugin.seen == ["first"]
