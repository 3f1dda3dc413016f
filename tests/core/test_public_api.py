"""What ``herder`` exports to plugin authors, and what importing it costs."""

from __future__ import annotations

import subprocess
import sys

import herder


def test_every_exported_name_resolves() -> None:
    for name in herder.__all__:
        assert getattr(herder, name) is not None, name
    assert "hookimpl" in dir(herder)


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        herder.no_such_name  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("no AttributeError")


def test_importing_herder_loads_nothing_until_a_name_is_used() -> None:
    """The supervisor imports the ``herder`` package first; it must stay small and quick to start."""
    code = ("import sys, herder; assert 'pluggy' not in sys.modules and 'herder.objects' not in sys.modules; "
            "herder.hookimpl; assert 'pluggy' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
