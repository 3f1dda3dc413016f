"""What herder's built-in plugins may use of the client that owns them.

A protocol rather than the :class:`herder.client.client.Client` itself: the
client creates its plugins, so they must not import it back.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from herder.client.alloc_runner import AllocRunner
from herder.client.config import Config
from herder.client.health import HealthChange
from herder.client.signing import IdentitySigner
from herder.client.task_runner import TaskRunner
from herder.context import TaskContext
from herder.plugins.hooks import Hooks


class Host(Protocol):
    config: Config
    session: str
    data_dir: Path
    hooks: Hooks
    on_health: Callable[[HealthChange], None]
    signer: IdentitySigner

    def alloc(self, alloc_id: str) -> AllocRunner | None:
        """An allocation of this client, while it is here."""

    def task_runner(self, ctx: TaskContext) -> TaskRunner | None:
        """The runner of the task ``ctx`` belongs to."""

    def restart_task(self, alloc_id: str, task: str, reason: str, *, failure: bool = False) -> None:
        """Restart a running task; ``failure`` counts against its restart policy."""
