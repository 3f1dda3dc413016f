"""The user a task runs as, for drivers that start processes of the host.

``user`` is honoured for everything herder runs on a task's behalf, not
only the task itself: a script check or ``herder alloc exec`` in a task of
``user = "nobody"`` runs as nobody, with nobody's groups and home.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from typing import Any

from herder.errors import DriverError


@dataclass(frozen=True)
class TaskUser:
    """An account of the host: its uid, primary gid, every group it is in (as ``initgroups`` sets them)
    and its home directory."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str

    @classmethod
    def lookup(cls, name: str) -> TaskUser:
        """:raises DriverError: no such user on this host."""
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise DriverError(f"user {name!r} does not exist on this host") from None
        return cls(name=entry.pw_name, uid=entry.pw_uid, gid=entry.pw_gid,
                   groups=tuple(os.getgrouplist(entry.pw_name, entry.pw_gid)), home=entry.pw_dir)

    def environment(self) -> dict[str, str]:
        """The user's ``HOME``, ``USER`` and ``LOGNAME``: over herder's own, under the task's ``env``."""
        return {"HOME": self.home, "USER": self.name, "LOGNAME": self.name}

    def popen_arguments(self) -> dict[str, Any]:
        """The :class:`subprocess.Popen` arguments that run a process as this user.

        :raises DriverError: herder is not root and this is another user.
        """
        if os.geteuid() == 0:
            return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}
        if self.uid != os.geteuid():
            raise DriverError(f"cannot run as user {self.name!r}: herder does not run as root")
        return {}
