"""``herder job ...`` and ``herder alloc ...``: the command line against a running agent.

The agent is at ``HERDER_ADDR`` (default ``http://127.0.0.1:4646``) and
``HERDER_TOKEN`` is its bearer token. An ``https://`` agent's certificate is
verified against ``HERDER_CACERT`` (a CA bundle) if set, else the system's
store; ``HERDER_SKIP_VERIFY=true`` skips that (tests only: the token then goes
to whoever answers). Every failure to talk to it is one clear line on stderr
and exit 1, never a traceback.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import click
import httpx

from herder import app
from herder.errors import JobError

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2
DEFAULT_ADDR = "http://127.0.0.1:4646"
TIMEOUT = httpx.Timeout(30.0, connect=5.0)


def say(text: str) -> None:
    click.echo(text, err=True)


def fail(text: str, code: int = EXIT_FAILED) -> NoReturn:
    say(f"Error: {text}")
    sys.exit(code)


def invalid(errors: list[str]) -> NoReturn:
    say("Error: the job is invalid:")
    for error in errors:
        say(f"  * {error}")
    sys.exit(EXIT_INVALID)


class Agent:
    """An HTTP client of the agent that turns every failure into a message."""

    def __init__(self) -> None:
        self.addr = os.environ.get("HERDER_ADDR") or DEFAULT_ADDR
        token = os.environ.get("HERDER_TOKEN", "")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if "://" not in self.addr:
            self.addr = "http://" + self.addr
        self.http = httpx.Client(base_url=self.addr, headers=headers, timeout=TIMEOUT, verify=tls_verify())

    def _check(self, response: httpx.Response) -> None:
        if response.is_success:
            return
        try:
            body = json.loads(response.read())
            message, errors = str(body.get("error", "")), [str(e) for e in body.get("errors", [])]
        except (ValueError, AttributeError):
            message, errors = response.text[:200], []
        if response.status_code == 401:
            fail(f"the agent at {self.addr} refused the request: {message} (is HERDER_TOKEN right?)")
        if errors and message == "invalid job":
            invalid(errors)
        fail(message or f"HTTP {response.status_code}" + "".join(f"\n  * {e}" for e in errors))

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            self.unreachable(exc)
        self._check(response)
        return response.json()

    def stream(self, path: str, params: dict[str, Any], timeout: httpx.Timeout | None = None) -> Iterator[bytes]:
        try:
            with self.http.stream("GET", path, params=params, timeout=timeout or TIMEOUT) as response:
                self._check(response)
                yield from response.iter_bytes()
        except httpx.HTTPError as exc:
            self.unreachable(exc)

    def unreachable(self, exc: httpx.HTTPError) -> NoReturn:
        if isinstance(exc, httpx.TimeoutException):
            fail(f"the agent at {self.addr} did not answer in time: {exc}")
        tls = _ssl_error(exc)
        if isinstance(tls, ssl.SSLCertVerificationError):
            fail(f"the certificate of the agent at {self.addr} is not trusted ({tls.verify_message}); "
                 "set HERDER_CACERT to the CA bundle that signed it")
        if tls is not None:
            fail(f"no TLS with the agent at {self.addr} ({tls.reason or tls}); does it serve HTTPS?")
        https = " (https:// if it serves TLS)" if self.addr.startswith("http://") else ""
        fail(f"cannot reach the herder agent at {self.addr} ({exc or type(exc).__name__}); "
             f"is `herder agent` running, and is HERDER_ADDR right{https}?")


def tls_verify() -> ssl.SSLContext | bool:
    """How an https agent's certificate is verified: against HERDER_CACERT, else the system's store."""
    if os.environ.get("HERDER_SKIP_VERIFY", "").lower() in ("1", "true", "yes"):
        return False
    cacert = os.environ.get("HERDER_CACERT") or None
    try:
        return ssl.create_default_context(cafile=cacert)
    except OSError as exc:  # ssl.SSLError is one
        fail(f"HERDER_CACERT {cacert}: cannot load a CA bundle: "
             f"{exc.strerror or exc}")


def _ssl_error(exc: BaseException) -> ssl.SSLError | None:
    """The TLS failure under an HTTP error, if that is what it is."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, ssl.SSLError):
        cause = cause.__cause__ or cause.__context__
    return cause


def events(agent: Agent, alloc_ids: set[str]) -> Iterator[dict[str, Any]]:
    """The task events of ``alloc_ids`` as they come (the agent keeps the recent ones)."""
    buffer = b""
    for chunk in agent.stream("/v1/events", {"follow": "true"}, httpx.Timeout(None, connect=5.0)):
        buffer += chunk
        while b"\n\n" in buffer:
            message, buffer = buffer.split(b"\n\n", 1)
            for line in message.decode().splitlines():
                if line.startswith("data: "):
                    event = json.loads(line[len("data: "):])
                    if event.get("alloc_id") in alloc_ids:
                        yield event


