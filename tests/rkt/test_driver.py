"""The rkt driver's own behaviour with the real rkt and the fly stage1: what the conformance kit does not cover."""

from __future__ import annotations

import bz2
import gzip
import lzma
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from herder import DriverError, RecoverableError
from herder.errors import JobError
from herder.testing import DriverHarness
from herder.testing.harness import TaskRun
from herder.testing.plugin import HarnessFactory
from tests.support.waiting import wait_for

from .helpers import IMAGE_NAME, build_aci, listed_pods, mounts_under, rkt_for, sh

Harness = Callable[..., DriverHarness]
WAIT = 30.0


@pytest.fixture
def harness(driver_harness: HarnessFactory, rkt_plugin_config: dict[str, Any]) -> Harness:
    """A harness of the rkt driver on this worker's store; ``harness(**plugin_config)`` adds to its table."""
    return lambda **extra: driver_harness("rkt", {**rkt_plugin_config, **extra})


def finished(run: TaskRun) -> int:
    result = run.wait(WAIT)
    assert result is not None, f"the task did not exit: {run.output('stderr')!r}"
    return result.exit_code


def test_env_task_dirs_and_exit_code_reach_the_pod(harness: Harness, tmp_path: Path) -> None:
    run = harness().task(sh('echo "$GREETING $NOMAD_TASK_NAME" > /local/env.txt; '
                            'echo "$NOMAD_ALLOC_DIR $NOMAD_TASK_DIR $NOMAD_SECRETS_DIR" >> /local/env.txt; '
                            'cat /local/from-host; echo shared > /alloc/data/shared; exit 5'),
                         env={"GREETING": "hello from herder"})
    run.prestart()
    run.local_file("from-host").write_text("written on the host\n")
    run.start()
    assert finished(run) == 5
    assert run.local_file("env.txt").read_text() == "hello from herder task\n/alloc /local /secrets\n"
    assert b"written on the host" in run.output("stdout")
    assert (run.ctx.task_dir.alloc_dir / "data" / "shared").read_text() == "shared\n"
    run.cleanup()


def test_exec_runs_inside_the_pod(harness: Harness, rkt_store: Path) -> None:
    run = harness().task(sh("echo inside > /local/mark; exec sleep 3600"), kill_timeout="2s")
    run.start()
    wait_for(lambda: run.local_file("mark").is_file(), what="the task's mark")
    result = run.exec(["/bin/sh", "-c", "cat /local/mark; ls /; test -e /usr/bin || echo no-host-usr; "
                                        "echo $NOMAD_TASK_NAME; exit 4"], 10)
    assert result.exit_code == 4, result
    # the image's root filesystem with the task dirs, and the task's environment (the app's, not herder's)
    assert result.output.split() == [b"inside", b"alloc", b"bin", b"dev", b"etc", b"local", b"proc", b"secrets",
                                     b"sys", b"tmp", b"no-host-usr", b"task"]
    assert run.handle is not None
    pod = rkt_for(rkt_store).status(run.handle.id)
    assert pod is not None and pod.running
    run.kill()
    assert run.wait(WAIT) is not None
    run.cleanup()


def test_exec_is_refused_in_a_task_of_another_user(harness: Harness) -> None:
    """``rkt enter`` runs commands as root: in a task of ``user`` they would not run as its user,
    interactive or not."""
    run = harness().task(sh("echo up; exec sleep 3600"), kill_timeout="2s", user="65534")
    run.start()
    wait_for(lambda: b"up" in run.output(), what="the task up")  # as 65534 it cannot write the root-owned /local
    with pytest.raises(DriverError, match="exec refused: the task runs as user '65534'"):
        run.exec(["/bin/sh", "-c", "id -u"], 10)
    with pytest.raises(DriverError, match="exec refused: the task runs as user '65534'"):
        run.exec_session(["/bin/sh"], tty=True).close()
    run.kill()
    assert run.wait(WAIT) is not None
    run.cleanup()


def test_stop_and_cleanup_leave_no_pod_and_no_mount(harness: Harness, rkt_store: Path, tmp_path: Path) -> None:
    run = harness().task(sh("sleep 3600 & sleep 3600"), kill_timeout="1s")
    run.start()
    assert run.handle is not None
    uuid = run.handle.id
    rkt = rkt_for(rkt_store)
    wait_for(lambda: any(uuid in mount and mount.endswith("/local") for mount in mounts_under(rkt_store)),
             what=lambda: f"the task's local dir mounted in pod {uuid}: {mounts_under(rkt_store)}")
    run.kill()
    assert run.wait(WAIT) is not None
    pod = rkt.status(uuid)
    assert pod is not None and not pod.running, pod
    run.cleanup()
    run.cleanup()  # again: nothing left to do
    assert rkt.status(uuid) is None
    assert listed_pods(rkt) == []
    assert mounts_under(rkt_store) == []


