"""The rkt command line, as the driver uses it, and parsers of what it prints.

What rkt 1.30 prints is recorded in the fixtures the tests read; the
parsers here follow those recordings:

- Every failure exits 254, with messages prefixed by the subcommand
  (``status: problem retrieving pod: no matches found for "..."``); a few
  exit 0 all the same (``stop`` of a pod that already stopped, ``image rm``
  of an unknown image).
- An empty JSON list prints ``null``.
- Pod-level times in JSON are seconds, app-level and image times nanoseconds.
- ``fetch`` prints the image id shortened to ``sha512-`` and 32 hex digits;
  ``image list`` and pod JSON give all 64.
- No ``status`` says how an app exited: its exit code is only the exit
  status of the ``rkt run`` process.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from herder import DriverError

COMMAND_TIMEOUT = 30.0
"""How long a short rkt command (status, stop, rm, fetch of a local file) may take."""

ERROR_EXIT = 254
"""rkt's exit code for any failure of its own."""

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_QUOTED = re.compile(r'"([^"]+)"')
_IMAGE_ID = re.compile(r"^sha512-[0-9a-f]{1,128}$")


class RktError(DriverError):
    """A rkt command failed: ``exit_code`` and what rkt said (stderr, else stdout)."""

    def __init__(self, command: str, exit_code: int, message: str) -> None:
        self.command, self.exit_code, self.message = command, exit_code, message
        lines = [line for line in message.splitlines() if line.strip()]
        super().__init__(f"rkt {command} failed (exit code {exit_code}): {'; '.join(lines) or 'no message'}")

    @property
    def no_such_pod(self) -> bool:
        """The pod (or image) does not exist: ``no matches found for "<uuid>"``."""
        return "no matches found" in self.message

    @property
    def pod_running(self) -> bool:
        """``rm`` of a pod that still runs."""
        return "is currently running" in self.message

    @property
    def pod_not_running(self) -> bool:
        """``stop`` of a pod not started yet (its UUID is written before its app starts), ``enter`` of one
        that exited."""
        return "is not running" in self.message or "isn't currently running" in self.message


@dataclass(frozen=True)
class App:
    """An app of a pod: ``name``, ``state``, the full ``image_id``; times in nanoseconds (0: not yet)."""

    name: str
    state: str
    image_id: str
    created_at: int = 0
    started_at: int = 0
    mounts: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Pod:
    """A pod as ``status --format=json`` / ``list --format=json`` give it; times in seconds (0: not yet)."""

    uuid: str
    state: str
    apps: tuple[App, ...] = ()
    created_at: int = 0
    started_at: int = 0

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def image_ids(self) -> frozenset[str]:
        return frozenset(app.image_id for app in self.apps)

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> Pod:
        apps = tuple(App(name=str(app["name"]), state=str(app.get("state", "")), image_id=str(app.get("image_id", "")),
                         created_at=int(app.get("created_at", 0)), started_at=int(app.get("started_at", 0)),
                         mounts=tuple(app.get("mounts") or ()))
                     for app in record.get("apps") or ())
        return cls(uuid=str(record["name"]), state=str(record["state"]), apps=apps,
                   created_at=int(record.get("created_at", 0)), started_at=int(record.get("started_at", 0)))


@dataclass(frozen=True)
class Image:
    """An image of rkt's store, as ``image list --format=json`` gives it."""

    id: str
    name: str
    size: int = 0
    import_time: int = 0
    last_used_time: int = 0


def image_ports(manifest: dict[str, Any]) -> dict[str, int]:
    """The ports an image's app declares: name -> port (``{"http": 8080}``)."""
    app = manifest.get("app") or {}
    return {str(port["name"]): int(port["port"]) for port in app.get("ports") or () if "name" in port}


@dataclass(frozen=True)
class Version:
    """``rkt version``: rkt's and the appc spec's versions, and the rest as printed."""

    rkt: str
    appc: str
    other: dict[str, str] = field(default_factory=dict)

    @property
    def rkt_tuple(self) -> tuple[int, ...]:
        return version_tuple(self.rkt)


# -- parsers ----------------------------------------------------------------------------------------


