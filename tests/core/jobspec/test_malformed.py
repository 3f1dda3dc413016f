"""The malformed job corpus: each file fails with the problem ``expected.toml`` names."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from herder.errors import JobError
from herder.jobspec import load_job

CORPUS = Path(__file__).parent / "malformed"
EXPECTED: dict[str, dict[str, Any]] = tomllib.loads((CORPUS / "expected.toml").read_text())


def test_every_file_has_an_expectation() -> None:
    files = {path.name for path in CORPUS.iterdir() if path.name != "expected.toml"}
    assert files == set(EXPECTED)
    assert len(files) >= 25


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_malformed_job_file(name: str) -> None:
    expected = EXPECTED[name]
    with pytest.raises(JobError) as caught:
        load_job(CORPUS / name)
    text = str(caught.value)
    assert "Traceback" not in text
    for path in expected["paths"]:
        assert any(f" {path}: " in f" {error}" for error in caught.value.errors), path
    if "line" in expected:
        assert caught.value.errors[0].startswith(f"{CORPUS / name}:{expected['line']}:")
    if "message" in expected:
        assert expected["message"] in text
