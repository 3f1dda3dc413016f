"""The garbage collector on a client in this process, with real tasks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from herder import CleanupLater, Task, TaskContext, hookimpl
from herder.client.client import Client, JobSource
from herder.client.config import ClientConfig
from herder.client.gc import GarbageCollector
from herder.jobspec import load_job_text
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins
from tests.support.running import make_config

BATCH = """
job "once" {
  type = "batch"
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "true"
      }
    }
  }
}
"""


class CleanupLaterOnce:
    """A plugin whose cleanup of a task asks to finish in an hour, as Docker's delayed image removal does."""

    @hookimpl
    def herder_task_cleanup(self, task: Task, ctx: TaskContext) -> None:
        raise CleanupLater(3600.0, "the image may be wanted again")


def test_an_allocation_whose_cleanup_is_deferred_is_collected_only_once_it_is_done(tmp_path: Path) -> None:
    config = replace(make_config(tmp_path / "data"), client=ClientConfig(gc_max_allocs=0))
    hooks = Hooks(load_plugins(config.plugin, config.disabled_plugins))
    hooks.add_builtins([("cleanup-later", CleanupLaterOnce())])
    with Client(config, hooks, keep=False) as client:
        client.start()
        allocs = client.submit(load_job_text(BATCH, "hcl", "job.hcl"), JobSource(BATCH, "hcl", "job.hcl"))
        client.run(allocs)
        assert client.wait(allocs, 60)
        alloc = allocs[0]
        collector = GarbageCollector(client)

        deferred = client.store.deferred()
        assert [work.payload["alloc_id"] for work in deferred] == [alloc.alloc.id]
        assert collector.collect().allocations == []
        assert Path(alloc.alloc.dir).is_dir() and client.alloc(alloc.alloc.id) is alloc

        for work in deferred:  # the deferred step ran
            client.store.done(work.kind, work.key)
        collected = collector.collect()
        assert (collected.allocations, collected.jobs) == ([alloc.alloc.id], [])
        assert not Path(alloc.alloc.dir).exists()
        assert client.allocs == [] and client.store.allocs() == []
