"""The Nomad listener's newer routes against what a task plants and what a job's text asks for.

``nomad alloc fs`` reads as root what an allocation's tasks wrote. Beyond links, FIFOs and hard links
(``test_alloc_fs.py``), a task makes:

- a device node (root in a container may: ``mknod`` is one of Docker's default capabilities; the test,
  as root, plays it): opening it runs the host device's driver as root, outside the container's device
  rules (a watchdog, a tape, a tty), even with ``O_NONBLOCK``. The agent must look, never open;
- a name that is not UTF-8, which no JSON answer carries: the listing of its directory failed whole;
- a write lease on its own file (``F_SETLEASE``): an open of it fails with ``EWOULDBLOCK``, which was a 500.

``nomad job plan`` diffs the job sent against the registered one: a list of plain values (datacenters,
a service's tags) was compared member by member against a list, so two jobs of a few hundred
kilobytes held a worker thread for minutes, of 4 MiB for hours.
"""

from __future__ import annotations

import ctypes
import os
import select
import shutil
import stat
import struct
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.core.nomad_api.conftest import NomadAgent, require_nomad
from tests.support.processes import wait_until_gone
from tests.support.waiting import TIMEOUT, wait_for

JOB = """
job "planter" {{
  group "g" {{
    task "t" {{
      driver = "raw_exec"
      user   = "nobody"
      config {{
        command = "{python}"
        args    = ["-c", <<EOF
import fcntl, os, signal, time
os.chdir("local")
signal.signal(signal.SIGIO, signal.SIG_IGN)  # a lease's break is announced with SIGIO
with open(b"odd-\\xff\\xfe-name", "w") as file:
    file.write("x")
with open("plain", "w") as file:
    file.write("harmless")
with open("leased", "w") as file:
    file.write("mine")
held = os.open("leased", os.O_RDONLY)
fcntl.fcntl(held, fcntl.F_SETLEASE, fcntl.F_WRLCK)
with open("ready", "w") as file:
    file.write("1")
time.sleep(3600)
EOF
        ]
      }}
    }}
  }}
}}
"""


HOST_PYTHON = "/usr/bin/python3"
"""The task's interpreter: one that user nobody may run (not root's pyenv shims)."""


@pytest.fixture(scope="module")
def agent() -> Iterator[NomadAgent]:
    require_nomad()
    if not Path(HOST_PYTHON).exists():
        pytest.skip(f"the task runs {HOST_PYTHON}")
    root = Path(tempfile.mkdtemp(prefix="herder-nomad-routes-"))
    root.chmod(0o711)  # nobody must reach its task dir
    process = NomadAgent(root)
    process.start()
    try:
        yield process
    finally:
        process.shutdown()
        assert not wait_until_gone(root), "processes left behind"
        shutil.rmtree(root)


@pytest.fixture(scope="module")
def alloc(agent: NomadAgent) -> dict[str, Any]:
    with agent.http() as http:
        submitted = http.post("/v1/jobs", json={"text": JOB.format(python=HOST_PYTHON), "format": "hcl"})
    assert submitted.status_code == 200, submitted.text
    [found] = submitted.json()["allocations"]
    local = agent.data_dir / "allocs" / found["id"] / "t" / "local"
    wait_for(lambda: (local / "ready").exists(), what="the task's plants")
    return {"id": found["id"], "local": local}


def get(agent: NomadAgent, route: str, alloc_id: str, **params: Any) -> httpx.Response:
    with agent.nomad_http() as http:
        http.timeout = httpx.Timeout(TIMEOUT)
        return http.get(f"/v1/client/fs/{route}/{alloc_id}", params=params)


IN_OPEN = 0x20
"""inotify's event of a file opened (by anyone: the agent here)."""


class Opens:
    """The names opened in a directory, as inotify tells them (``O_PATH`` opens nothing, so tells nothing)."""

    def __init__(self, directory: Path) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0 and libc.inotify_add_watch(self.fd, bytes(directory), IN_OPEN) >= 0

    def names(self) -> set[bytes]:
        seen: set[bytes] = set()
        while select.select([self.fd], [], [], 0)[0]:
            data = os.read(self.fd, 1 << 16)
            offset = 0
            while offset < len(data):
                _, _, _, length = struct.unpack_from("iIII", data, offset)
                seen.add(data[offset + 16:offset + 16 + length].rstrip(b"\0"))
                offset += 16 + length
        return seen

    def close(self) -> None:
        os.close(self.fd)


