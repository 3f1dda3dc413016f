"""``nomad alloc fs`` reads an allocation's directory, which its tasks write: every name in it is hostile.

The agent reads as root. A task of user ``nobody`` plants what would make root read for it a file
it cannot read itself (a root-only canary): a link to it, a link to ``/etc`` on the way, a FIFO
that would hold the reader for ever, a 2 GiB sparse file for a read with a limit of an exabyte; the
test, as root, plays the task where the kernel would have let it: a hard link to the canary (which
``fs.protected_hardlinks`` forbids ``nobody``), and a name swapped between a file and a link to the
canary while it is read. Paths out of the allocation (``..``, absolute ones) and herder's own files
in the allocation directory are asked for too. Each read must be refused cleanly, leak nothing, and
leave the agent answering; what a task may see (its ``local``, a link as a link) is still shown.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.core.nomad_api.conftest import NomadAgent, require_nomad
from tests.support.processes import wait_until_gone
from tests.support.waiting import TIMEOUT, wait_for

JOB = """
job "hostile" {{
  group "g" {{
    task "t" {{
      driver = "raw_exec"
      user   = "nobody"
      config {{
        command = "/bin/sh"
        args    = ["-c", <<EOF
ln -s {canary} local/link
ln -s /etc local/etc
mkfifo local/fifo
truncate -s 2G local/big
echo harmless > local/plain
echo secret-of-the-task > secrets/token
cat {canary} > local/stolen 2>&1
echo ready > local/ready
exec sleep 3600
EOF
        ]
      }}
    }}
  }}
}}
"""


@pytest.fixture(scope="module")
def agent() -> Iterator[NomadAgent]:
    require_nomad()
    root = Path(tempfile.mkdtemp(prefix="herder-alloc-fs-"))
    root.chmod(0o711)  # pytest's temporary directories are 0700: nobody could reach its task dir at all
    process = NomadAgent(root)
    process.start()
    try:
        yield process
    finally:
        process.shutdown()
        assert not wait_until_gone(root), "processes left behind"
        shutil.rmtree(root)


@pytest.fixture(scope="module")
def canary(agent: NomadAgent) -> str:
    """A root-only file's content, which no read through the API may show."""
    content = f"canary-{secrets.token_hex(8)}"
    path = agent.root / "canary"
    path.write_text(content)
    path.chmod(0o600)
    return content


@pytest.fixture(scope="module")
def alloc(agent: NomadAgent, canary: str) -> dict[str, Any]:
    with agent.http() as http:
        submitted = http.post("/v1/jobs", json={"text": JOB.format(canary=agent.root / "canary"), "format": "hcl"})
    assert submitted.status_code == 200, submitted.text
    [found] = submitted.json()["allocations"]
    local = agent.data_dir / "allocs" / found["id"] / "t" / "local"
    wait_for(lambda: (local / "ready").exists(), what="the task's plants")
    assert canary not in (local / "stolen").read_text()  # nobody cannot read it itself
    return {"id": found["id"], "local": local}


def get(agent: NomadAgent, route: str, alloc_id: str, **params: Any) -> httpx.Response:
    with agent.nomad_http() as http:
        http.timeout = httpx.Timeout(TIMEOUT)  # a FIFO read that blocks fails the test, never hangs it
        return http.get(f"/v1/client/fs/{route}/{alloc_id}", params=params)


RACE_READS = 400
"""Reads of a name swapped between a file and a link: an ``lstat`` then an open by path gave the canary
away here at the 22nd and the 65th read of two runs in three; an open through a descriptor never does."""

READS = [("cat", {}), ("readat", {"offset": 0, "limit": 100}), ("stream", {"follow": "false"})]


def assert_refused(agent: NomadAgent, alloc_id: str, path: str, canary: str, reason: str) -> None:
    for route, params in READS:
        answer = get(agent, route, alloc_id, path=path, **params)
        assert answer.status_code == 400 and reason in answer.text, (route, answer.status_code, answer.text)
        assert canary not in answer.text


def test_a_link_is_listed_as_a_link_and_never_followed(agent: NomadAgent, alloc: dict[str, Any],
                                                       canary: str) -> None:
    listed = {f["Name"]: f for f in get(agent, "ls", alloc["id"], path="t/local").json()}
    assert listed["link"]["FileMode"].startswith("L") and not listed["link"]["IsDir"]
    assert get(agent, "stat", alloc["id"], path="t/local/link").json()["FileMode"].startswith("L")
    assert_refused(agent, alloc["id"], "t/local/link", canary, "a link; not read")
    shown = agent.nomad("alloc", "fs", alloc["id"], "t/local/link")
    assert shown.returncode == 1 and canary not in shown.stdout + shown.stderr, shown

    # A link on the way to a name: not followed either, for a listing as for a read.
    assert_refused(agent, alloc["id"], "t/local/etc/shadow", canary, "a link")
    for route in ("ls", "stat"):
        answer = get(agent, route, alloc["id"], path="t/local/etc/shadow" if route == "stat" else "t/local/etc")
        assert answer.status_code == 400 and "a link" in answer.text, answer.text