def parse_version(text: str) -> Version:
    """``rkt Version: 1.30.0\\nappc Version: 0.8.11\\n...``.

    :raises ValueError: no rkt version in it.
    """
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    rkt, appc = fields.pop("rkt Version", ""), fields.pop("appc Version", "")
    if not rkt:
        raise ValueError(f"no 'rkt Version' in {text!r}")
    return Version(rkt=rkt, appc=appc, other=fields)


def version_tuple(version: str) -> tuple[int, ...]:
    """``1.30.0+git`` -> ``(1, 30, 0)``: the leading numbers."""
    numbers: list[int] = []
    for part in version.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        numbers.append(int(digits.group()))
        if digits.end() != len(part):
            break
    return tuple(numbers)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON: {text[:200]!r}") from exc


def parse_pod(text: str) -> Pod:
    """``status --format=json``."""
    return Pod.from_json(_json(text))


def parse_pods(text: str) -> list[Pod]:
    """``list --format=json`` (``null`` when there is none)."""
    return [Pod.from_json(record) for record in _json(text) or ()]


def parse_images(text: str) -> list[Image]:
    """``image list --format=json`` (``null`` when the store is empty)."""
    return [Image(id=str(r["id"]), name=str(r["name"]), size=int(r.get("size", 0)),
                  import_time=int(r.get("import_time", 0)), last_used_time=int(r.get("last_used_time", 0)))
            for r in _json(text) or ()]


def parse_status_text(text: str) -> dict[str, str]:
    """``status`` without ``--format``: ``key=value`` lines (``state``, ``pid``, ``exited``, ...)."""
    return dict(line.partition("=")[::2] for line in text.splitlines() if "=" in line)


def parse_table(text: str, aligned: bool = False) -> list[list[str]]:
    """``list --full --no-legend`` and other tab-separated listings: the rows, each a list of cells.

    Cells are split on single tabs, so an empty cell (no networks, the image
    of a pod whose prepare was aborted) stays; the listings for people
    (``aligned``: with a legend) pad with runs of tabs, which are collapsed.
    An empty listing is no row.
    """
    return [(re.sub(r"\t\t+", "\t", line) if aligned else line).split("\t")
            for line in text.splitlines() if line.strip()]


def parse_fetched_id(text: str) -> str:
    """``fetch`` prints the image's id (shortened: ``sha512-`` and 32 hex digits) on its last line.

    :raises ValueError: no image id in it.
    """
    lines = text.split()
    if not lines or not _IMAGE_ID.match(lines[-1]):
        raise ValueError(f"no image id in {text!r}")
    return lines[-1]


def parse_quoted(text: str) -> list[str]:
    """The UUIDs (or image ids) that ``stop``, ``rm``, ``gc`` and ``image rm`` print in double quotes."""
    return _QUOTED.findall(text)


# -- the command line ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Done:
    """A finished rkt command."""

    exit_code: int
    stdout: str
    stderr: str