def test_a_device_node_is_never_opened(agent: NomadAgent, alloc: dict[str, Any]) -> None:
    # A node of /dev/null's numbers: harmless to open, and inotify shows whether the agent did.
    os.mknod(alloc["local"] / "device", 0o644 | stat.S_IFCHR, os.makedev(1, 3))
    opens = Opens(alloc["local"])
    try:
        for route, params in [("cat", {}), ("readat", {"offset": 0, "limit": 10}), ("stream", {"follow": "false"})]:
            answer = get(agent, route, alloc["id"], path="t/local/device", **params)
            assert answer.status_code == 400 and "not a regular file" in answer.text, (route, answer.text)
            assert b"device" not in opens.names(), f"{route}: the agent opened the device node, as root"
        shown = get(agent, "stat", alloc["id"], path="t/local/device").json()
        assert shown["FileMode"].startswith("Dc")
        # A regular file is still read, through its O_PATH look first.
        assert get(agent, "cat", alloc["id"], path="t/local/plain").text == "harmless"
        assert b"plain" in opens.names()
    finally:
        opens.close()


def test_a_name_that_is_not_utf8_does_not_hide_its_directory(agent: NomadAgent, alloc: dict[str, Any]) -> None:
    answer = get(agent, "ls", alloc["id"], path="t/local")
    assert answer.status_code == 200, answer.text
    names = [entry["Name"] for entry in answer.json()]
    assert "odd-\ufffd\ufffd-name" in names and "plain" in names, names


def test_a_leased_file_is_refused_not_an_error(agent: NomadAgent, alloc: dict[str, Any]) -> None:
    for route, params in [("cat", {}), ("readat", {"offset": 0, "limit": 10}), ("stream", {"follow": "false"})]:
        answer = get(agent, route, alloc["id"], path="t/local/leased", **params)
        assert answer.status_code == 400 and "lease" in answer.text, (route, answer.status_code, answer.text)
    assert get(agent, "stat", alloc["id"], path="t/local/leased").status_code == 200


DATACENTERS = 60_000
"""Plain values in the job's list: quadratic, about 2 minutes of CPU here; in sets, well under a second."""


def test_plan_of_a_long_list_is_linear(agent: NomadAgent) -> None:
    def job(last: str) -> dict[str, Any]:
        return {"ID": "wide", "Name": "wide", "Type": "service",
                "Datacenters": ["dc1", *(f"d{i}" for i in range(DATACENTERS)), last],
                "TaskGroups": [{"Name": "g", "Count": 1, "Tasks": [{
                    "Name": "t", "Driver": "raw_exec", "Config": {"command": "/bin/sleep", "args": ["3600"]}}]}]}

    with agent.nomad_http() as http:
        http.timeout = httpx.Timeout(TIMEOUT)
        registered = http.put("/v1/jobs", json={"Job": job("old")})
        assert registered.status_code == 200, registered.text
        try:
            planned = http.put("/v1/job/wide/plan", json={"Job": job("new"), "Diff": True})
            assert planned.status_code == 200, planned.text
            [changed] = [o for o in planned.json()["Diff"]["Objects"] if o["Name"] == "Datacenters"]
            assert {(f["Type"], f["Old"] or f["New"]) for f in changed["Fields"]} == {("Deleted", "old"),
                                                                                      ("Added", "new")}
        finally:
            http.delete("/v1/job/wide", params={"purge": "true"})


def test_check_index_lets_one_of_racing_runs_through(agent: NomadAgent) -> None:
    # Three `nomad job run -check-index` of the same index at once, each a different job: one may register,
    # the others must be told the index moved on (each a job Nomad's client would otherwise believe it ran
    # on top of the version it planned against, while another replaced it meanwhile).
    def job(tag: str) -> dict[str, Any]:
        return {"ID": "raced", "Name": "raced", "Type": "batch", "Meta": {f"k{i}": tag for i in range(3000)},
                "TaskGroups": [{"Name": "g", "Count": 1, "Tasks": [{
                    "Name": "t", "Driver": "raw_exec", "Config": {"command": "/bin/true"}}]}]}

    with agent.nomad_http() as http:
        first = http.put("/v1/jobs", json={"Job": job("first")})
        assert first.status_code == 200, first.text
        index = first.json()["JobModifyIndex"]

        def run(tag: str) -> httpx.Response:
            with agent.nomad_http() as own:
                return own.put("/v1/jobs", json={"Job": job(tag), "EnforceIndex": True, "JobModifyIndex": index})

        try:
            with ThreadPoolExecutor(3) as pool:
                answers = list(pool.map(run, ["a", "b", "c"]))
            codes = sorted(answer.status_code for answer in answers)
            assert codes == [200, 409, 409], [(a.status_code, a.text) for a in answers]
            assert all("Enforcing job modify index" in a.text for a in answers if a.status_code == 409)
        finally:
            http.delete("/v1/job/raced", params={"purge": "true"})


