"""The task environment and the helpers drivers use to adjust it."""

from __future__ import annotations

from pathlib import Path

import pytest

from herder.client.env import host_address, task_environment
from herder.context import AllocatedPort, TaskDir
from herder.model import Group, Job, PortSpec, Resources, RestartPolicy, Task
from herder.sdk import clean_env_var, inherited_environment, set_port_vars, set_task_dirs, set_var


def build_env(tmp_path: Path, parent_id: str = "", **task_fields: object) -> dict[str, str]:
    task = Task(
        name="server",
        driver="raw_exec",
        resources=Resources(cpu=250, memory=128, ports=(PortSpec("http"), PortSpec("http-admin"))),
        **task_fields,  # type: ignore[arg-type]
    )
    group = Group(
        name="app",
        count=3,
        restart=RestartPolicy(attempts=2, interval=1800, delay=15, mode="fail"),
        tasks=[task],
        meta={"tier": "group", "owner": "group"},
    )
    job = Job(
        name="web",
        type="service",
        groups=[group],
        datacenters=["dc2", "dc3"],
        region="eu",
        meta={"tier": "job", "owner": "job", "team": "ops"},
        parent_id=parent_id,
    )
    root = tmp_path / "allocs" / "abc"
    task_dir = TaskDir(
        dir=root / "server",
        local_dir=root / "server" / "local",
        secrets_dir=root / "server" / "secrets",
        tmp_dir=root / "server" / "tmp",
        alloc_dir=root / "alloc",
        logs_dir=root / "alloc" / "logs",
    )
    ports = [
        AllocatedPort(label="http", value=21000),
        AllocatedPort(label="http-admin", value=21001, to=9090),
    ]
    return task_environment(
        job=job,
        group=group,
        task=task,
        alloc_id="abc",
        alloc_index=2,
        task_dir=task_dir,
        ports=ports,
        datacenter="dc2",
    )


@pytest.mark.parametrize("prefix", ["HERDER_", "NOMAD_"])
def test_every_variable_has_both_prefixes(tmp_path: Path, prefix: str) -> None:
    env = build_env(tmp_path)
    root = tmp_path / "allocs" / "abc"
    expected = {
        "ALLOC_DIR": str(root / "alloc"),
        "TASK_DIR": str(root / "server" / "local"),
        "SECRETS_DIR": str(root / "server" / "secrets"),
        "ALLOC_ID": "abc",
        "ALLOC_NAME": "web.app[2]",
        "ALLOC_INDEX": "2",
        "JOB_NAME": "web",
        "JOB_ID": "web",
        "GROUP_NAME": "app",
        "TASK_NAME": "server",
        "DC": "dc2",
        "REGION": "eu",
        "CPU_LIMIT": "250",
        "MEMORY_LIMIT": "128",
        "IP_http": "127.0.0.1",
        "PORT_http": "21000",
        "ADDR_http": "127.0.0.1:21000",
        "HOST_PORT_http": "21000",
        "IP_http_admin": "127.0.0.1",
        "PORT_http_admin": "21001",
        "ADDR_http_admin": "127.0.0.1:21001",
        "HOST_PORT_http_admin": "21001",
    }
    for name, value in expected.items():
        assert env[prefix + name] == value, name


def test_only_a_child_has_a_parent(tmp_path: Path) -> None:
    assert "NOMAD_JOB_PARENT_ID" not in build_env(tmp_path)
    env = build_env(tmp_path, parent_id="nightly")
    assert env["NOMAD_JOB_PARENT_ID"] == env["HERDER_JOB_PARENT_ID"] == "nightly"


def test_meta_precedence_is_job_then_group_then_task(tmp_path: Path) -> None:
    env = build_env(tmp_path, meta={"tier": "task", "build-id": "7"})
    assert env["NOMAD_META_TIER"] == "task"
    assert env["NOMAD_META_OWNER"] == "group"
    assert env["HERDER_META_TEAM"] == "ops"
    assert env["NOMAD_META_BUILD_ID"] == "7"
    assert env["NOMAD_META_build_id"] == "7"


@pytest.mark.parametrize(
    ("name", "cleaned"),
    [
        ("http-admin", "http_admin"),
        ("NOMAD_PORT_a.b c", "NOMAD_PORT_a_b_c"),
        ("9lives", "_lives"),
        ("x9", "x9"),
        ("ünï", "__n__"),
        ("", ""),
    ],
)
def test_clean_env_var(name: str, cleaned: str) -> None:
    assert clean_env_var(name) == cleaned


def test_drivers_rewrite_what_the_task_sees(tmp_path: Path) -> None:
    env = build_env(tmp_path)
    set_task_dirs(env, "/alloc", "/local", "/secrets")
    set_port_vars(env, "http-admin", 9090)
    set_var(env, "CUSTOM", "1")
    for prefix in ("HERDER_", "NOMAD_"):
        assert env[prefix + "ALLOC_DIR"] == "/alloc"
        assert env[prefix + "TASK_DIR"] == "/local"
        assert env[prefix + "SECRETS_DIR"] == "/secrets"
        assert env[prefix + "PORT_http_admin"] == "9090"
        # the address that reaches the task from outside: the host's IP and port
        assert env[prefix + "ADDR_http_admin"] == "127.0.0.1:21001"
        assert env[prefix + "HOST_PORT_http_admin"] == "21001"
        assert env[prefix + "CUSTOM"] == "1"


def test_an_ipv6_host_address_is_bracketed(tmp_path: Path) -> None:
    assert host_address("::1", 5432) == "[::1]:5432"
    assert host_address("10.0.0.1", 5432) == "10.0.0.1:5432"


def test_inherited_environment_drops_secrets() -> None:
    agent = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "AWS_REGION": "eu-west-1",
        "AWS_PROFILE": "dev",
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_SESSION_TOKEN": "x",
        "AWS_SECURITY_TOKEN": "x",
        "CONSUL_TOKEN": "x",
        "CONSUL_HTTP_TOKEN": "x",
        "VAULT_TOKEN": "x",
        "HERDER_TOKEN": "x",
        "NOMAD_TOKEN": "x",
    }
    assert inherited_environment(agent) == {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "AWS_REGION": "eu-west-1",
        "AWS_PROFILE": "dev",
    }
