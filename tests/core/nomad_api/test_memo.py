"""Allocations' shapes kept, encoded, while what they show is unchanged (herder.agent.nomad.memo), and
answered fresh once it changed, however the change was made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from herder.agent.nomad import memo, models
from herder.agent.nomad.memo import Encoded, Memo
from tests.core.nomad_api.conftest import NomadAgent
from tests.core.nomad_api.test_cli import allocs, running_alloc, service


def counted(made: list[int], value: object) -> object:
    made.append(1)
    return value


def test_a_shape_is_built_once_while_its_signature_holds() -> None:
    kept, made = Memo(), []
    first = kept.get("a", (1, "running"), lambda: counted(made, {"ID": "a", "Index": 1}))
    assert kept.get("a", (1, "running"), lambda: counted(made, {"ID": "a", "Index": 99})) is first
    assert len(made) == 1 and json.loads(first) == {"ID": "a", "Index": 1}
    changed = kept.get("a", (2, "running"), lambda: counted(made, {"ID": "a", "Index": 2}))
    assert json.loads(changed) == {"ID": "a", "Index": 2} and len(made) == 2


def test_on_the_loop_a_shape_not_kept_is_not_built() -> None:
    kept, made = Memo(), []

    def read() -> Encoded:
        return kept.get("a", 1, lambda: counted(made, {"ID": "a"}))

    assert memo.on_loop(read) is None and not made  # left to the thread pool
    built = read()
    assert memo.on_loop(read) is built and len(made) == 1
    assert memo.on_loop(lambda: kept.get("a", 2, lambda: counted(made, {}))) is None and len(made) == 1


def test_the_least_recently_read_shape_goes_first() -> None:
    kept, made = Memo(size=2), []
    kept.get("a", 1, lambda: counted(made, "a"))
    kept.get("b", 1, lambda: counted(made, "b"))
    kept.get("a", 1, lambda: counted(made, "a"))  # read again: b is now the oldest
    kept.get("c", 1, lambda: counted(made, "c"))
    kept.get("a", 1, lambda: counted(made, "a"))
    assert len(made) == 3
    kept.get("b", 1, lambda: counted(made, "b"))
    assert len(made) == 4


def test_shapes_hold_at_most_their_bytes() -> None:
    kept, made = Memo(max_bytes=25), []
    kept.get("a", 1, lambda: counted(made, "a" * 10))  # 12 bytes encoded, quotes included
    kept.get("b", 1, lambda: counted(made, "b" * 10))
    kept.get("b", 2, lambda: counted(made, "b" * 11))  # replaced: 25 bytes in all, not 37
    kept.get("a", 1, lambda: counted(made, "a" * 10))
    assert len(made) == 3
    kept.get("c", 1, lambda: counted(made, "c" * 10))  # 37: the least recently read, b, goes
    kept.get("a", 1, lambda: counted(made, "a" * 10))
    kept.get("c", 1, lambda: counted(made, "c" * 10))
    assert len(made) == 4
    kept.get("b", 2, lambda: counted(made, "b" * 11))
    assert len(made) == 5


def test_kept_shapes_join_into_a_list_and_models_encode_as_their_dump() -> None:
    state = models.TaskState(State="running", Events=[models.TaskEvent(Type="Started", Time=1)])
    assert json.loads(memo.encode([Encoded(b'{"a":1}'), Encoded(b"[]")])) == [{"a": 1}, []]
    assert json.loads(memo.encode({"State": state, "None": None})) == {"State": state.model_dump(mode="json"),
                                                                       "None": None}


@pytest.mark.slow
def test_an_allocation_read_again_shows_a_stop_made_through_herders_own_api(
        nomad_agent: NomadAgent, tmp_path: Path) -> None:
    run = nomad_agent.nomad("job", "run", "-detach", str(service(tmp_path, "kept")))
    assert run.returncode == 0, run.stdout + run.stderr
    alloc_id = running_alloc(nomad_agent, "kept")
    for _ in range(3):  # kept, and read from the memo
        assert [a["DesiredStatus"] for a in allocs(nomad_agent, "kept")] == ["run"]
        assert nomad_agent.get(f"/v1/allocation/{alloc_id}")["DesiredStatus"] == "run"
    with nomad_agent.http() as http:  # not through the Nomad API, whose changes the index counts
        assert http.delete("/v1/jobs/kept").status_code == 200
    assert [a["DesiredStatus"] for a in allocs(nomad_agent, "kept")] == ["stop"]
    assert nomad_agent.get(f"/v1/allocation/{alloc_id}")["DesiredStatus"] == "stop"
