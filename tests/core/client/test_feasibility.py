"""The node's checks of a job at placement: datacenters, constraints at every level, distinct_hosts,
distinct_property and the data dir's free disk, each refusal in Nomad's words."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from herder.client.feasibility import (
    DATACENTER,
    DIMENSION,
    Feasibility,
    Infeasible,
    Unplaced,
    default_checkers,
    glob_matches,
)
from herder.client.node import Node
from herder.jobspec import load_job_text
from herder.model import Job
from herder.objects import Fingerprint

NODE = Node(name="node-1", datacenter="dc1", attributes={"kernel.name": "linux", "driver.raw_exec": "1"},
            meta={"rack": "r12", "tags": "ssd,gpu"})


def healthy(driver: str) -> Fingerprint:
    return Fingerprint(detected=driver == "raw_exec", healthy=driver == "raw_exec", description="")


def job(body: str, job_level: str = "") -> Job:
    text = f'job "j" {{\n  datacenters = ["dc1"]\n{job_level}\n  group "g" {{\n{body}\n' \
           '    task "t" {\n      driver = "raw_exec"\n      config { command = "/bin/true" }\n    }\n  }\n}\n'
    return load_job_text(text, "hcl", "j.nomad")


def unplaced(job: Job, tmp_path: Path, node: Node = NODE) -> list[Unplaced]:
    return Feasibility(default_checkers(tmp_path, healthy, {})).unplaced(job, node)


@pytest.mark.parametrize(("pattern", "text", "expected"), [
    ("dc1", "dc1", True), ("dc1", "dc2", False), ("*", "dc1", True), ("dc*", "dc1", True), ("*1", "dc1", True),
    ("d*1", "dc1", True), ("d*2", "dc1", False), ("*c*", "dc1", True), ("dc1*", "dc1", True), ("x*", "dc1", False),
    ("d*c*1", "dc1", True), ("dc*c1", "dc1", False),
])
def test_datacenter_globs(pattern: str, text: str, expected: bool) -> None:
    assert glob_matches(pattern, text) is expected


def test_a_job_for_other_datacenters_is_not_evaluated(tmp_path: Path) -> None:
    other = job("", "")
    other.datacenters = ["dc2", "eu-*"]
    (refused,) = unplaced(other, tmp_path)
    assert refused.refusal.kind == DATACENTER and refused.datacenters == ("dc2", "eu-*")
    assert refused.reasons() == ["No nodes were eligible for evaluation", 'No nodes are available in datacenter "dc2"',
                                 'No nodes are available in datacenter "eu-*"']
    other.datacenters = ["d*"]
    assert unplaced(other, tmp_path) == []


def test_the_first_constraint_the_node_fails_names_itself(tmp_path: Path) -> None:
    windows = job('    constraint {\n      attribute = "${attr.kernel.name}"\n      value = "windows"\n    }\n'
                  '    constraint {\n      attribute = "${meta.nope}"\n      operator = "is_set"\n    }')
    (refused,) = unplaced(windows, tmp_path)
    assert refused.describe() == ('Task Group "g" (failed to place 1 allocation): '
                                  'Constraint "${attr.kernel.name} = windows" filtered 1 node')
    with pytest.raises(Infeasible) as raised:
        Feasibility(default_checkers(tmp_path, healthy, {})).require(windows, NODE)
    assert 'Constraint "${attr.kernel.name} = windows" filtered 1 node' in str(raised.value)


def test_job_group_and_task_constraints_all_count(tmp_path: Path) -> None:
    on_job = job("", '  constraint {\n    attribute = "${node.datacenter}"\n    value = "dc9"\n  }')
    assert unplaced(on_job, tmp_path)[0].refusal.reason == "${node.datacenter} = dc9"
    task_level = load_job_text(
        'job "j" {\n  datacenters = ["dc1"]\n  group "g" {\n    task "t" {\n      driver = "raw_exec"\n'
        '      constraint {\n        attribute = "${meta.rack}"\n        regexp = "^s"\n      }\n'
        '      config { command = "/bin/true" }\n    }\n  }\n}\n', "hcl", "j.nomad")
    assert unplaced(task_level, tmp_path)[0].refusal.reason == "${meta.rack} regexp ^s"
    fits = job('    constraint {\n      attribute = "${meta.rack}"\n      regexp = "^r[0-9]+$"\n    }\n'
               '    constraint {\n      attribute = "${meta.tags}"\n      set_contains = "gpu"\n    }')
    assert unplaced(fits, tmp_path) == []


def test_a_missing_driver_filters_the_node(tmp_path: Path) -> None:
    docker = load_job_text('job "j" {\n  group "g" {\n    task "t" {\n      driver = "docker"\n'
                           '      config { image = "x" }\n    }\n  }\n}\n', "hcl", "j.nomad")
    assert unplaced(docker, tmp_path)[0].refusal.reason == "missing drivers"


def test_distinct_hosts_lets_one_allocation_per_node(tmp_path: Path) -> None:
    group_level = job('    count = 3\n    constraint {\n      distinct_hosts = true\n    }')
    (refused,) = unplaced(group_level, tmp_path)
    assert (refused.failed, refused.reasons()) == (2, ['Constraint "distinct_hosts" filtered 1 node'])
    assert unplaced(job('    constraint {\n      distinct_hosts = true\n    }'), tmp_path) == []
    assert unplaced(job('    count = 2\n    constraint {\n      distinct_hosts = false\n    }'), tmp_path) == []
    job_level = job("    count = 2", '  constraint {\n    operator = "distinct_hosts"\n  }')
    assert unplaced(job_level, tmp_path)[0].failed == 1


def test_distinct_property_allows_its_count_per_value(tmp_path: Path) -> None:
    two = ('    count = {count}\n    constraint {{\n      distinct_property = "${{meta.rack}}"\n'
           '      value = "2"\n    }}')
    assert unplaced(job(two.format(count=2)), tmp_path) == []
    (refused,) = unplaced(job(two.format(count=3)), tmp_path)
    assert refused.failed == 1
    assert refused.refusal.reason == "distinct_property: ${meta.rack}=r12 used by 2 allocs"
    missing = job('    count = 1\n    constraint {\n      distinct_property = "${meta.row}"\n    }')
    assert unplaced(missing, tmp_path)[0].refusal.reason == 'missing property "${meta.row}"'


def test_disk_beyond_the_data_dirs_free_space_is_exhausted(tmp_path: Path) -> None:
    stats = os.statvfs(tmp_path)
    free_mb = stats.f_bavail * stats.f_frsize >> 20
    assert unplaced(job("    ephemeral_disk {\n      size = 10\n    }"), tmp_path) == []
    (refused,) = unplaced(job(f"    count = 2\n    ephemeral_disk {{\n      size = {free_mb // 2 + 1}\n    }}"),
                          tmp_path)
    assert refused.refusal.kind == DIMENSION and refused.failed == 1
    assert refused.reasons() == ['Dimension "disk" exhausted on 1 node']
    old_style = load_job_text(
        'job "j" {\n  group "g" {\n    task "t" {\n      driver = "raw_exec"\n      config { command = "/bin/true" }\n'
        f'      resources {{\n        disk = {free_mb + 1}\n      }}\n    }}\n  }}\n}}\n', "hcl", "j.nomad")
    assert old_style.groups[0].ephemeral_disk.size == free_mb + 1  # the tasks' disk, without an ephemeral_disk
    assert unplaced(old_style, tmp_path)[0].refusal.reason == "disk"


def test_a_data_dir_not_made_yet_is_measured_where_it_will_be(tmp_path: Path) -> None:
    assert unplaced(job("    ephemeral_disk {\n      size = 10\n    }"), tmp_path, NODE) == []
    later = Feasibility(default_checkers(tmp_path / "not" / "yet", healthy, {}))
    assert later.unplaced(job(""), NODE) == []


def test_a_job_level_limit_goes_to_the_groups_in_order(tmp_path: Path) -> None:
    two_groups = load_job_text(
        'job "j" {\n  constraint { distinct_hosts = true }\n'
        + "".join(f'  group "{name}" {{\n    task "t" {{\n      driver = "raw_exec"\n'
                  '      config { command = "/bin/true" }\n    }\n  }\n' for name in ("a", "b"))
        + "}\n", "hcl", "j.nomad")
    (refused,) = unplaced(two_groups, tmp_path)
    assert (refused.group, refused.failed, refused.refusal.reason) == ("b", 1, "distinct_hosts")
