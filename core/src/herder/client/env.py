"""The task environment as the host sees it."""

from __future__ import annotations

from collections.abc import Sequence

from herder.context import AllocatedPort, TaskDir
from herder.model import Group, Job, Task
from herder.objects import AllocNetwork
from herder.sdk.env import PREFIXES, clean_env_var, set_port_vars, set_task_dirs, set_var

ALLOC_INTERFACE = "eth0"
"""The allocation's interface in its namespace."""


def host_address(ip: str, port: int) -> str:
    """``ip:port``, with an IPv6 address in brackets."""
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def isolated_port_environment(ports: Sequence[AllocatedPort], network: AllocNetwork) -> dict[str, str]:
    """The port variables of a task in its allocation's namespace, as Nomad sets them there.

    ``NOMAD_PORT_<l>`` and ``NOMAD_ALLOC_PORT_<l>`` are the port inside (``to``, else the host
    port); ``NOMAD_HOST_PORT_<l>``, ``NOMAD_IP_<l>`` and ``NOMAD_ADDR_<l>`` (and ``NOMAD_HOST_IP_``,
    ``NOMAD_HOST_ADDR_``) the host's, which reach it from outside; ``NOMAD_ALLOC_IP_<l>``,
    ``NOMAD_ALLOC_ADDR_<l>`` and ``NOMAD_ALLOC_INTERFACE_<l>`` the allocation's own address.
    """
    env: dict[str, str] = {}
    for port in ports:
        label, inside = port.label, port.to or port.value
        set_port_vars(env, label, inside)
        set_var(env, f"ALLOC_PORT_{label}", str(inside))
        set_var(env, f"HOST_PORT_{label}", str(port.value))
        for prefix in ("", "HOST_"):
            set_var(env, f"{prefix}IP_{label}", port.host_ip)
            set_var(env, f"{prefix}ADDR_{label}", host_address(port.host_ip, port.value))
        if network.ip:
            set_var(env, f"ALLOC_IP_{label}", network.ip)
            set_var(env, f"ALLOC_ADDR_{label}", host_address(network.ip, inside))
            set_var(env, f"ALLOC_INTERFACE_{label}", ALLOC_INTERFACE)
    return env


def task_environment(
    *,
    job: Job,
    group: Group,
    task: Task,
    alloc_id: str,
    alloc_index: int,
    task_dir: TaskDir,
    ports: Sequence[AllocatedPort],
    datacenter: str,
) -> dict[str, str]:
    """herder's variables for ``task``, with host paths and host ports.

    The task's own ``env`` is not included: the runner interpolates it
    against these variables (and ``${attr.*}``, ``${meta.*}``, ...) at each
    start and applies it last.
    """
    env: dict[str, str] = {}
    set_task_dirs(env, task_dir.alloc_dir, task_dir.local_dir, task_dir.secrets_dir)
    set_var(env, "ALLOC_ID", alloc_id)
    set_var(env, "ALLOC_NAME", f"{job.name}.{group.name}[{alloc_index}]")
    set_var(env, "ALLOC_INDEX", str(alloc_index))
    set_var(env, "JOB_NAME", job.name)
    set_var(env, "JOB_ID", job.name)  # one namespace, one region: Nomad's job ID is the name
    if job.parent_id:  # as Nomad, only for a periodic or dispatched child
        set_var(env, "JOB_PARENT_ID", job.parent_id)
    set_var(env, "GROUP_NAME", group.name)
    set_var(env, "TASK_NAME", task.name)
    set_var(env, "DC", datacenter)
    set_var(env, "REGION", job.region)
    set_var(env, "CPU_LIMIT", str(task.resources.cpu))
    set_var(env, "MEMORY_LIMIT", str(task.resources.memory))
    for port in ports:
        set_var(env, f"IP_{port.label}", port.host_ip)
        set_var(env, f"HOST_PORT_{port.label}", str(port.value))
        set_var(env, f"ADDR_{port.label}", host_address(port.host_ip, port.value))
        set_port_vars(env, port.label, port.value)
    set_upstream_vars(env, group)
    for key, value in {**job.meta, **group.meta, **task.meta}.items():
        # As Nomad: upper-cased, and as written for job files that use that.
        set_var(env, f"META_{key}", value)
        set_var(env, f"META_{clean_env_var(key).upper()}", value)
    return env


def set_upstream_vars(env: dict[str, str], group: Group) -> None:
    """``{HERDER,NOMAD}_UPSTREAM_{ADDR,IP,PORT}_<name>`` of each Connect upstream of the group, where
    its sidecar listens in the allocation's namespace; ``<name>`` is the destination's name as written
    (``count-api``, as Nomad sets it too) and sanitised (``count_api``)."""
    for upstream in group.upstreams:
        values = {"IP": upstream.local_bind_address, "PORT": str(upstream.local_bind_port),
                  "ADDR": host_address(upstream.local_bind_address, upstream.local_bind_port)}
        for name in dict.fromkeys((upstream.destination_name, clean_env_var(upstream.destination_name))):
            for prefix in PREFIXES:
                for kind, value in values.items():
                    env[f"{prefix}UPSTREAM_{kind}_{name}"] = value
