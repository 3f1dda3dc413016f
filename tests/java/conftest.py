"""Fixtures for the java driver's tests, against the real JVM (and, isolated, the real runc).

Without a JDK the tests are skipped, unless HERDER_REQUIRE names ``java``:
then they fail. The isolated tests need herder-exec: in an environment
without it (tox's ``java`` factor) they are skipped; where it is installed
but cannot isolate, they are skipped or, under HERDER_REQUIRE naming
``exec``, failed. A test that asks for ``java_app`` gets the test application in each
task's local directory; every test checks that no container of its tasks outlives it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from herder.testing.harness import load_hooks
from tests.support.require import require, require_driver

from .helpers import ISOLATED, build, plugin_source

EXEC_INSTALLED = importlib.util.find_spec("herder_exec") is not None


@pytest.fixture(scope="session")
def java_driver() -> str:
    """herder-java is installed and loads, and a JVM is there (detected)."""
    require_driver("java", healthy=False)  # a JVM is there; isolation may be unavailable
    return "java"


@pytest.fixture(scope="session")
def java_build(java_driver: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test application, compiled once per test process."""
    require("java", bool(shutil.which("javac") and shutil.which("jar")), "no JDK here: javac or jar is missing")
    return build(tmp_path_factory.mktemp("java-app"))


@pytest.fixture
def isolated(java_driver: str) -> dict[str, str]:
    """The ``[plugin.java]`` table of isolated JVMs; herder-exec is installed and can isolate here."""
    if not EXEC_INSTALLED:
        pytest.skip("herder-exec is not installed here (the isolated tests run in tox's java-isolated and all)")
    fingerprint = load_hooks("java", ISOLATED).fingerprint("java")
    require("exec", fingerprint.detected and fingerprint.healthy,
            f"the java driver cannot isolate: {fingerprint.description}")
    return dict(ISOLATED)


@pytest.fixture
def java_app(java_build: Path, install: Callable[..., Path]) -> None:
    """A lifecycle plugin, installed as a distribution, copies the test application into each task's
    local directory at prestart (herder has no artifact fetching of its own yet)."""
    install("herder-test-javaapp", "1.0", {"herder.plugins": {"javaapp": "herder_test_javaapp:JavaAppFiles"}},
            {"herder_test_javaapp.py": plugin_source(java_build)})


@pytest.fixture(autouse=True)
def no_container_left_behind(tmp_path: Path) -> Iterator[None]:
    """No container of the test's tasks (a bundle under ``tmp_path``) outlives the test."""
    yield
    if not EXEC_INSTALLED:
        return
    from tests.exec.helpers import containers_under, runc

    left = containers_under(tmp_path)
    for container in left:
        with contextlib.suppress(Exception):
            runc().delete(container)
    assert not left, f"containers left behind: {left}"
