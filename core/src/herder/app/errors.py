"""What a use case answers when it cannot be done: each front end translates these to its medium."""

from __future__ import annotations

from herder.errors import HerderError


class NotFound(HerderError):
    """No allocation, job or task by that name."""


class Conflict(HerderError):
    """The request cannot be done in the current state (an ambiguous prefix, a task not running, draining)."""


class OutOfBounds(Conflict):
    """A count outside the bounds a group's ``scaling`` block sets (Nomad answers 400 Bad Request)."""
