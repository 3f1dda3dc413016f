"""``[client] user_denylist`` and ``user_checked_drivers``: which tasks' users a client refuses."""

from __future__ import annotations

import pytest

from herder.client.config import ClientConfig
from herder.client.users import account_names, denied_users
from herder.jobspec import load_job_text


def job(*tasks: tuple[str, str]) -> str:
    body = "".join(f'task "{driver}-{user or "none"}" {{\n driver = "{driver}"\n user = "{user}"\n'
                   f' config {{\n command = "true"\n }}\n }}\n' for driver, user in tasks)
    return f'job "j" {{\n group "g" {{\n {body} }}\n}}\n'


def test_account_names() -> None:
    assert account_names("root") == {"root"}
    assert account_names("0") == {"0", "root"}  # a uid, where a driver would take one
    assert account_names("no-such-user-here") == {"no-such-user-here"}
    assert account_names("999999999") == {"999999999"}


@pytest.mark.parametrize(("tasks", "config", "denied"), [
    ([("exec", "root")], ClientConfig(), ['task "exec-root": user "root" is denied for driver exec by '
                                          "[client] user_denylist"]),
    ([("exec", "0")], ClientConfig(), ['task "exec-0": user "0" (the account of root) is denied for driver exec '
                                       "by [client] user_denylist"]),
    # Nomad checks the task's user field: an empty one is the driver's default user.
    ([("exec", ""), ("java", "nobody"), ("raw_exec", "root")], ClientConfig(), []),
    ([("exec", "root")], ClientConfig(user_denylist=frozenset()), []),
    ([("raw_exec", "root"), ("qemu", "root")], ClientConfig(user_checked_drivers=frozenset({"raw_exec"})),
     ['task "raw_exec-root": user "root" is denied for driver raw_exec by [client] user_denylist']),
])
def test_denied_users(tasks: list[tuple[str, str]], config: ClientConfig, denied: list[str]) -> None:
    assert denied_users(load_job_text(job(*tasks), "hcl", "job.hcl"), config) == denied
