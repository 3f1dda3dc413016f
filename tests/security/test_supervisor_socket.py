"""A task must never reach the supervisor, which runs commands as root outside every namespace.

The attack: a task running as root in the host's network namespace (exec
shares it, as does a docker container with ``network_mode = "host"``) reads
the supervisor's socket from ``/proc/net/unix`` (an abstract socket belongs
to the network namespace, not to a filesystem), says ``hello``, then
``spawn``: the command would run as root on the host. It also tries every
socket it can see in its own filesystem, and the socket's path on the host.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from herder.client.config import ClientConfig, Config
from herder.supervisor import Supervisor, SupervisorUnavailable
from herder.supervisor.protocol import SOCKET_NAME, state_dir
from tests.docker.conftest import busybox_image, docker_client, docker_driver, jobs  # noqa: F401 (fixtures)
from tests.docker.helpers import DockerJobs, docker_job, job_name
from tests.exec.conftest import exec_driver, no_container_left_behind  # noqa: F401 (fixtures)
from tests.exec.helpers import job as exec_job
from tests.support.running import run_job

SQUAT_LIMIT = 30.0
"""A generous bound for "refused at once, not after a hang": nothing in the refusal waits."""

# What the hostile task runs: python3 -c ATTACK MARKER OLD_ABSTRACT_NAME HOST_SOCKET_PATH.
# It prints one JSON line per socket it tried, then "done". Abstract sockets are tried only under the
# name the supervisor of this very data dir had: other programs' (other test runs') are left alone.
ATTACK = r"""
import json, os, socket, stat, sys
marker, abstract, host_path = sys.argv[1:4]
names = {host_path}
with open("/proc/net/unix") as table:
    for line in table.read().splitlines()[1:]:
        fields = line.split()
        if len(fields) > 7 and "supervisor" in fields[7] and (not fields[7].startswith("@") or fields[7] == abstract):
            names.add(fields[7])
for top in ("/alloc", "/local", "/secrets", "/tmp"):
    for root, _, files in os.walk(top):
        for name in files:
            path = os.path.join(root, name)
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                names.add(path)
hello = {"op": "hello", "rid": 0, "session": "attack", "keep": True}
spawn = {"op": "spawn", "rid": 1, "id": "attack", "argv": ["/bin/sh", "-c", "echo pwned > " + marker],
         "env": {"PATH": "/usr/bin:/bin"}, "cwd": "/", "stop_signal": 15, "kill_timeout": 1,
         "logs": {"dir": "/tmp", "task": "attack", "max_files": 1, "max_file_size": 1}}
for name in sorted(names):
    address = "\0" + name[1:] if name.startswith("@") else name
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(10)
            sock.connect(address)
            sock.sendall((json.dumps(hello) + "\n" + json.dumps(spawn) + "\n").encode())
            received = b""
            while received.count(b"\n") < 2:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += chunk
        print(json.dumps({"name": name, "replies": received.decode(errors="replace")}), flush=True)
    except OSError as err:
        print(json.dumps({"name": name, "error": str(err)}), flush=True)
print("done", flush=True)
"""

HOST_PYTHON = "/usr/bin/python3"


def old_abstract_name(data_dir: Path) -> str:
    """The abstract socket the supervisor of ``data_dir`` listened on, as ``/proc/net/unix`` shows it."""
    digest = hashlib.sha256(os.fsencode(os.path.realpath(data_dir))).hexdigest()[:20]
    return "@herder-supervisor-" + digest


def attack_args(data_dir: Path, marker: Path) -> list[str]:
    return ["-c", ATTACK, str(marker), old_abstract_name(data_dir), str(state_dir(data_dir) / SOCKET_NAME)]


def attempts(output: str) -> list[dict[str, Any]]:
    lines = output.splitlines()
    assert lines and lines[-1] == "done", output  # the attack ran to its end
    return [json.loads(line) for line in lines[:-1]]


def assert_attack_failed(output: str, marker: Path, data_dir: Path) -> None:
    tried = attempts(output)
    # It found the supervisor's socket in /proc/net/unix (a filesystem one shows as its path, which
    # the task cannot reach), and tried it along with the host's path.
    assert any(entry["name"] != str(state_dir(data_dir) / SOCKET_NAME) for entry in tried), tried
    assert not any('"ok":true' in entry.get("replies", "").replace(" ", "") for entry in tried), tried
    assert not marker.exists(), tried


@pytest.mark.skipif(not Path(HOST_PYTHON).exists(), reason=f"the attack runs {HOST_PYTHON}")
def test_a_root_exec_task_cannot_reach_the_supervisor(exec_driver: str, data_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    marker = tmp_path / "pwned"  # on the host: the task cannot see tmp_path
    job = exec_job({"command": HOST_PYTHON, "args": attack_args(data_dir, marker)}, user="root")
    allow_root = Config(data_dir=data_dir, client=ClientConfig(user_denylist=frozenset()))  # the attacker's best case
    run = run_job(json.dumps(job), data_dir, fmt="json", config=allow_root, timeout=120)
    logs = run.runner.allocs[0].tasks[0].ctx.task_dir.logs_dir
    output = (logs / "t.stdout.0").read_text()
    assert_attack_failed(output, marker, data_dir)
    assert run.status == "complete", run.types()


@pytest.mark.skipif(not Path(HOST_PYTHON).exists(), reason=f"the attack runs {HOST_PYTHON}")
def test_a_root_container_on_the_host_network_cannot_reach_the_supervisor(
    jobs: DockerJobs, busybox_image: str, data_dir: Path, tmp_path: Path,  # noqa: F811
) -> None:
    marker = tmp_path / "pwned"
    # The host's Python, read-only, to write the attack in: it grants nothing the container could not do.
    config = {"image": busybox_image, "command": HOST_PYTHON, "args": attack_args(data_dir, marker),
              "network_mode": "host", "volumes": ["/usr:/usr:ro", "/lib:/lib:ro", "/lib64:/lib64:ro"]}
    with Supervisor(data_dir) as supervisor:  # the agent's supervisor runs, as it does beside any task
        supervisor.connect()
        run = jobs.run(docker_job(job_name("socket-attack"), config, type="batch"),
                       plugin={"docker": {"volumes_enabled": True, "allow_host_network": True}},
                       timeout=120)
    logs = run.runner.allocs[0].tasks[0].ctx.task_dir.logs_dir
    assert run.status == "complete", [p.read_text() for p in logs.iterdir()]
    output = (logs / "t.stdout.0").read_text()
    assert_attack_failed(output, marker, data_dir)
    assert run.status == "complete", run.types()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a socket of another user")
def test_a_socket_squatted_by_another_user_is_refused_at_once(data_dir: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    directory = state_dir(data_dir)
    directory.mkdir(parents=True, mode=0o700)
    dir_fd = os.open(directory, os.O_PATH)
    try:
        with socket.socket(socket.AF_UNIX) as squatter:
            squatter.bind(f"/proc/self/fd/{dir_fd}/{SOCKET_NAME}")  # the data dir may be deeper than 107 bytes
            squatter.listen()
            os.chown(directory / SOCKET_NAME, nobody.pw_uid, nobody.pw_gid)
            started = time.monotonic()
            with pytest.raises(SupervisorUnavailable) as error, Supervisor(data_dir) as supervisor:
                supervisor.connect()
            assert time.monotonic() - started < SQUAT_LIMIT
    finally:
        os.close(dir_fd)
    assert f"belongs to uid {nobody.pw_uid}" in str(error.value)
