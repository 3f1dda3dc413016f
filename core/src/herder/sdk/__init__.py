"""The driver SDK: the building blocks a driver needs besides :mod:`herder` itself.

A driver plugin imports only :mod:`herder` (the objects, errors and
``hookimpl``) and this module; everything else in herder is internal.

- :class:`SupervisedProcess`: a task handle for a local process, started
  through the data dir's supervisor so that it outlives the herder process,
  with its output in the rotating log files, and recoverable from ``state()``;
  :class:`DelegatingHandle`: a driver's handle around one (or around any
  handle), which overrides only what its task does differently.
- :func:`run_capped`: run a short command with a timeout and capped output,
  as ``herder_task_exec`` needs; :class:`ExecProcess`: an interactive
  command on a pseudo-terminal or pipes, as ``herder_task_exec_session``
  needs; :class:`HostCommands`: both, and the environment, for a task that
  is a plain process of the host (raw_exec's, a plain JVM's).
- The task environment: :func:`set_var`, :func:`get_var`,
  :func:`set_port_vars`, :func:`set_task_dirs`, :func:`clean_env_var`,
  :func:`inherited_environment`.
- :class:`TaskUser`: the account a task runs as (uid, groups, home), for
  what herder runs on the task's behalf (``run_capped(..., user=)``).
- :func:`resolve_in_task_dir`: a job-file path inside the task directory,
  never outside it (as a path string, for display or a driver's mount);
  :func:`locate_in_task_dir`: the same path as a root and a relative path
  for the safefs functions.
- Files in directories a task can write, reached through directory
  descriptors without following links (:mod:`herder.sdk.safefs`):
  :func:`safe_root`, :func:`open_beneath`, :func:`open_dir`,
  :func:`open_file`, :func:`read_file`, :func:`write_atomic`,
  :func:`set_mode`, :func:`give_tree`, :class:`UnsafePathError`.
- Resource usage as :class:`herder.TaskStats`: :func:`process_stats` of a
  tree of processes (``/proc``), :func:`cgroup_stats` of a cgroup; where the
  host mounts its cgroups: :func:`cgroup_mounts`.
- :func:`parse_duration`, :func:`format_duration`, :func:`parse_signal`.
- Credentials out of what is shown: :func:`redact_url` (a URL's password and
  ``sshkey`` as ``redacted``, as go-getter's ``RedactURL``), :func:`secrets_of`
  and :func:`redact` (every form of them out of a text).
"""

from __future__ import annotations

from herder.objects import EXEC_OUTPUT_LIMIT, parse_signal
from herder.sdk.delegating import DelegatingHandle
from herder.sdk.durations import format_duration, parse_duration
from herder.sdk.env import (
    clean_env_var,
    get_var,
    inherited_environment,
    set_port_vars,
    set_task_dirs,
    set_var,
)
from herder.sdk.exec_session import ExecProcess
from herder.sdk.host import HostCommands
from herder.sdk.paths import locate_in_task_dir, resolve_in_task_dir
from herder.sdk.process import exit_result, kill_group, kill_session, run_capped
from herder.sdk.redact import redact, redact_url, secrets_of
from herder.sdk.safefs import (
    UnsafePathError,
    give_tree,
    open_beneath,
    open_dir,
    open_file,
    read_file,
    safe_root,
    set_mode,
    write_atomic,
)
from herder.sdk.stats import CgroupMounts, cgroup_mounts, cgroup_stats, process_stats
from herder.sdk.supervised import SupervisedProcess
from herder.sdk.users import TaskUser

__all__ = [
    "EXEC_OUTPUT_LIMIT",
    "CgroupMounts",
    "DelegatingHandle",
    "ExecProcess",
    "HostCommands",
    "SupervisedProcess",
    "TaskUser",
    "UnsafePathError",
    "cgroup_mounts",
    "cgroup_stats",
    "clean_env_var",
    "exit_result",
    "format_duration",
    "get_var",
    "give_tree",
    "inherited_environment",
    "kill_group",
    "kill_session",
    "locate_in_task_dir",
    "open_beneath",
    "open_dir",
    "open_file",
    "parse_duration",
    "parse_signal",
    "process_stats",
    "read_file",
    "redact",
    "redact_url",
    "resolve_in_task_dir",
    "run_capped",
    "safe_root",
    "secrets_of",
    "set_mode",
    "set_port_vars",
    "set_task_dirs",
    "set_var",
    "write_atomic",
]
