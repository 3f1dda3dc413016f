"""The corpus of real-shaped Nomad 1.x job files: each validates, or fails for its listed reason."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
from nomad_corpus import corpus_files, problems_of

# File name -> a part of each problem it is expected to have, in order, and why.
EXPECTED_FAILURES: dict[str, tuple[str, ...]] = {
    # Nomad 0.6's fixture of port labels that differ only in case: refused, as Nomad 0.6 refused it.
    "overlapping-ports.nomad.hcl": ("port label 'http' collides with 'Http'", "port label 'HTTP' collides with 'Http'"),
    # herder has no CSI: a csi volume is refused, naming it.
    "csi-volume.nomad.hcl": ("volume 'mysql' is a csi volume: herder has no CSI",),
}

FILES = corpus_files()

PROJECT_DRIVERS = ("docker", "exec", "java", "qemu", "raw_exec")
"""herder's own drivers: a tox environment without one of them cannot check its task configs."""


@pytest.fixture(scope="module")
def hooks() -> Hooks:
    return Hooks(load_plugins())


def test_the_corpus_is_large_enough() -> None:
    assert len(FILES) >= 60
    assert set(EXPECTED_FAILURES) <= {path.name for path in FILES}


@pytest.mark.parametrize("path", FILES, ids=[path.name for path in FILES])
def test_each_file_validates_or_fails_as_listed(path: Path, hooks: Hooks) -> None:
    not_installed = [f"unknown driver '{name}'" for name in PROJECT_DRIVERS if name not in hooks.drivers]
    found = [problem for problem in problems_of(path, hooks) if not any(words in problem for words in not_installed)]
    expected = EXPECTED_FAILURES.get(path.name)
    if expected is None:
        assert found == []
    else:
        assert len(found) == len(expected), found
        assert all(words in problem for words, problem in zip(expected, found, strict=True)), found