class Rkt:
    """``rkt [global options] ...``; ``binary`` is an absolute path."""

    def __init__(self, binary: str, *, dir: str = "", local_config: str = "", system_config: str = "") -> None:
        self.binary = binary
        self.dir = dir
        self.local_config = local_config
        self.system_config = system_config

    def argv(self, *args: str, insecure: Sequence[str] = (), debug: bool = False) -> list[str]:
        """The command line of ``rkt ARGS`` with the global options (``--insecure-options``, ``--debug``
        are global options too)."""
        options = [f"--{name}={value}" for name, value in (("dir", self.dir), ("local-config", self.local_config),
                                                             ("system-config", self.system_config)) if value]
        if insecure:
            options.append(f"--insecure-options={','.join(insecure)}")
        if debug:
            options.append("--debug")
        return [self.binary, *options, *args]

    def run(self, *args: str, timeout: float = COMMAND_TIMEOUT, insecure: Sequence[str] = ()) -> Done:
        """Run ``rkt ARGS`` to its end, whatever its exit code.

        :raises RktError: it could not be run or timed out.
        """
        try:
            done = subprocess.run(self.argv(*args, insecure=insecure), capture_output=True, text=True,
                                  timeout=timeout, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RktError(args[0], -1, str(exc)) from exc
        return Done(done.returncode, done.stdout, done.stderr)

    def call(self, *args: str, timeout: float = COMMAND_TIMEOUT, insecure: Sequence[str] = ()) -> str:
        """Run ``rkt ARGS``; its stdout.

        :raises RktError: it failed (with rkt's message) or timed out.
        """
        done = self.run(*args, timeout=timeout, insecure=insecure)
        if done.exit_code != 0:
            raise RktError(args[0], done.exit_code, done.stderr or done.stdout)
        return done.stdout

    def version(self, timeout: float = COMMAND_TIMEOUT) -> Version:
        """:raises RktError: rkt does not run, or says no version."""
        text = self.call("version", timeout=timeout)
        try:
            return parse_version(text)
        except ValueError as exc:
            raise RktError("version", 0, str(exc)) from exc

    def status(self, uuid: str) -> Pod | None:
        """The pod; None when there is no such pod (any more).

        A pod whose ``rkt run`` was killed while it prepared the pod (it writes
        the UUID file before it is done) is in state ``aborted prepare``, which
        ``status --format=json`` cannot print (``invalid creation time``): its
        state then comes from the text status, without apps.
        """
        try:
            return parse_pod(self.call("status", "--format=json", uuid))
        except RktError as exc:
            if exc.no_such_pod:
                return None
            try:
                fields = parse_status_text(self.call("status", uuid))
            except RktError:
                raise exc from None
            if not fields.get("state"):
                raise
            return Pod(uuid=uuid, state=fields["state"])

    def wait_exited(self, uuid: str, timeout: float) -> Pod | None:
        """``status --wait``: the pod once it has exited, or as it is after ``timeout`` s; None when there
        is no such pod."""
        try:
            return parse_pod(self.call("status", f"--wait={max(1, round(timeout))}s", "--format=json", uuid,
                                       timeout=timeout + COMMAND_TIMEOUT))
        except RktError as exc:
            if exc.no_such_pod:
                return None
            if "deadline exceeded" in exc.message:
                return self.status(uuid)
            raise

    def manifest(self, image_id: str) -> dict[str, Any]:
        """``image cat-manifest``: the image's manifest."""
        text = self.call("image", "cat-manifest", image_id)
        try:
            manifest: dict[str, Any] = json.loads(text)
        except ValueError as exc:
            raise RktError("image cat-manifest", 0, f"not JSON: {text[:200]!r}") from exc
        return manifest

    def pods(self) -> list[Pod]:
        return parse_pods(self.call("list", "--format=json"))

    def images(self) -> list[Image]:
        return parse_images(self.call("image", "list", "--format=json"))

    def fetch(self, image: str, insecure: Sequence[str] = (), timeout: float = COMMAND_TIMEOUT) -> str:
        """Import ``image`` (a file, or a name: from the store if there, else by discovery); its short id."""
        stdout = self.call("fetch", "--pull-policy=new", image, insecure=insecure, timeout=timeout)
        try:
            return parse_fetched_id(stdout)
        except ValueError as exc:
            raise RktError("fetch", 0, str(exc)) from exc

    def trust(self, prefix: str, timeout: float = COMMAND_TIMEOUT) -> None:
        """``rkt trust --prefix``: trust the signing key that discovery finds for ``prefix``."""
        self.call("trust", "--skip-fingerprint-review=true", f"--prefix={prefix}", timeout=timeout)

    def stop(self, uuid: str, force: bool = False) -> bool:
        """``rkt stop [--force]``: SIGTERM (SIGKILL) to the pod; False when it had stopped, is gone, or has
        not started its app yet."""
        try:
            stdout = self.call("stop", *(("--force",) if force else ()), uuid)
        except RktError as exc:
            if exc.no_such_pod or exc.pod_not_running:
                return False
            raise
        return uuid in parse_quoted(stdout)  # else "pod ... is already stopped", exit 0

    def rm(self, uuid: str) -> bool:
        """``rkt rm``: remove an exited pod (and unmount what it mounted); False when it is gone already.

        :raises RktError: it still runs (``pod_running``), or rkt failed.
        """
        try:
            self.call("rm", uuid)
        except RktError as exc:
            if exc.no_such_pod:
                return False
            raise
        return True

    def image_rm(self, image_id: str) -> bool:
        """``rkt image rm``; False when there is no such image (rkt exits 0 then, saying so on stderr)."""
        done = self.run("image", "rm", image_id)
        if done.exit_code != 0:
            raise RktError("image rm", done.exit_code, done.stderr or done.stdout)
        return image_id in parse_quoted(done.stdout)
