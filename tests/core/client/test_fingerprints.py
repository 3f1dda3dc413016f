"""The drivers' fingerprints are taken again periodically: a driver that goes and comes back is noticed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from herder.client.fingerprints import Fingerprints
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins
from tests.support.waiting import wait_for

FLAKY = '''
from pathlib import Path
from herder import Fingerprint, hookimpl

class Driver:
    """Healthy while the file its configuration names exists."""

    def __init__(self, config):
        self.flag = Path(config["flag"])

    @hookimpl
    def herder_driver_fingerprint(self):
        up = self.flag.exists()
        return Fingerprint(detected=True, healthy=up, description="up" if up else "the daemon went away")

    @hookimpl
    def herder_task_start(self, task, ctx):
        raise NotImplementedError
'''


def test_a_driver_that_goes_away_and_comes_back_is_noticed(install: Callable[..., Path], tmp_path: Path) -> None:
    install("herder-flaky", "0.1", {"herder.drivers": {"flaky": "flaky:Driver"}}, {"flaky.py": FLAKY})
    flag = tmp_path / "up"
    flag.touch()
    fingerprints = Fingerprints(Hooks(load_plugins({"flaky": {"flag": str(flag)}})), interval=0.05)
    assert fingerprints.get("flaky").healthy
    fingerprints.start()
    try:
        flag.unlink()
        wait_for(lambda: not fingerprints.get("flaky").healthy, what="the driver seen unhealthy")
        assert fingerprints.get("flaky").description == "the daemon went away"
        flag.touch()
        wait_for(lambda: fingerprints.get("flaky").healthy, what="the driver seen healthy again")
    finally:
        fingerprints.stop()


def test_without_start_the_first_fingerprint_is_kept(install: Callable[..., Path], tmp_path: Path) -> None:
    install("herder-flaky", "0.1", {"herder.drivers": {"flaky": "flaky:Driver"}}, {"flaky.py": FLAKY})
    flag = tmp_path / "up"
    flag.touch()
    hooks = Hooks(load_plugins({"flaky": {"flag": str(flag)}}))
    fingerprints, started = Fingerprints(hooks, interval=0.05), Fingerprints(hooks, interval=0.05)
    assert fingerprints.get("flaky").healthy and started.get("flaky").healthy
    started.start()
    try:
        flag.unlink()
        # The subject is that nothing happens: as long as a started twin takes to notice.
        wait_for(lambda: not started.get("flaky").healthy, what="the started twin to notice")
    finally:
        started.stop()
    assert fingerprints.get("flaky").healthy  # nothing refreshes it
    assert not fingerprints.refresh("flaky").healthy
