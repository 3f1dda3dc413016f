"""The kit's test of host volumes: a driver that declares ``volume_mounts`` mounts ``ctx.mounts``.

:class:`herder.testing.DriverContract` includes it; a driver that does not
declare the capability skips it (herder refuses its jobs' ``volume_mount``
at validation, so it never sees a mount).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from herder.context import HostMount
from herder.testing.harness import DriverHarness

EXIT_TIMEOUT = 60.0
"""How long the task has to write, read and exit (a container's start included)."""
RW_DESTINATION = "/herder-kit/rw"
RO_DESTINATION = "/herder-kit/ro"
WRITES_THROUGH_MOUNTS = (
    'printf %s "$TOKEN" > ' + RW_DESTINATION + "/written && "
    "read -r seen < " + RO_DESTINATION + "/given && "
    '[ "$seen" = "$TOKEN" ] && '
    "if (printf x > " + RO_DESTINATION + "/refused) 2>/dev/null; then exit 7; fi"
)
"""Writes through the read-write mount, reads through the read-only one, and exits 7 if the
read-only one takes a write (0 when all is as it should be)."""


class VolumeMountContract:
    """The host volume test; :class:`herder.testing.DriverContract` provides ``driver`` and ``shell``."""

    driver: ClassVar[str] = ""

    def shell(self, script: str) -> Mapping[str, Any] | None:
        """A task running the POSIX ``sh`` script (see :meth:`herder.testing.DriverContract.shell`)."""
        return None

    def test_volume_mounts_are_mounted_and_read_only_refuses_writes(self, harness: DriverHarness,
                                                                    tmp_path: Path) -> None:
        if not harness.hooks.capabilities(self.driver).volume_mounts:
            pytest.skip(f"driver {self.driver} does not declare volume_mounts")
        config = self._volume_config(WRITES_THROUGH_MOUNTS)
        token = uuid.uuid4().hex
        writable, read_only = tmp_path / "volume-rw", tmp_path / "volume-ro"
        for directory in (writable, read_only):
            directory.mkdir()
            os.chmod(directory, 0o777)  # whichever user the task runs as may write: only the mount may refuse
        (read_only / "given").write_text(token + "\n")
        run = harness.task(config, env={"TOKEN": token})
        run.ctx.mounts.extend([HostMount(source=writable, destination=RW_DESTINATION),
                               HostMount(source=read_only, destination=RO_DESTINATION, read_only=True)])
        run.prestart()
        run.start()
        result = run.wait(EXIT_TIMEOUT)
        assert result is not None, f"the task did not exit within {EXIT_TIMEOUT:g}s"
        assert (writable / "written").is_file(), f"nothing written through the mount at {RW_DESTINATION}: {result}"
        assert (writable / "written").read_text() == token
        assert not (read_only / "refused").exists(), f"a read-only mount took a write ({RO_DESTINATION})"
        assert result.exit_code == 0, f"the task could not read {RO_DESTINATION}/given or wrote there: {result}"

    def _volume_config(self, script: str) -> Mapping[str, Any]:
        config = self.shell(script)
        if config is None:
            pytest.skip(f"{type(self).__name__}.shell() gives no task: the host volume test needs a shell")
        return config
