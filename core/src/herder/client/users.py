"""The users a job's tasks may run as on this client: ``[client] user_denylist``.

As Nomad's ``user.denylist`` and ``user.checked_drivers``, the check is on
the task's ``user`` field, for the drivers it applies to. A name is also
known by the account it resolves to, so that another name for the same uid
(``toor`` beside ``root``) does not slip past the list.
"""

from __future__ import annotations

import contextlib
import pwd

from herder.client.config import ClientConfig
from herder.model import Job


def account_names(user: str) -> set[str]:
    """``user`` and the name of the account it resolves to (by name, or by number), if any."""
    names = {user}
    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError:
        if not user.isdigit():
            return names
        uid = int(user)
    with contextlib.suppress(KeyError, OverflowError):  # a number no account has
        names.add(pwd.getpwuid(uid).pw_name)
    return names


def denied_users(job: Job, config: ClientConfig) -> list[str]:
    """One message per task of ``job`` that asks for a user the client denies its driver."""
    problems = []
    for group in job.groups:
        for task in group.tasks:
            if not task.user or task.driver not in config.user_checked_drivers:
                continue
            denied = account_names(task.user) & config.user_denylist
            if denied:
                alias = "" if task.user in denied else f" (the account of {', '.join(sorted(denied))})"
                problems.append(f'task "{task.name}": user "{task.user}"{alias} is denied for driver '
                                f"{task.driver} by [client] user_denylist")
    return problems
