"""tests/support/require.py: skip when a component is missing, fail when HERDER_REQUIRE names it."""

from __future__ import annotations

import pytest

from tests.support.require import require

pytest_plugins = ["pytester"]


def test_available_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERDER_REQUIRE", "docker")
    require("docker", True, "never shown")


def test_missing_and_not_required_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HERDER_REQUIRE", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no Docker daemon: refused"):
        require("docker", False, "no Docker daemon: refused")


def test_missing_and_required_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERDER_REQUIRE", "exec, docker ,java")
    with pytest.raises(pytest.fail.Exception) as info:
        require("docker", False, "no Docker daemon: refused")
    assert str(info.value) == "docker is required (HERDER_REQUIRE) but not available: no Docker daemon: refused"


def test_only_the_named_components_are_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERDER_REQUIRE", "exec,java")
    with pytest.raises(pytest.skip.Exception):
        require("docker", False, "no Docker daemon")
    monkeypatch.setenv("HERDER_REQUIRE", "dockers")  # names match whole, not by prefix
    with pytest.raises(pytest.skip.Exception):
        require("docker", False, "no Docker daemon")


def test_in_a_fixture_the_outcome_is_reported(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(
        """
        import pytest
        from tests.support.require import require

        @pytest.fixture
        def thing():
            require("thing", False, "no thing here")

        def test_uses_thing(thing):
            pass
        """
    )
    monkeypatch.delenv("HERDER_REQUIRE", raising=False)
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rs").assert_outcomes(skipped=1)
    monkeypatch.setenv("HERDER_REQUIRE", "thing")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*thing is required (HERDER_REQUIRE) but not available: no thing here*"])