def test_dns_net_and_debug_reach_rkt(harness: Harness) -> None:
    run = harness().task(sh("cat /etc/resolv.conf", dns_servers=["192.0.2.53"], dns_search_domains=["example.test"],
                            net=["host"], debug=True))
    run.start()
    assert finished(run) == 0
    resolv = run.output("stdout").decode()
    assert "nameserver 192.0.2.53" in resolv and "search example.test" in resolv, resolv
    stderr = run.output("stderr")
    assert b"stage0: Preparing stage1" in stderr and b"--net=host" in stderr, stderr  # --debug, and the net
    run.cleanup()


def test_a_pod_killed_as_soon_as_it_started_is_removed(harness: Harness, rkt_store: Path) -> None:
    """rkt writes the UUID file while it still prepares the pod: a kill then aborts the prepare, and the
    pod (``aborted prepare``, which ``rkt status --format=json`` cannot print) must still be removed."""
    for _ in range(3):
        run = harness().task(sh("sleep 3600"), kill_timeout="1s")
        run.start()
        run.kill()
        assert run.wait(WAIT) is not None
        run.cleanup()
        assert listed_pods(rkt_for(rkt_store)) == []
        assert mounts_under(rkt_store) == []


def test_an_image_file_of_the_task_dir_is_fetched_and_removed_by_the_last_task_using_it(
        harness: Harness, rkt_store: Path, tmp_path: Path) -> None:
    driver = harness()
    image = build_aci(tmp_path / "own.aci", version="2.0.0")
    runs = [driver.task(sh("echo ran", image="local/own.aci")) for _ in range(2)]
    for run in runs:
        run.ctx.task_dir.local_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(image, run.local_file("own.aci"))
        run.start()
        assert finished(run) == 0
    rkt = rkt_for(rkt_store)
    ours = [i for i in rkt.images() if i.name == f"{IMAGE_NAME}:2.0.0"]
    assert len(ours) == 1
    assert any(e.message == "Downloading image local/own.aci" for e in runs[0].events)
    assert not any(e.message.startswith("Downloading image") for e in runs[1].events), "fetched twice"
    runs[0].cleanup()
    assert [i.id for i in rkt.images() if i.name == f"{IMAGE_NAME}:2.0.0"] == [ours[0].id], \
        "the image was removed while another task uses it"
    runs[1].cleanup()
    assert [i for i in rkt.images() if i.name == f"{IMAGE_NAME}:2.0.0"] == []
    assert [i for i in rkt.images() if i.name == f"{IMAGE_NAME}:1.0.0"], "an image herder did not fetch was removed"


@pytest.mark.parametrize("compress", [None, gzip.compress, bz2.compress, lzma.compress])
def test_the_id_of_an_image_file_is_rkts(rkt_plugin_config: dict[str, Any], rkt_store: Path, tmp_path: Path,
                                         compress: Callable[[bytes], bytes] | None) -> None:
    """The driver finds an image file in the store without fetching it: by the id rkt gives it."""
    from herder_rkt.driver import aci_id  # installed: rkt_plugin_config made sure

    plain = build_aci(tmp_path / "plain.aci", version="3.0.0")
    image = plain if compress is None else tmp_path / "packed.aci"
    if compress is not None:
        image.write_bytes(compress(plain.read_bytes()))
    rkt = rkt_for(rkt_store)
    short = rkt.fetch(str(image), insecure=["image"])
    full = aci_id(image)
    assert full.startswith(short) and full in {i.id for i in rkt.images()}
    rkt.image_rm(full)


def test_an_image_path_outside_the_task_dir_is_refused(harness: Harness) -> None:
    run = harness().task(sh("true", image="../../../../busybox.aci"))
    with pytest.raises(DriverError, match=r"config\.image: path .* escapes the task directory"):
        run.prestart()


def test_a_missing_image_is_a_clear_error(harness: Harness) -> None:
    run = harness().task(sh("true", image="example.local/nothere:1.0"))
    with pytest.raises(DriverError, match=r"rkt fetch failed \(exit code 254\): fetch: discovery failed"):
        run.prestart()


def test_trust_prefix_runs_rkt_trust_first(harness: Harness) -> None:
    run = harness().task(sh("true", trust_prefix="example.local/busybox"))
    with pytest.raises(DriverError, match=r"rkt trust failed \(exit code 254\): trust: .*discovery failed"):
        run.prestart()
    assert any(e.message == "Trusting the signing key of example.local/busybox" for e in run.events)


def test_volumes_need_volumes_enabled(harness: Harness, tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "file").write_text("from a host volume\n")
    config = sh("cat /mnt/host/file; echo written > /mnt/host/back", volumes=[f"{host}:/mnt/host"])
    refused = harness().task(config)
    with pytest.raises(DriverError, match=r"config\.volumes: volumes are not allowed"):
        refused.prestart()
    run = harness(volumes_enabled=True).task(config)
    run.start()
    assert finished(run) == 0
    assert b"from a host volume" in run.output("stdout")
    assert (host / "back").read_text() == "written\n"
    run.cleanup()


