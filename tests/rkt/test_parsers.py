"""The rkt driver's parsers and error handling over every recorded output of the real rkt 1.30 in
``../shared/fixtures/rkt/`` (the fly stage1 cannot produce some of them on demand: orphans holding a pod,
``status --wait`` timeouts, a launcher's process group killed by ``stop --force``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from herder.sdk import exit_result
from tests.support.require import require

try:
    from herder_rkt import cli
except ImportError:
    cli = None  # type: ignore[assignment]



def _fixtures() -> Path:
    """``../shared/fixtures/rkt`` beside the checkout, else beside the peers folder the rkt on PATH is in."""
    beside_checkout = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "rkt"
    binary = shutil.which("rkt")
    if beside_checkout.is_dir() or binary is None:
        return beside_checkout
    return Path(binary).resolve().parents[1] / "fixtures" / "rkt"


FIXTURES = _fixtures()
RECORDS = sorted(FIXTURES.glob("[0-9]*.json")) if FIXTURES.is_dir() else []


@pytest.fixture(autouse=True)
def _installed() -> None:
    require("rkt", cli is not None, "herder-rkt is not installed")
    require("rkt", len(RECORDS) == 73, f"the 73 rkt fixtures are not in {FIXTURES}")


def record(name: str) -> dict[str, Any]:
    [path] = FIXTURES.glob(f"{name}-*.json")
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def command(rec: dict[str, Any]) -> list[str]:
    """The argv after rkt's global options."""
    return [arg for arg in rec["argv"][1:] if not arg.startswith(("--dir=", "--local-config=", "--system-config="))]


def failure(rec: dict[str, Any]) -> cli.RktError:
    return cli.RktError(command(rec)[0], rec["exit_code"], rec["stderr"] or rec["stdout"])


@pytest.mark.parametrize("path", RECORDS, ids=[p.stem for p in RECORDS])
def test_every_fixture_is_understood(path: Path) -> None:
    """Each recording goes through the parser (or the error handling) the driver uses for its command."""
    rec = json.loads(path.read_text())
    if not rec.get("argv"):  # 70: an observation, not a command
        assert rec["launcher_returncode_after_stop_force"] == -9
        assert rec["pod_dir_files"]["pgid"].strip() == str(rec["launcher_sh_pid"])
        return
    args = command(rec)
    verb = " ".join(args[:2]) if args[0] == "image" else args[0]
    if rec["exit_code"] == cli.ERROR_EXIT:
        error = failure(rec)
        assert str(error).startswith(f"rkt {args[0]} failed (exit code 254): {verb.split()[-1]}: ")
        return
    out = rec["stdout"]
    if verb == "version":
        assert cli.parse_version(out).rkt == "1.30.0"
    elif verb == "list" and "--format=json" in args:
        assert all(cli.UUID.match(pod.uuid) for pod in cli.parse_pods(out))
    elif verb == "list" and "--no-legend" in args:
        assert all(len(row) == 8 and row[4] in ("running", "exited") for row in cli.parse_table(out))
    elif verb == "list":
        assert cli.parse_table(out, aligned=True)[0] == ["UUID", "APP", "IMAGE NAME", "STATE", "CREATED", "STARTED",
                                                         "NETWORKS"]
    elif verb == "image list" and "--format=json" in args:
        assert all(image.id.startswith("sha512-") and len(image.id) == 7 + 64 for image in cli.parse_images(out))
    elif verb == "image list":
        rows = cli.parse_table(out, aligned=True)
        assert rows[0] == ["ID", "NAME", "SIZE", "IMPORT TIME", "LAST USED"]
        assert all(len(row) == 5 for row in rows), rows
    elif verb == "status" and "--format=json" in args:
        pod = cli.parse_pod(out)
        assert pod.state in ("running", "exited") and pod.uuid.startswith(args[-1])
    elif verb == "status":
        assert cli.parse_status_text(out)["exited"] in ("true", "false")
    elif verb == "fetch":
        assert cli.parse_fetched_id(out).startswith("sha512-")
    elif verb in ("stop", "rm"):
        assert cli.parse_quoted(out) == [args[-1]] or "is already stopped" in out
    elif verb in ("gc", "image rm"):
        assert all(cli.UUID.match(u) or u.startswith("sha512-") for u in cli.parse_quoted(out))
    elif verb in ("run", "enter"):
        # the app's exit status is rkt's: the only place it appears (status never has it)
        result = exit_result(rec["exit_code"])
        assert result.exit_code == (rec["exit_code"] if rec["exit_code"] >= 0 else 128 - rec["exit_code"])
    else:
        pytest.fail(f"no parser covers {verb!r}")


def test_version() -> None:
    version = cli.parse_version(record("01")["stdout"])
    assert (version.rkt, version.appc, version.rkt_tuple) == ("1.30.0", "0.8.11", (1, 30, 0))
    assert version.other["Features"] == "-TPM +SDJOURNAL"
    assert cli.version_tuple("1.2.3+git4") == (1, 2, 3)
    with pytest.raises(ValueError):
        cli.parse_version("")


def test_the_text_listing_keeps_empty_cells() -> None:
    """Seen live, not in the fixtures: a pod whose prepare was aborted (its rkt run killed early) has no
    image; ``list --format=json`` leaves it out (printing ``null`` and the error on stderr)."""
    [row] = cli.parse_table("4b6fb9d3-c2fe-42cd-ae8b-aca83ce0b4e1\t-\t-\t\taborted prepare\t\t\t\n")
    assert row[:5] == ["4b6fb9d3-c2fe-42cd-ae8b-aca83ce0b4e1", "-", "-", "", "aborted prepare"]


