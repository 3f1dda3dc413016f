"""Exceptions shared by the core and plugins."""

from __future__ import annotations


class HerderError(Exception):
    """Base class of every error herder raises on purpose."""


class DriverError(HerderError):
    """A driver failed in a way that retrying will not fix.

    Raised from a hook, it fails the task at once (``Driver Failure``, then
    ``Not Restarting`` with "Error was unrecoverable").
    """


class RecoverableError(HerderError):
    """A transient failure: the same call may succeed if tried again.

    Raised from ``herder_task_prestart`` or ``herder_task_start``, the start is
    retried under the task's restart policy; from ``herder_task_cleanup``, the
    cleanup is retried up to 4 times with growing delays.
    """


class CleanupLater(HerderError):
    """Raised from ``herder_task_cleanup``: not finished yet, call again in ``delay`` seconds.

    For work that must wait (an image kept for ``cleanup_image_delay`` in
    case a task wants it again). The wait is kept in the state database: the
    call is made again when due by this herder process or, if it ends first,
    by the next one on the same data dir. The later call gets the same task
    and a context with the same ``created`` resources.
    """

    def __init__(self, delay: float, reason: str = "") -> None:
        super().__init__(reason or f"cleanup continues in {delay:g}s")
        self.delay = delay


class JobError(HerderError):
    """A job file is invalid. ``errors`` holds one message per problem."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


class DispatchError(JobError):
    """A child job that cannot be made: a dispatch its parameterized job does not
    allow (``errors`` says what is wrong with it), or a launch of a job that is not periodic."""


class ConfigError(HerderError):
    """The agent configuration file is invalid."""


class PlacementError(HerderError):
    """An allocation cannot be placed (for example, a static port is taken)."""
