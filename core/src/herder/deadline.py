"""Time bounds on work done for text a job's author wrote.

The step counters (an HCL evaluation's, a template's) bound how much work
is done, not how long one step may take: a step can be a function over a
megabyte string, and a third-party parser counts no steps at all. A
:func:`time_limit` puts a deadline on everything done inside it in this
thread (a context variable, so that threads parsing side by side keep their
own); the loops that count steps and the hooks herder has into the parsers
call :func:`check`, and once the deadline passes it raises
:class:`TimeLimitExceeded` naming the bound.

The clock is the thread's CPU time: the work is all computation, and on a
quiet host it is the time on the wall; on a loaded one a job the quiet host
reads in 3 s must not be refused because the thread waited for a core (a
60,000-attribute job took 9 s of CPU and 103 s on the wall at a load average
of 23 on 2 cores).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from herder.errors import HerderError


class TimeLimitExceeded(HerderError):
    """The work under a :func:`time_limit` went past its deadline; the message names the bound."""


@dataclass
class _Deadline:
    seconds: float
    what: str
    ends: float = field(init=False)

    def __post_init__(self) -> None:
        self.ends = time.thread_time() + self.seconds


_current: ContextVar[_Deadline | None] = ContextVar("herder_deadline", default=None)


@contextmanager
def time_limit(seconds: float, what: str) -> Iterator[None]:
    """Bound the work inside to ``seconds`` of this thread's CPU time; ``what`` names it in the error
    (``"evaluating the job"``: "evaluating the job takes more than 10 s of CPU time (its limit)").
    A limit inside another keeps the earlier deadline of the two."""
    outer = _current.get()
    inner = _Deadline(seconds, what)
    token = _current.set(inner if outer is None or inner.ends < outer.ends else outer)
    try:
        yield
    finally:
        _current.reset(token)


def check() -> None:
    """Raise :class:`TimeLimitExceeded` if the current deadline has passed (nothing without one)."""
    deadline = _current.get()
    if deadline is not None and time.thread_time() > deadline.ends:
        raise TimeLimitExceeded(f"{deadline.what} takes more than {deadline.seconds:g} s of CPU time (its limit)")