def event_line(event: dict[str, Any]) -> str:
    message = f": {event['message']}" if event.get("message") else ""
    return f"{event['time']} {event['alloc_name']} {event['task']} {event['type']}{message}"


# -- herder job ----------------------------------------------------------------


@click.group()
def job() -> None:
    """Run, stop and inspect jobs on the agent at HERDER_ADDR."""


@job.command("run")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--var", "variables", multiple=True, metavar="KEY=VALUE", help="Set a job variable.")
@click.option("--var-file", "var_files", multiple=True, type=click.Path(path_type=Path), metavar="FILE",
              help="Set job variables from an .hcl or .json file (repeatable; --var wins).")
@click.option("--detach", is_flag=True, help="Return once the job is placed, without following its events.")
@click.option("--allow-file-outside", is_flag=True,
              help="Let file() in the job file read outside the job file's directory.")
def job_run(file: Path, variables: tuple[str, ...], var_files: tuple[Path, ...], detach: bool,
            allow_file_outside: bool) -> None:
    """Submit the job in FILE; show its events until every task runs, or one fails.

    The file is evaluated here, as Nomad's CLI does: its variables, and
    file() relative to its directory. The agent gets the evaluated job and
    never reads a file of yours (nor one of its own) for it.
    """
    try:
        job, source = app.evaluate_job(file, app.parse_variables(variables), var_files,
                                       allow_file_outside=allow_file_outside)
    except JobError as exc:
        invalid(exc.errors)
    for warning in job.warnings:
        say(f"Warning: {warning}")
    body = {"job": json.loads(source.text), "source": source.source, "lines": job.lines}
    agent = Agent()
    submitted = agent.request("POST", "/v1/jobs", json=body)
    for warning in submitted.get("warnings", []):
        if warning not in job.warnings:
            say(f"Warning: {warning}")
    current = [a for a in submitted["allocations"] if a.get("status") in ("pending", "running")] or \
        submitted["allocations"]
    ids = {a["id"] for a in current}
    for alloc in current:
        say(f"Allocation {alloc['id'][:8]} ({alloc['name']}) placed")
    if detach:
        return
    # A batch job is followed until its tasks are done; any other until every task runs.
    until_done = submitted.get("type") in ("batch", "sysbatch")
    state = _settled(agent, ids, until_done)
    if state is None:
        for event in events(agent, ids):
            click.echo(event_line(event))
            if (state := _settled(agent, ids, until_done)) is not None:
                break
    if state == "failed":
        for alloc_id in ids:
            status = agent.request("GET", f"/v1/allocations/{alloc_id}")
            for name, task in status["tasks"].items():
                if task["failed"] and task["events"]:
                    last = task["events"][-1]
                    say(f"{status['name']} {name} failed: {last['type']}: {last['message']}")
    say(f"Job {submitted['name']}: {state}")
    sys.exit(EXIT_FAILED if state == "failed" else EXIT_OK)


def _settled(agent: Agent, ids: set[str], until_done: bool) -> str | None:
    """"failed" if a task failed; else "complete" once every task is dead (``until_done``)
    or "running" once every task has started; None before."""
    tasks = [t for alloc_id in ids for t in agent.request("GET", f"/v1/allocations/{alloc_id}")["tasks"].values()]
    if any(t["failed"] for t in tasks):
        return "failed"
    if until_done:
        return "complete" if all(t["state"] == "dead" for t in tasks) else None
    return "running" if all(t["state"] != "pending" for t in tasks) else None


@job.command("stop")
@click.argument("name")
def job_stop(name: str) -> None:
    """Stop every task of job NAME gracefully."""
    stopped = Agent().request("DELETE", f"/v1/jobs/{name}")
    say(f"Job {name}: stopping {len(stopped['allocations'])} allocation(s)")


@job.command("status")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the agent's JSON (documented in docs/agent.md).")
def job_status(name: str | None, as_json: bool) -> None:
    """The jobs on the agent, or one job with its allocations."""
    agent = Agent()
    found = [agent.request("GET", f"/v1/jobs/{name}")] if name else agent.request("GET", "/v1/jobs")["jobs"]
    if as_json:
        click.echo(json.dumps(found[0] if name else {"jobs": found}, indent=2))
        return
    if not found:
        click.echo("No jobs")
    for entry in found:
        click.echo(f"{entry['name']}  {entry['status']}  ({entry['id'][:12]})")
        for alloc in entry["allocations"]:
            tasks = ", ".join(f"{n}={t['state']}{' failed' if t['failed'] else ''}"
                              for n, t in alloc["tasks"].items())
            click.echo(f"  {alloc['id'][:8]}  {alloc['name']:<24} {alloc['status']:<9} {tasks}")