def test_a_fifo_is_refused_without_waiting_on_it(agent: NomadAgent, alloc: dict[str, Any], canary: str) -> None:
    assert get(agent, "stat", alloc["id"], path="t/local/fifo").json()["FileMode"].startswith("p")
    assert_refused(agent, alloc["id"], "t/local/fifo", canary, "not a regular file")


def test_a_hard_link_to_a_root_only_file_is_not_read(agent: NomadAgent, alloc: dict[str, Any],
                                                     canary: str) -> None:
    os.link(agent.root / "canary", alloc["local"] / "hard")  # as a task may where protected_hardlinks is off
    assert_refused(agent, alloc["id"], "t/local/hard", canary, "a hard link")
    assert canary not in get(agent, "stat", alloc["id"], path="t/local/hard").text  # not even sniffed


def test_a_link_swapped_in_while_reading_is_never_followed(agent: NomadAgent, alloc: dict[str, Any],
                                                           canary: str) -> None:
    local = alloc["local"]
    (local / "race").write_text("harmless\n")
    # The name is a file, then a link to the canary, then a file again, as fast as a process of its own can.
    swapper = subprocess.Popen([sys.executable, "-c", SWAP, str(local), str(agent.root / "canary")])
    seen: list[int] = []
    try:
        with agent.nomad_http() as http:
            def enough() -> bool:
                answer = http.get(f"/v1/client/fs/cat/{alloc['id']}", params={"path": "t/local/race"})
                assert canary not in answer.text, f"given away at read {len(seen) + 1}"
                assert (answer.status_code, answer.text) == (200, "harmless\n") or answer.status_code == 400
                seen.append(answer.status_code)
                return len(seen) >= RACE_READS and set(seen) == {200, 400}

            wait_for(enough, what=lambda: f"{RACE_READS} reads, of both the file and the link (seen {set(seen)})",
                     interval=0)
    finally:
        swapper.kill()
        swapper.wait()


SWAP = """
import os, sys
local, canary = sys.argv[1:]
while True:
    with open(f"{local}/race.file", "w") as file:
        file.write("harmless\\n")
    os.replace(f"{local}/race.file", f"{local}/race")
    os.symlink(canary, f"{local}/race.link")
    os.replace(f"{local}/race.link", f"{local}/race")
"""


def test_a_huge_file_is_read_a_chunk_at_a_time(agent: NomadAgent, alloc: dict[str, Any]) -> None:
    assert agent.proc is not None
    before = peak_rss(agent.proc.pid)
    with agent.nomad_http() as http:
        for route, params in [("readat", {"offset": 0, "limit": 2**62}), ("cat", {}), ("stream", {})]:
            with http.stream("GET", f"/v1/client/fs/{route}/{alloc['id']}",
                             params={"path": "t/local/big", **params}) as answer:
                assert answer.status_code == 200
                read = 0
                for chunk in answer.iter_bytes():
                    read += len(chunk)
                    if read >= 8 << 20:
                        break
    assert peak_rss(agent.proc.pid) - before < 256 << 20, "the agent read the 2 GiB file into memory"
    past = get(agent, "readat", alloc["id"], path="t/local/big", offset=2**40, limit=10)
    assert (past.status_code, past.content) == (200, b"")
    assert get(agent, "ls", alloc["id"], path="t/local").status_code == 200  # the agent answers on


def peak_rss(pid: int) -> int:
    """The most memory the process ever held (``VmHWM``), in bytes."""
    line = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) << 10


@pytest.mark.parametrize(("path", "status"), [
    ("..", 400), ("../../canary", 400), ("t/../../../canary", 400), ("/../canary", 400),
    ("alloc/logs/../../../../canary", 400), ("/etc/passwd", 404), ("//etc/shadow", 404),
])
def test_paths_out_of_the_allocation_are_refused(agent: NomadAgent, alloc: dict[str, Any], canary: str,
                                                 path: str, status: int) -> None:
    for route, params in [*READS, ("stat", {}), ("ls", {})]:
        answer = get(agent, route, alloc["id"], path=path, **params)
        assert answer.status_code == status, (route, answer.text)
        assert canary not in answer.text and "root:" not in answer.text


def test_only_the_tasks_view_is_shown_and_secrets_are_not_read(agent: NomadAgent, alloc: dict[str, Any],
                                                              canary: str) -> None:
    # herder keeps its own files in the allocation directory (an artifact's staging, with a git key):
    # not the task's, not shown.
    staging = alloc["local"].parent.parent / ".herder-artifact-x"
    staging.mkdir(mode=0o700)
    (staging / "key").write_text(canary)
    assert [f["Name"] for f in get(agent, "ls", alloc["id"], path="/").json()] == ["alloc", "t"]
    assert get(agent, "cat", alloc["id"], path=".herder-artifact-x/key").status_code == 404

    assert "token" in [f["Name"] for f in get(agent, "ls", alloc["id"], path="t/secrets").json()]
    for route, params in READS:
        answer = get(agent, route, alloc["id"], path="t/secrets/token", **params)
        assert answer.status_code == 400 and "Reading secret file prohibited" in answer.text, answer.text
        assert "secret-of-the-task" not in answer.text
    assert get(agent, "cat", alloc["id"], path="t/local/plain").text == "harmless\n"
