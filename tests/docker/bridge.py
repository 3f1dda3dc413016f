"""An allocation in bridge mode driven through the docker driver's hooks, one step at a time.

The driver is loaded as herder loads it and called through herder's hook
facade: ``herder_alloc_network_create`` makes the pause container, each task
gets a ``ctx.network`` naming it (as herder's client gives it once the CNI
plugins have set the namespace up: here it keeps only its loopback), and
:meth:`BridgeAlloc.close` removes every container the allocation made and its
pause container, whatever happened.
"""

from __future__ import annotations

import contextlib
import signal
import uuid
from pathlib import Path
from typing import Any

from herder import Alloc, AllocNetwork, NetworkDNS, NetworkIsolation, Task, TaskContext, TaskHandle
from herder.context import AllocatedPort, TaskDir
from herder.plugins.hooks import Hooks
from herder.testing.harness import load_hooks

from .helpers import Docker, containers_of, docker

DRIVER = "docker"


def load_driver(pause_image: str, **plugin: Any) -> Hooks:
    """A fresh docker driver (as in a herder that has just started), with ``pause_image`` as its infra image."""
    return load_hooks(DRIVER, {"infra_image": pause_image, **plugin})


class BridgeAlloc:
    """One allocation in bridge mode, in ``directory``."""

    def __init__(self, client: Docker, hooks: Hooks, directory: Path) -> None:
        self.client = client
        self.hooks = hooks
        self.alloc = Alloc(id=str(uuid.uuid4()), name="bridge.g[0]", index=0, job_name="bridge", group_name="g",
                           dir=directory / "alloc", tasks=[])
        self.alloc.dir.mkdir(parents=True)
        self.isolation: NetworkIsolation | None = None
        self.network: AllocNetwork | None = None
        self.started: list[tuple[Task, TaskContext, TaskHandle | None]] = []

    def create(self, hostname: str = "", dns: NetworkDNS | None = None, ip: str = "") -> NetworkIsolation:
        """``herder_alloc_network_create``; ``ip`` is the address the tasks' ``ctx.network`` gives."""
        self.alloc.tasks = [Task(name="t", driver=DRIVER)]
        made = self.hooks.alloc_network_create(self.alloc, hostname, dns)
        assert made is not None, "the docker driver made no pause container"
        driver, self.isolation = made
        assert driver == DRIVER
        self.network = AllocNetwork(mode="bridge", path=self.isolation.path, ip=ip, hostname=hostname, dns=dns,
                                    labels=dict(self.isolation.labels))
        return self.isolation

    def context(self, task: Task, ports: list[AllocatedPort] | None = None) -> TaskContext:
        """A task context in the allocation's namespace, with its directories made."""
        root = self.alloc.dir / task.name
        dirs = TaskDir(dir=root, local_dir=root / "local", secrets_dir=root / "secrets", tmp_dir=root / "tmp",
                       alloc_dir=self.alloc.dir / "alloc", logs_dir=self.alloc.dir / "alloc" / "logs")
        for path in (dirs.local_dir, dirs.secrets_dir, dirs.tmp_dir, dirs.logs_dir):
            path.mkdir(parents=True, exist_ok=True)
        return TaskContext(alloc_id=self.alloc.id, alloc_name=self.alloc.name, alloc_index=0, job_name="bridge",
                           group_name="g", task_name=task.name, env={}, task_dir=dirs, ports=list(ports or []),
                           stdout=(root / "stdout").open("wb", buffering=0),
                           stderr=(root / "stderr").open("wb", buffering=0),
                           network=self.network)

    def start(self, name: str, config: dict[str, Any], ports: list[AllocatedPort] | None = None,
              ) -> tuple[Task, TaskContext, TaskHandle]:
        """Prestart and start a docker task of the allocation."""
        task = Task(name=name, driver=DRIVER, config=config)
        ctx = self.context(task, ports)
        self.started.append((task, ctx, None))
        self.hooks.task_prestart(task, ctx, "driver")
        handle = self.hooks.task_start(task, ctx)
        self.started[-1] = (task, ctx, handle)
        return task, ctx, handle

    def pid(self, handle: TaskHandle) -> int:
        return int(self.client.api.inspect_container(handle.id)["State"]["Pid"])

    def close(self) -> None:
        for task, ctx, handle in self.started:
            with contextlib.suppress(Exception):
                if handle is not None:
                    handle.kill(1.0, signal.SIGKILL)
                self.hooks.task_cleanup(task, ctx, "driver")
            ctx.stdout.close()
            ctx.stderr.close()
        if self.isolation is not None:
            with contextlib.suppress(Exception):
                self.hooks.alloc_network_destroy(DRIVER, self.alloc, self.isolation)
        for container in containers_of(self.client, self.alloc.id):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