def test_port_map_under_an_isolating_stage1_needs_every_label(harness: Harness) -> None:
    """Without fly (a stage1 by name that is not fly), every port needs a port_map entry: the error
    names the label; checked before rkt runs anything."""
    driver = harness(stage1_path="", stage1_name="coreos.com/rkt/stage1-coreos:1.30.0")
    ports = {"network": {"ports": [{"label": "http"}, {"label": "admin"}]}}
    missing = driver.task(sh("true", port_map={"http": "http"}), resources=ports)
    with pytest.raises(DriverError, match=r"config\.port_map: port 'admin' has no entry"):
        missing.prestart()
    unknown = driver.task(sh("true", port_map={"http": "http", "admin": "a", "metrics": "m"}), resources=ports)
    with pytest.raises(DriverError, match=r"config\.port_map\.metrics: the task has no port labelled 'metrics'"):
        unknown.prestart()
    not_in_image = driver.task(sh("true", port_map={"http": "http", "admin": "admin"}), resources=ports)
    with pytest.raises(DriverError, match=r"config\.port_map\.admin: image .* has no port named 'admin' "
                                          r"\(its ports: http\)"):
        not_in_image.prestart()
    mapped = driver.task(sh("true", port_map={"http": "http"}), resources={"network": {"ports": [{"label": "http"}]}})
    mapped.prestart()
    [port] = mapped.ctx.ports
    assert (mapped.ctx.env["NOMAD_PORT_http"], mapped.ctx.env["NOMAD_HOST_PORT_http"]) == ("8080", str(port.value))


def test_under_fly_ports_are_the_hosts(harness: Harness) -> None:
    run = harness().task(sh("echo $NOMAD_PORT_http", port_map={"http": "http"}),
                         resources={"network": {"ports": [{"label": "http"}]}})
    run.start()
    assert finished(run) == 0
    [port] = run.ctx.ports
    assert run.output("stdout").strip() == str(port.value).encode()
    assert any("port_map is not used" in e.message for e in run.events)
    run.cleanup()


def test_a_pod_without_its_uuid_in_time_is_killed_and_the_start_recoverable(harness: Harness,
                                                                             rkt_store: Path) -> None:
    run = harness(start_timeout="1ms").task(sh("echo never"))
    with pytest.raises(RecoverableError, match=r"did not start the pod within 0\.001s"):
        run.start()
    run.cleanup()
    assert listed_pods(rkt_for(rkt_store)) == []
    assert mounts_under(rkt_store) == []


def test_a_command_missing_from_the_image_fails_the_task(harness: Harness) -> None:
    run = harness().task({"image": f"{IMAGE_NAME}:1.0.0", "command": "/bin/nonexistent",
                          "insecure_options": ["image"]})
    run.start()
    assert finished(run) != 0
    run.cleanup()


def test_the_invalid_config_is_refused_before_prestart(harness: Harness) -> None:
    run = harness().task({"image": "x", "port_map": {"http": 80}})
    with pytest.raises(JobError, match=r"config\.port_map\.http"):
        run.prestart()


def test_fingerprint_of_an_old_or_unusable_rkt(harness: Harness, tmp_path: Path) -> None:
    """A double for what the real rkt 1.30 cannot show: an older version. It prints what ``rkt version``
    of rkt 0.16 printed."""
    old = tmp_path / "rkt-old"
    old.write_text("#!/bin/sh\nprintf 'rkt Version: 0.16.0\\nappc Version: 0.7.4\\n'\n")
    old.chmod(old.stat().st_mode | stat.S_IXUSR)
    fingerprint = harness(rkt=str(old)).fingerprint
    assert (fingerprint.detected, fingerprint.healthy) == (True, False)
    assert "rkt 0.16.0 is too old" in fingerprint.description
    assert fingerprint.attributes == {"driver.rkt.version": "0.16.0", "driver.rkt.appc.version": "0.7.4"}
    missing_stage1 = harness(stage1_path=str(tmp_path / "none.aci")).fingerprint
    assert not missing_stage1.healthy and "is not a file" in missing_stage1.description


def test_fingerprint_has_both_versions(harness: Harness) -> None:
    fingerprint = harness().fingerprint
    assert (fingerprint.detected, fingerprint.healthy) == (True, True)
    assert fingerprint.attributes["driver.rkt.version"] == "1.30.0"
    assert fingerprint.attributes["driver.rkt.appc.version"] == "0.8.11"




def test_rkt_run_failing_before_the_pod_exists_is_a_driver_error_with_rkts_message(harness: Harness,
                                                                                   tmp_path: Path) -> None:
    stage1 = tmp_path / "not-a-stage1.aci"
    stage1.write_text("not an image\n")
    run = harness(stage1_path=str(stage1)).task(sh("true"))
    with pytest.raises(DriverError, match=r"rkt run ended \(exit code 254\) without starting a pod: run: .*"):
        run.start()


def test_a_pod_whose_app_cannot_start_exits_254_with_rkts_message(harness: Harness) -> None:
    """rkt writes the UUID before it resolves the app's user: the pod exists, and exits as rkt does."""
    run = harness().task(sh("true"), user="nosuchuser")
    run.start()
    assert finished(run) == 254
    assert b'run: failed to lookup process credentials: "nosuchuser" user not found' in run.output("stderr")
    run.cleanup()