def test_empty_listings_are_null_or_a_newline() -> None:
    assert cli.parse_pods(record("02")["stdout"]) == []
    assert cli.parse_table(record("03")["stdout"]) == []
    assert cli.parse_images(record("04")["stdout"]) == []


def test_pod_json_times_and_image_ids() -> None:
    [pod] = cli.parse_pods(record("09")["stdout"])
    assert pod.uuid == "87818b0b-51fd-4552-8001-7657d73d1ee2" and pod.running
    assert pod.created_at == 1795961753  # seconds
    [app] = pod.apps
    assert app.started_at == 1795961753154696357  # nanoseconds
    assert pod.image_ids == {"sha512-7096f6fe1c180d20c516596b16dff58db587c7f6c911feb6fd38decca15115b2"}
    assert cli.parse_pod(record("14")["stdout"]) == pod  # a UUID prefix resolves to the same pod


def test_status_never_tells_the_exit_code() -> None:
    exited_0, exited_3 = cli.parse_pod(record("21")["stdout"]), cli.parse_pod(record("22")["stdout"])
    assert exited_0.state == exited_3.state == "exited"
    assert cli.parse_status_text(record("23")["stdout"]) == {
        "state": "exited", "created": "2026-11-29 14:15:55.988 +0000 UTC",
        "started": "2026-11-29 14:15:56.005 +0000 UTC", "networks": "", "pid": "27238", "exited": "true"}
    assert record("20")["exit_code"] == 3  # only rkt run's own exit status says it


def test_orphans_keep_a_stopped_pod_running() -> None:
    assert cli.parse_pod(record("61")["stdout"]).running
    assert cli.parse_status_text(record("62")["stdout"])["exited"] == "false"
    assert not cli.parse_pod(record("66")["stdout"]).running


def test_fetch_prints_a_short_id() -> None:
    short = cli.parse_fetched_id(record("05")["stdout"])
    assert short == "sha512-7096f6fe1c180d20c516596b16dff58d"
    full = [image.id for image in cli.parse_images(record("43")["stdout"]) if image.id.startswith(short)]
    assert full == ["sha512-7096f6fe1c180d20c516596b16dff58db587c7f6c911feb6fd38decca15115b2"]
    with pytest.raises(ValueError):
        cli.parse_fetched_id("")


@pytest.mark.parametrize(("name", "no_such_pod", "pod_running", "pod_not_running"), [
    ("38", True, False, False), ("41", True, False, False), ("53", True, False, False), ("54", True, False, False),
    ("30", False, True, False), ("25", False, False, True), ("15", False, False, False),
    ("55", False, False, False), ("56", False, False, False), ("07", False, False, False),
    ("18", False, False, False),
])
def test_errors_are_classified(name: str, no_such_pod: bool, pod_running: bool, pod_not_running: bool) -> None:
    error = failure(record(name))
    assert (error.no_such_pod, error.pod_running, error.pod_not_running) == (no_such_pod, pod_running,
                                                                             pod_not_running), error


def test_stop_of_a_pod_whose_app_has_not_started_is_nothing_to_do() -> None:
    """Seen live, not in the fixtures: ``rkt stop`` right after the UUID file appeared."""
    error = cli.RktError("stop", 254, 'stop: pod "f5e79fe7-c368-4dce-8b48-5d6a6b758727" is not running\n'
                                      "stop: failed to stop 1 pod(s)\n")
    assert error.pod_not_running and not error.no_such_pod


def test_error_messages_keep_what_rkt_said() -> None:
    assert str(failure(record("30"))) == (
        'rkt rm failed (exit code 254): rm: pod "1c7ec2c9-7b8f-4cce-a1c5-b1346c10510e" is currently running; '
        "rm: failed to remove one or more pods")
    assert "fetch: open /var/lib/rkt-fixture/images/busybox-alt.aci.asc" in str(failure(record("07")))


def test_stop_and_rm_outputs() -> None:
    assert cli.parse_quoted(record("31")["stdout"]) == ["87818b0b-51fd-4552-8001-7657d73d1ee2"]
    assert cli.parse_quoted(record("34")["stdout"]) == ["87818b0b-51fd-4552-8001-7657d73d1ee2"]
    assert "is already stopped" in record("34")["stdout"]  # exit 0: stop() returns False on it
    assert cli.parse_quoted(record("40")["stdout"]) == ["5142f301-f33c-4962-9451-4c37d5f38346"]
    assert len(cli.parse_quoted(record("49")["stdout"])) == 4
    assert cli.parse_quoted(record("52")["stdout"]) == []


def test_image_rm_of_an_unknown_image_exits_0_and_removes_nothing() -> None:
    assert record("48")["exit_code"] == 0 and cli.parse_quoted(record("48")["stdout"]) == []
    removed = "sha512-cb78e950eb72d0e1b7e4f51789cf7f1fb61a21fe8c3fd516c71b2ecccd9263c9"
    assert cli.parse_quoted(record("45")["stdout"]) == [removed]


def test_run_exit_statuses_are_the_apps() -> None:
    assert exit_result(record("19")["exit_code"]).exit_code == 0
    assert exit_result(record("27")["exit_code"]).exit_code == 3
    stopped = exit_result(record("32")["exit_code"])
    assert (stopped.exit_code, stopped.signal) == (143, 15)
    forced = exit_result(record("36")["exit_code"])
    assert (forced.exit_code, forced.signal) == (137, 9)


def test_fly_records_the_run_process_group_for_the_pod() -> None:
    """Why the supervisor's process group is the pod's: ``rkt run`` in a session of its own makes the pgid
    fly records its own pid, so a forced stop kills exactly the pod's processes."""
    run = record("60")
    assert run["pod_dir_files"]["pgid"].strip() == run["pod_dir_files"]["pid"].strip() == str(run["rkt_run_pid"])
