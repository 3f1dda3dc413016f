"""``resources { cores }``: CPUs reserved for one task alone, never for two allocations at once, held
again for a restored allocation, and named to the task as ``NOMAD_CPU_CORES``."""

from __future__ import annotations

from pathlib import Path

import pytest

from herder.client.cores import CORES, CoreAllocator, cpuset, parse_cpuset
from herder.client.node import Node
from herder.client.placement import Placement
from herder.client.ports import PortAllocator
from herder.errors import PlacementError
from herder.jobspec import load_job_text


def job(count: int, cores: int = 1) -> str:
    return (f'job "pinned" {{\n group "g" {{\n count = {count}\n task "t" {{\n driver = "raw_exec"\n'
            f' config {{\n command = "/bin/true"\n }}\n resources {{\n cores = {cores}\n }}\n }}\n }}\n}}\n')


NODE = Node(name="n", datacenter="dc1", attributes={})


@pytest.fixture
def placement(tmp_path: Path) -> Placement:
    return Placement(tmp_path, PortAllocator(2000, 12000), cores=CoreAllocator([0, 1, 2]))


def test_each_allocation_gets_cores_of_its_own_until_none_are_left(placement: Placement) -> None:
    loaded = load_job_text(job(2), "hcl")
    group = loaded.groups[0]
    first, second = (placement.place(loaded, group, index, NODE) for index in range(2))
    (one,), (two,) = first.tasks[0].ctx.cores, second.tasks[0].ctx.cores
    assert one != two
    for placed, core in ((first, one), (second, two)):
        ctx = placed.tasks[0].ctx
        assert ctx.env["NOMAD_CPU_CORES"] == ctx.env["HERDER_CPU_CORES"] == str(core)
        assert (CORES, str(core)) in ctx.created.items()  # kept with the task's state, for a restart
    greedy = load_job_text(job(1, cores=2), "hcl")
    with pytest.raises(PlacementError, match=r"task 't' asks for 2 cores, and 1 of the node's 3 are free"):
        placement.place(greedy, greedy.groups[0], 0, NODE)
    placement.release(first)
    again = placement.place(greedy, greedy.groups[0], 0, NODE)
    assert sorted(again.tasks[0].ctx.cores) == sorted({0, 1, 2} - {two})
    for placed in (second, again):
        placement.release(placed)


def test_a_restored_allocation_holds_its_cores_again(placement: Placement) -> None:
    loaded = load_job_text(job(1, cores=2), "hcl")
    group = loaded.groups[0]
    restored = placement.restore(loaded, group, "restored-alloc", 0, NODE, {}, {"t": [(CORES, "1-2")]})
    assert restored.tasks[0].ctx.cores == (1, 2)
    assert restored.tasks[0].ctx.env["NOMAD_CPU_CORES"] == "1-2"
    with pytest.raises(PlacementError, match="dimension \"cores\" exhausted"):
        placement.place(loaded, group, 1, NODE)
    placement.release(restored)


def test_a_task_without_cores_reserves_none(placement: Placement) -> None:
    loaded = load_job_text('job "free" {\n task "t" {\n driver = "raw_exec"\n }\n}\n', "hcl")
    placed = placement.place(loaded, loaded.groups[0], 0, NODE)
    assert placed.tasks[0].ctx.cores == () and "NOMAD_CPU_CORES" not in placed.tasks[0].ctx.env
    placement.release(placed)


@pytest.mark.parametrize(("cores", "text"), [((0, 1, 2, 5), "0-2,5"), ((3,), "3"), ((7, 1, 2), "1-2,7"), ((), "")])
def test_cpuset_list_notation(cores: tuple[int, ...], text: str) -> None:
    assert cpuset(cores) == text
    assert parse_cpuset(text) == tuple(sorted(cores))