# -- herder alloc ----------------------------------------------------------------


@click.group()
def alloc() -> None:
    """Inspect and act on allocations on the agent at HERDER_ADDR; IDs may be unique prefixes."""


@alloc.command("status")
@click.argument("alloc_id")
@click.option("--json", "as_json", is_flag=True, help="Print the agent's JSON (documented in docs/agent.md).")
def alloc_status(alloc_id: str, as_json: bool) -> None:
    """An allocation: its tasks' states, ports, service checks and recent events."""
    status = Agent().request("GET", f"/v1/allocations/{alloc_id}")
    if as_json:
        click.echo(json.dumps(status, indent=2))
        return
    click.echo(f"ID      {status['id']}\nName    {status['name']}\nJob     {status['job']}\nStatus  {status['status']}")
    for port in status["ports"]:
        click.echo(f"Port    {port['label']} = {port['host_ip']}:{port['value']}"
                   + (f" -> {port['to']}" if port["to"] else ""))
    for name, task in status["tasks"].items():
        code = f", exit code {task['exit_code']}" if task["exit_code"] is not None else ""
        click.echo(f"\nTask {name!r} ({task['driver']}) is {task['state']}{' (failed)' if task['failed'] else ''}"
                   f", {task['restarts']} restart(s){code}")
        for check in task["checks"]:
            click.echo(f"  check {check['service']}/{check['check']}: {check['status']}")
        for event in task["events"][-10:]:
            click.echo(f"  {event['time']}  {event['type']:<18} {event['message']}")


@alloc.command("logs")
@click.option("-f", "--follow", is_flag=True, help="Go on showing output as it comes.")
@click.option("--stderr", "stderr", is_flag=True, help="The task's stderr instead of its stdout.")
@click.option("--tail", "tail", type=click.IntRange(min=0), help="Only the last N bytes.")
@click.argument("alloc_id")
@click.argument("task")
def alloc_logs(follow: bool, stderr: bool, tail: int | None, alloc_id: str, task: str) -> None:
    """The output of TASK in allocation ALLOC_ID."""
    params: dict[str, Any] = {"stream": "stderr" if stderr else "stdout", "follow": str(follow).lower()}
    if tail is not None:
        params |= {"origin": "end", "offset": tail}
    out = sys.stdout.buffer
    try:
        for chunk in Agent().stream(f"/v1/allocations/{alloc_id}/logs/{task}", params,
                                    httpx.Timeout(None if follow else 30.0, connect=5.0)):
            out.write(chunk)
            out.flush()
    except KeyboardInterrupt:
        pass


@alloc.command("exec", context_settings={"ignore_unknown_options": True})
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True, max=3600), default=30.0, show_default=True,
              help="Seconds the command may run.")
@click.argument("alloc_id")
@click.argument("task")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def alloc_exec(timeout: float, alloc_id: str, task: str, command: tuple[str, ...]) -> None:
    """Run COMMAND inside TASK; print its output and exit with its code."""
    result = Agent().request("POST", f"/v1/allocations/{alloc_id}/exec",
                             json={"task": task, "command": list(command), "timeout": timeout},
                             timeout=httpx.Timeout(timeout + 30.0, connect=5.0))
    click.echo(result["output"], nl=False)
    sys.exit(result["exit_code"] if 0 <= result["exit_code"] < 256 else EXIT_FAILED)


@alloc.command("signal")
@click.option("-s", "--signal", "sig", default="SIGTERM", show_default=True, help="The signal to send.")
@click.argument("alloc_id")
@click.argument("task", required=False)
def alloc_signal(sig: str, alloc_id: str, task: str | None) -> None:
    """Send a signal to TASK, or to every running task of the allocation."""
    say(Agent().request("POST", f"/v1/allocations/{alloc_id}/signal", json={"task": task, "signal": sig})["message"])


@alloc.command("restart")
@click.argument("alloc_id")
@click.argument("task", required=False)
def alloc_restart(alloc_id: str, task: str | None) -> None:
    """Restart TASK, or every running task of the allocation (not counted against the restart policy)."""
    say(Agent().request("POST", f"/v1/allocations/{alloc_id}/restart",
                        json={"task": task, "reason": "Restart requested from the command line"})["message"])