@pytest.mark.parametrize("path", ["t/local/plain\0", "t/local\0/plain", "t/\0"])
def test_a_nul_in_a_path_is_refused_not_an_error(agent: NomadAgent, alloc: dict[str, Any], path: str) -> None:
    for route, params in [("ls", {}), ("stat", {}), ("cat", {}), ("readat", {"offset": 0}),
                          ("stream", {"follow": "false"})]:
        answer = get(agent, route, alloc["id"], path=path, **params)
        assert answer.status_code == 400 and "NUL" in answer.text, (route, answer.status_code, answer.text)


def test_an_ineligible_agent_places_no_replacement(agent: NomadAgent) -> None:
    job = {"ID": "kept-out", "Name": "kept-out", "Type": "service", "TaskGroups": [{"Name": "g", "Count": 1, "Tasks": [{
        "Name": "t", "Driver": "raw_exec", "Config": {"command": "/bin/sleep", "args": ["3600"]}}]}]}
    with agent.nomad_http() as http:
        assert http.put("/v1/jobs", json={"Job": job}).status_code == 200
        [node] = http.get("/v1/nodes").json()
        [alloc] = http.get("/v1/job/kept-out/allocations").json()
        closed = http.put(f"/v1/node/{node['ID']}/eligibility", json={"Eligibility": "ineligible"})
        assert closed.status_code == 200, closed.text
        try:
            assert http.put("/v1/jobs", json={"Job": job | {"Meta": {"v": "2"}}}).status_code == 409
            stopped = http.put(f"/v1/allocation/{alloc['ID']}/stop")
            assert stopped.status_code == 200, stopped.text
            evaluation = http.get(f"/v1/evaluation/{stopped.json()['EvalID']}/allocations").json()
            placed = [a["ID"] for a in http.get("/v1/job/kept-out/allocations").json() if a["ID"] != alloc["ID"]]
            assert placed == [], f"an ineligible agent placed {placed} (evaluation: {evaluation})"
        finally:
            http.put(f"/v1/node/{node['ID']}/eligibility", json={"Eligibility": "eligible"})
            http.delete("/v1/job/kept-out", params={"purge": "true"})


GROUPS, META = 3_000, 60_000
"""A job of 1.3 MB: three thousand groups of one task, a job meta of 60,000 entries, planned with one group
changed. The meta merged for each task of each group made the plan take minutes of CPU here; the job's
meta worked out once, seconds (reading the job twice, the new and the registered one)."""


def test_plan_of_many_groups_and_a_long_meta_is_linear(agent: NomadAgent) -> None:
    def job(tag: str) -> dict[str, Any]:
        groups = [{"Name": f"g{i}", "Count": 1 if i == 0 else 0, "Tasks": [{
            "Name": "t", "Driver": "raw_exec",
            "Config": {"command": "/bin/sleep", "args": [tag if i == 0 else "3600"]}}]} for i in range(GROUPS)]
        return {"ID": "tall", "Name": "tall", "Type": "service", "Meta": {f"k{i}": "v" for i in range(META)},
                "TaskGroups": groups}

    with agent.nomad_http() as http:
        http.timeout = httpx.Timeout(TIMEOUT)
        registered = http.put("/v1/jobs", json={"Job": job("3600")})
        assert registered.status_code == 200, registered.text
        try:
            planned = http.put("/v1/job/tall/plan", json={"Job": job("3601"), "Diff": True})
            assert planned.status_code == 200, planned.text
            updates = planned.json()["Annotations"]["DesiredTGUpdates"]
            assert len(updates) == GROUPS
        finally:
            http.delete("/v1/job/tall", params={"purge": "true"})
