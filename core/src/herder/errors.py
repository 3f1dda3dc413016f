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
    case a task wants it again). ``herder_task_cleanup`` is called again for
    that task, for the step that raised it only (the driver's, or the lifecycle
    plugins'), once ``delay`` seconds have passed; that call may raise it
    again, so a cleanup may be called more than once. The wait is kept in the
    state database of the data dir (herder's, or the Nomad plugin's): the call
    is made when due by this process or, if it ends first, by the next one on
    the same data dir (at once if overdue); ``herder run`` makes the calls due
    by its end before it ends. The later call gets the same task and a context
    with the same ``created`` resources. The conformance kit, without a data
    dir, hands it back to the test (:meth:`herder.testing.TaskRun.cleanup`).
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
