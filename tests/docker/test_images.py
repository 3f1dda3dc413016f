"""Images: ``load`` from a tarball in the task dir, and ``cleanup_image`` once the last user is done.

The driver removes only images herder itself fetched (pulled or loaded), so
these tests load each image from a tarball: a tiny lifecycle plugin copies it
into the task's ``local`` dir in ``herder_task_prestart``, which runs before
the driver's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from herder.client.client import Client
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins
from tests.support.running import make_config, start_job
from tests.support.waiting import TIMEOUT, poll, wait_for

from .helpers import (
    Docker,
    DockerJobs,
    containers_of,
    docker_job,
    image_exists,
    job_name,
    remove_image,
    save_image,
    sh,
)

COPY_PLUGIN = '''
import shutil
from herder import hookimpl


class CopyImage:
    """Puts the tarball named by [plugin.copyimage] tarball into every task's local/image.tar."""

    def __init__(self, config):
        self.tarball = config.get("tarball")

    @hookimpl
    def herder_task_prestart(self, task, ctx):
        if self.tarball:
            shutil.copyfile(self.tarball, ctx.task_dir.local_dir / "image.tar")
'''


@pytest.fixture
def tarball_of(unique_image: Callable[[], str], docker_client: Docker, tmp_path: Path,
               install: Callable[..., Path]) -> Callable[[], tuple[str, Path]]:
    """Makes an image of its own, saves it to a tarball and removes it: (tag, tarball).

    Installs the ``copyimage`` lifecycle plugin that puts the tarball in each task's dir.
    """
    install("herder-test-copyimage", "0.1", {"herder.plugins": {"copyimage": "herder_test_copyimage:CopyImage"}},
            {"herder_test_copyimage.py": COPY_PLUGIN})

    def make() -> tuple[str, Path]:
        tag = unique_image()
        tarball = save_image(docker_client, tag, tmp_path / f"{tag.replace('/', '_').replace(':', '_')}.tar")
        remove_image(docker_client, tag)
        assert not image_exists(docker_client, tag)
        return tag, tarball

    return make


def plugins(tarball: Path, **docker: Any) -> dict[str, dict[str, Any]]:
    return {"docker": docker, "copyimage": {"tarball": str(tarball)}}


def test_load_runs_the_task_from_the_image_tarball(jobs: DockerJobs, docker_client: Docker,
                                                   tarball_of: Callable[[], tuple[str, Path]]) -> None:
    tag, tarball = tarball_of()
    config = sh("echo loaded > /local/ran", image=tag, load="local/image.tar")
    run = jobs.run(docker_job(job_name("load"), config, type="batch"),
                   plugin=plugins(tarball, cleanup_image=True, cleanup_image_delay="0s"))
    assert run.status == "complete", [(r.event.type, r.event.message) for r in run.events]
    assert (run.runner.allocs[0].tasks[0].ctx.task_dir.local_dir / "ran").read_text() == "loaded\n"
    # herder loaded the image, so with cleanup_image it removes it once the task is done
    wait_for(lambda: not image_exists(docker_client, tag), what=f"{tag} removed")


def test_load_of_a_tarball_without_the_image_fails_clearly(jobs: DockerJobs, unique_image: Callable[[], str],
                                                           tarball_of: Callable[[], tuple[str, Path]]) -> None:
    other, tarball = tarball_of()
    wanted = unique_image()
    run = jobs.run(docker_job(job_name("load"), sh("true", image=wanted, load="local/image.tar"), type="batch"),
                   plugin=plugins(tarball))
    assert run.status == "failed"
    failure = next(e for e in run.events if e.event.type == "Driver Failure").event
    assert wanted in failure.message and other in failure.message
    assert run.types("t")[-1] == "Not Restarting"


def test_load_of_a_missing_tarball_fails_clearly(jobs: DockerJobs) -> None:
    run = jobs.run(docker_job(job_name("load"), sh("true", load="local/nope.tar"), type="batch"))
    assert run.status == "failed"
    failure = next(e for e in run.events if e.event.type == "Driver Failure").event
    assert "local/nope.tar" in failure.message


def test_cleanup_image_waits_for_the_last_task_using_it(jobs: DockerJobs, docker_client: Docker,
                                                       tarball_of: Callable[[], tuple[str, Path]]) -> None:
    tag, tarball = tarball_of()
    # index 0 ends at once; index 1 waits until the test lets it go
    script = ('if [ "$NOMAD_ALLOC_INDEX" = 1 ]; then until [ -e /local/go ]; do sleep 0.1; done; fi; '
              "echo done > /local/done")
    run, wait = jobs.start(docker_job(job_name("share"), sh(script, image=tag, load="local/image.tar"),
                                      type="batch", count=2),
                           plugin=plugins(tarball, cleanup_image=True, cleanup_image_delay="0s"))
    first, last = (alloc.tasks[0] for alloc in run.runner.allocs)
    wait_for(lambda: first.status.state == "dead", what=lambda: f"the first task dead; events {run.types()}")
    assert not first.status.failed, first.status.events
    wait_for(lambda: last.status.state == "running", what=lambda: f"the last task running; events {run.types()}")
    assert image_exists(docker_client, tag), "the image was removed while a task still used it"

    (last.ctx.task_dir.local_dir / "go").touch()
    assert wait() == "complete"
    wait_for(lambda: not image_exists(docker_client, tag), what=f"{tag} removed")
    for alloc in run.runner.allocs:
        assert containers_of(docker_client, alloc.alloc.id) == []


def test_cleanup_image_false_keeps_a_loaded_image(jobs: DockerJobs, docker_client: Docker,
                                                  tarball_of: Callable[[], tuple[str, Path]]) -> None:
    tag, tarball = tarball_of()
    run = jobs.run(docker_job(job_name("keep"), sh("true", image=tag, load="local/image.tar"), type="batch"),
                   plugin=plugins(tarball, cleanup_image=False, cleanup_image_delay="0s"))
    assert run.status == "complete", run.types()
    assert not poll(lambda: not image_exists(docker_client, tag), timeout=1)


def test_an_image_already_on_the_host_is_left_alone(jobs: DockerJobs, docker_client: Docker,
                                                    unique_image: Callable[[], str]) -> None:
    tag = unique_image()
    run = jobs.run(docker_job(job_name("local"), sh("true", image=tag), type="batch"),
                   plugin={"docker": {"cleanup_image": True, "cleanup_image_delay": "0s"}})
    assert run.status == "complete", run.types()
    assert not poll(lambda: not image_exists(docker_client, tag), timeout=1)


@pytest.mark.slow
def test_a_task_wanting_the_image_again_cancels_its_removal(docker_client: Docker, docker_driver: str,
                                                           data_dir: Path, tmp_path: Path,
                                                           tarball_of: Callable[[], tuple[str, Path]]) -> None:
    """Two jobs through one driver: the second starts within the first's cleanup_image_delay."""
    tag, tarball = tarball_of()
    delay = 3.0
    config = make_config(data_dir, plugin=plugins(tarball, cleanup_image=True, cleanup_image_delay=f"{delay}s"))
    hooks = Hooks(load_plugins(config.plugin, config.disabled_plugins))
    jobs = DockerJobs(docker_client, data_dir)
    try:
        first = docker_job(job_name("again"), sh("true", image=tag, load="local/image.tar"), type="batch")
        run1, wait1 = start_job(json.dumps(first), data_dir, fmt="json", config=config, hooks=hooks)
        jobs.runs.append((run1, wait1))
        assert wait1() == "complete", run1.types()
        second = docker_job(job_name("again"), sh("until [ -e /local/go ]; do sleep 0.1; done", image=tag),
                            type="batch")
        run2, wait2 = start_job(json.dumps(second), data_dir, fmt="json", config=config, hooks=hooks)
        jobs.runs.append((run2, wait2))
        run2.wait_for("Started")
        # well past the first job's removal time: the second task wanted the image, so it stays
        assert not poll(lambda: not image_exists(docker_client, tag), timeout=delay + 1.5)
        (run2.runner.allocs[0].tasks[0].ctx.task_dir.local_dir / "go").touch()
        assert wait2() == "complete", run2.types()
        assert image_exists(docker_client, tag), "removed before cleanup_image_delay"
        # the run ended before the delay: the next herder on the data dir removes the image when due
        with Client(config, hooks) as later:
            later.start()
            wait_for(lambda: not image_exists(docker_client, tag), delay + TIMEOUT, f"{tag} removed")
    finally:
        jobs.close()


def test_a_removal_pending_when_herder_ends_is_done_by_the_next_herder(
        docker_client: Docker, docker_driver: str, data_dir: Path,
        tarball_of: Callable[[], tuple[str, Path]]) -> None:
    """With the default delay a foreground run ends long before the removal is due: it is kept
    in the state database, and carried out by the next herder on the data dir, not lost."""
    tag, tarball = tarball_of()
    config = make_config(data_dir, plugin=plugins(tarball, cleanup_image=True, cleanup_image_delay="2s"))
    jobs = DockerJobs(docker_client, data_dir)
    try:
        run = jobs.run(docker_job(job_name("later"), sh("true", image=tag, load="local/image.tar"), type="batch"),
                       plugin=config.plugin)
        assert run.status == "complete", run.types()
        assert image_exists(docker_client, tag)
        # a fresh process's view: new plugin instances, nothing in memory
        with Client(config, Hooks(load_plugins(config.plugin, config.disabled_plugins))) as later:
            [pending] = later.store.deferred()
            assert pending.payload["task"] == "t"
            later.start()
            wait_for(lambda: not image_exists(docker_client, tag), what=f"{tag} removed")
            wait_for(lambda: later.store.deferred() == [], what="no removal left deferred")
    finally:
        jobs.close()

