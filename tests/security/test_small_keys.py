"""A job's author (and the operator's data dir) against the smaller keys of a job: ``max_run_duration``,
``identity`` and the key that signs workload identities (SPEC §14).

A group's ``max_run_duration`` is a deadline on the one timer thread every allocation of the agent shares
(restart delays, kill timeouts, replacements, deadlines): a duration of a million years must not stop it
for everybody else. A job of many ``identity`` blocks must not make the agent sign for many seconds at each
start of its task. A key file the agent cannot use is refused with a clear error, never a traceback.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from herder.client.alloc_runner import MAX_RUN_DURATION_EXCEEDED
from herder.client.signing import KEY_FILE, IdentitySigner, SigningKeyError
from herder.errors import JobError
from herder.jobspec import load_job_text
from herder.jobspec.group_keys import MAX_IDENTITIES
from tests.support.agent import AgentProcess

TIMED = """
job "%(name)s" {
  type = "batch"
  group "g" {
    max_run_duration = "%(limit)s"
    task "t" {
      driver = "raw_exec"
      config {
        command = "sleep"
        args    = ["300"]
      }
    }
  }
}
"""


@pytest.fixture
def own_agent(tmp_path: Path) -> Iterator[AgentProcess]:
    """An agent of the test's own: the attack, until fixed, leaves its timer dead for good."""
    root = tmp_path / "agent"
    root.mkdir()
    process = AgentProcess(root)
    process.start()
    try:
        yield process
    finally:
        process.shutdown()


def test_a_deadline_of_a_million_years_stops_no_other_allocations_timer(own_agent: AgentProcess) -> None:
    far = own_agent.submit(TIMED % {"name": "far", "limit": "9999999999h"})["allocations"][0]["id"]
    own_agent.wait_event(far, "t", "Started")  # its deadline is armed before its tasks start
    near = own_agent.submit(TIMED % {"name": "near", "limit": "1s"})["allocations"][0]["id"]
    own_agent.wait_event(near, "t", "Killing")
    (killing,) = [e for e in own_agent.alloc(near)["tasks"]["t"]["events"] if e["type"] == "Killing"]
    assert killing["message"] == MAX_RUN_DURATION_EXCEEDED
    assert own_agent.alloc(far)["tasks"]["t"]["state"] == "running"


def _pem(key: rsa.RSAPrivateKey, encryption: serialization.KeySerializationEncryption) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


@pytest.mark.parametrize("case", ["encrypted", "short"])
def test_a_key_file_that_cannot_sign_is_refused_naming_why(data_dir: Path, case: str) -> None:
    """An operator's own key, kept under a passphrase, or one of 1,024 bits, which tokens would trust."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048 if case == "encrypted" else 1024)
    encryption = (serialization.BestAvailableEncryption(b"passphrase") if case == "encrypted"
                  else serialization.NoEncryption())
    (data_dir / KEY_FILE).write_bytes(_pem(key, encryption))
    (data_dir / KEY_FILE).chmod(0o600)
    with pytest.raises(SigningKeyError, match=f"{KEY_FILE}: holds no RSA private key of 2048 bits or more"):
        IdentitySigner(data_dir).jwks()


def test_a_task_of_thousands_of_identities_is_refused() -> None:
    """5,000 blocks in 170 kB (a job the reader takes has room for 16,000): each start of the task was a
    signature each, 5 s of the agent's CPU (18 s), and an environment no process can start with."""
    blocks = "".join(f'identity {{\n name = "i{index}"\n env = true\n }}\n' for index in range(5000))
    text = f'job "many" {{\n task "t" {{\n driver = "raw_exec"\n {blocks} config {{\n command = "true"\n }}\n }}\n}}\n'
    with pytest.raises(JobError, match=r"job\.groups\[0\]\.tasks\[0\]\.identity: 5000 identities, more than "
                                       rf"the {MAX_IDENTITIES} a task may have"):
        load_job_text(text, "hcl", "many.hcl")


FULL_DISK = """
import resource, sys
from pathlib import Path
from herder.client import signing

made = []
from cryptography.hazmat.primitives.asymmetric import rsa
generate = rsa.generate_private_key
rsa.generate_private_key = lambda **options: made.append(1) or generate(**options)
resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.RLIM_INFINITY))  # a PEM is 1.7 kB: as a full disk
signer = signing.IdentitySigner(Path(sys.argv[1]))
refused = 0
for _ in range(20):
    try:
        signer.jwks()
    except signing.SigningKeyError:
        refused += 1
print(len(made), refused)
"""


def test_a_key_that_cannot_be_written_is_not_made_again_for_each_request(data_dir: Path) -> None:
    """The key set is served without the token, to tasks, users and web pages alike: while the data dir
    takes no key (a disk a task filled), each request made a key (77 ms of CPU, a thread of the agent's
    held), and the first of them left a key cut short in its place for good."""
    ran = subprocess.run([sys.executable, "-c", FULL_DISK, str(data_dir)], capture_output=True, text=True,
                         timeout=120, check=True)
    assert ran.stdout.split() == ["1", "20"], ran.stderr
    assert not (data_dir / KEY_FILE).exists()
    assert IdentitySigner(data_dir).jwks()["keys"]  # once the disk has room, by another agent's start
