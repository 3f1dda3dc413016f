"""Attack: an interactive exec into an isolated task gives whoever may exec a shell as root.

SPEC §14: a task's ``user`` is honoured for everything herder runs on the task's behalf, exec
included. ``herder alloc exec -i -t`` into an exec task of ``nobody`` must be ``nobody``'s shell in
its container, as the task itself is, not root's (what ``runc exec`` would give with ``--user 0``,
or a runtime's exec run without the container's process settings).
"""

from __future__ import annotations

import pwd

from herder import ExecSession
from herder.testing.plugin import HarnessFactory
from tests.support.require import require_driver
from tests.support.waiting import TIMEOUT, wait_for

NOBODY = pwd.getpwnam("nobody")


def _everything(session: ExecSession) -> bytes:
    """What the command printed on stdout, to its end."""
    printed = bytearray()
    while (chunk := session.read()) is not None:
        if chunk[0] == "stdout":
            printed += chunk[1]
    return bytes(printed)


def test_an_exec_session_in_an_exec_task_runs_as_the_tasks_user(driver_harness: HarnessFactory) -> None:
    require_driver("exec")
    run = driver_harness("exec").task({"command": "/bin/sh", "args": ["-c", "echo up; exec sleep 3600"]},
                                      user="nobody", kill_timeout="2s")
    run.start()
    wait_for(lambda: b"up" in run.output(), what="the task up")
    session = run.exec_session(["/bin/sh", "-c", "id -u; id -g"], tty=False)
    try:
        printed = _everything(session)
        assert session.wait(TIMEOUT) == 0, printed
    finally:
        session.close()
    assert printed.split() == [str(NOBODY.pw_uid).encode(), str(NOBODY.pw_gid).encode()], \
        f"the session's shell ran as {printed!r}, not as the task's user nobody"
    run.kill()
    assert run.wait(TIMEOUT) is not None
    run.cleanup()
