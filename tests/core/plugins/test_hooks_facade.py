"""The hook callers of :class:`herder.plugins.hooks.Hooks`, chosen once per hook and phase."""

from __future__ import annotations

from pathlib import Path

from herder import hookimpl
from herder.model import Task
from herder.objects import Alloc, DriverCapabilities, NetworkIsolation
from herder.plugins.hooks import Hooks
from herder.plugins.loader import PluginRecord, PluginSet


class Prerun:
    def __init__(self) -> None:
        self.seen: list[str] = []

    @hookimpl
    def herder_alloc_prerun(self, alloc: Alloc) -> None:
        self.seen.append(alloc.id)


def alloc(alloc_id: str, *drivers: str) -> Alloc:
    return Alloc(id=alloc_id, name="j.g[0]", index=0, job_name="j", group_name="g", dir=Path("/nonexistent"),
                 tasks=[Task(name=f"t{i}", driver=d) for i, d in enumerate(drivers)])


class Joiner:
    """A driver whose tasks join the allocation's namespace, which it leaves to herder to make."""

    @hookimpl
    def herder_task_start(self) -> None: ...

    @hookimpl
    def herder_driver_capabilities(self) -> DriverCapabilities:
        return DriverCapabilities(network_isolation=frozenset({"host", "group"}), volume_mounts=True)


class Owner:
    """A driver that makes the namespace itself (as docker's pause container), and removes it."""

    def __init__(self) -> None:
        self.destroyed: list[tuple[str, NetworkIsolation]] = []

    @hookimpl
    def herder_task_start(self) -> None: ...

    @hookimpl
    def herder_alloc_network_create(self, alloc: Alloc, hostname: str) -> NetworkIsolation:
        return NetworkIsolation(path=Path("/proc/1/ns/net"), labels={"alloc": alloc.id, "hostname": hostname})

    @hookimpl
    def herder_alloc_network_destroy(self, alloc: Alloc, isolation: NetworkIsolation) -> None:
        self.destroyed.append((alloc.id, isolation))


class BrokenCapabilities:
    @hookimpl
    def herder_task_start(self) -> None: ...

    @hookimpl
    def herder_driver_capabilities(self) -> DriverCapabilities:
        raise RuntimeError("no idea")


def drivers(**plugins: object) -> Hooks:
    plugin_set = PluginSet()
    for name, plugin in plugins.items():
        plugin_set.add(PluginRecord(name=name, kind="driver"), plugin)
    return Hooks(plugin_set)


def test_a_driver_that_says_nothing_of_its_capabilities_has_the_least() -> None:
    hooks = drivers(joiner=Joiner(), quiet=Owner(), broken=BrokenCapabilities())
    assert hooks.capabilities("joiner") == DriverCapabilities(frozenset({"host", "group"}), volume_mounts=True)
    assert hooks.capabilities("quiet") == DriverCapabilities()
    assert hooks.capabilities("broken") == DriverCapabilities()  # "herder_driver_capabilities" raised
    assert hooks.capabilities("quiet").network_isolation == frozenset({"host"})


def test_the_driver_that_makes_the_namespace_is_asked_and_named_and_destroys_it() -> None:
    owner = Owner()
    hooks = drivers(joiner=Joiner(), owner=owner)
    assert hooks.alloc_network_create(alloc("a1", "joiner"), "web") is None  # herder makes it itself
    made = hooks.alloc_network_create(alloc("a2", "joiner", "owner"), "web")
    assert made == ("owner", NetworkIsolation(Path("/proc/1/ns/net"), {"alloc": "a2", "hostname": "web"}))
    hooks.alloc_network_destroy("owner", alloc("a2", "owner"), made[1])
    assert owner.destroyed == [("a2", made[1])]


def test_only_a_driver_may_make_an_allocation_s_namespace() -> None:
    plugin_set = PluginSet()
    record = PluginRecord(name="sneaky", kind="lifecycle")
    plugin_set.add(record, Owner())
    assert "driver-scoped" in record.error
    assert "herder_alloc_network_create" in record.error and "herder_alloc_network_destroy" in record.error
    assert not plugin_set.plugins("lifecycle")


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
