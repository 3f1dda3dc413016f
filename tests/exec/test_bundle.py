"""The OCI bundle on disk: ``config.json`` holds the task's environment, so it is root's alone."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.require import require

try:
    from herder_exec import bundle
except ImportError:
    bundle = None  # type: ignore[assignment]


@pytest.fixture(autouse=True)
def _installed() -> Iterator[None]:
    require("exec", bundle is not None, "herder-exec is not installed")
    old = os.umask(0o022)  # a daemon's usual umask: it must not decide who reads the bundle
    yield
    os.umask(old)


def test_the_bundle_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    where = tmp_path / "bundle"
    where.mkdir(mode=0o755)
    (where / "config.json").write_text("{}")  # an earlier run's, readable by all
    bundle.write(where, {"process": {"env": ["API_KEY=s3cret"]}})
    assert stat.S_IMODE(where.stat().st_mode) == 0o700
    assert stat.S_IMODE((where / "config.json").stat().st_mode) == 0o600
    assert b"s3cret" in (where / "config.json").read_bytes()
    assert (where / "rootfs").is_dir()


def test_a_planted_link_is_not_followed(tmp_path: Path) -> None:
    where, target = tmp_path / "bundle", tmp_path / "elsewhere"
    where.mkdir()
    (where / "config.json").symlink_to(target)
    with pytest.raises(OSError):
        bundle.write(where, {})
    assert not target.exists()
