"""``herder run`` of the checked web example: health on the embedded default, and in a real Consul."""

from __future__ import annotations

from pathlib import Path

from tests.support.consul import ConsulAgent
from tests.support.foreground import HerderRun
from tests.support.waiting import wait_for

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "web-checked.hcl"


def wait_for_checks(run: HerderRun, *names: str) -> None:
    wait_for(lambda: all(any(c.get("check", {}).get("name") == name and c["check"]["status"] == "passing"
                             for c in run.checks) for name in names),
             what=lambda: f"checks {names} passing; seen {run.checks}; stderr {run.stderr}", interval=0.1)


def test_the_example_turns_passing_on_the_embedded_registry(data_dir: Path, config_file: Path) -> None:
    run = HerderRun(EXAMPLE, data_dir, config=config_file)
    wait_for_checks(run, "index", "alive")
    assert run.interrupt() == 0
    assert run.summary is not None
    [alloc] = run.summary["allocs"].values()
    assert {c["check"]: c["status"] for c in alloc["tasks"]["server"]["checks"]} == \
        {"index": "passing", "alive": "passing"}


def test_with_consul_the_service_is_in_the_catalog_until_ctrl_c(data_dir: Path, config_file: Path,
                                                               consul: ConsulAgent) -> None:
    config_file.write_text(config_file.read_text() + f'[services]\nbackend = "consul"\n'
                                                      f'[consul]\naddress = "{consul.address}"\n')
    run = HerderRun(EXAMPLE, data_dir, config=config_file)
    wait_for_checks(run, "index", "alive")
    [instance] = consul.catalog("web")
    assert instance["ServiceTags"] == ["example", "0"]
    assert run.interrupt() == 0
    assert consul.catalog("web") == []
