"""``herder job ...`` and ``herder alloc ...``: the command line against a running agent.

The agent is at ``HERDER_ADDR`` (default ``http://127.0.0.1:4646``) and
``HERDER_TOKEN`` is its bearer token. Without ``HERDER_TOKEN`` (or with it
empty), a loopback agent's token is found on this host: the one ``--config``
sets or keeps in its data dir, else the one in the agent's default data dir,
which only the agent's user (root) can read
(:func:`herder.credential.cli_token`). An ``https://`` agent's
certificate is verified against ``HERDER_CACERT`` (a CA bundle) if set, else
the system's store; ``HERDER_SKIP_VERIFY=true`` skips that (tests only: the
token then goes to whoever answers). Every failure to talk to it is one clear line on stderr
and exit 1, never a traceback.

Their HTTP client (:mod:`herder.cli.client`) is on the standard library's
:mod:`http.client`: these commands start in tens of milliseconds, so they
import neither the agent nor an HTTP library's own imports (httpx alone takes
longer than all of this). Only ``job run`` loads the job parser, to read its
file.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import click

from herder.cli.client import CONFIG, READ_TIMEOUT, AgentClient
from herder.cli.common import (
    EXIT_FAILED,
    EXIT_INVALID,
    EXIT_OK,
    F,
    event_line,
    fail,
    invalid,
    meta_option,
    read_payload,
    say,
    variable_options,
)
from herder.cli.terminal import printable
from herder.errors import JobError
from herder.model import MAX_PAYLOAD


def config_option(func: F) -> F:
    """``--config``: the agent's configuration, in which the command finds its token."""
    def remember(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
        ctx.meta[CONFIG] = value

    return click.option("--config", type=click.Path(path_type=Path, dir_okay=False), expose_value=False,
                        callback=remember, help="The agent's configuration (TOML), whose token to send "
                                                "when HERDER_TOKEN is not set.")(func)


def events(agent: AgentClient, alloc_ids: set[str], index: int = 0) -> Iterator[tuple[str, dict[str, Any]]]:
    """The entries of ``alloc_ids`` after ``index`` in the agent's event stream as they come, each
    with its kind: ``task-event`` (a task's event) or ``alloc-status`` (an allocation's end)."""
    buffer = b""
    for chunk in agent.stream("/v1/events", {"follow": "true", "index": index, "ends": "true"}, read_timeout=None):
        buffer += chunk
        while b"\n\n" in buffer:
            message, buffer = buffer.split(b"\n\n", 1)
            fields = dict(line.split(": ", 1) for line in message.decode().splitlines() if ": " in line)
            if "data" in fields and (entry := json.loads(fields["data"])).get("alloc_id") in alloc_ids:
                yield fields.get("event", "task-event"), entry


# -- herder job ----------------------------------------------------------------


@click.group()
def job() -> None:
    """Run, stop and inspect jobs on the agent at HERDER_ADDR."""


@job.command("run")
@click.argument("file", type=click.Path(path_type=Path))
@variable_options
@click.option("--detach", is_flag=True, help="Return once the job is placed, without following its events.")
@click.option("--allow-file-outside", is_flag=True,
              help="Let file() in the job file read outside the job file's directory.")
@config_option
def job_run(file: Path, variables: tuple[str, ...], var_files: tuple[Path, ...], detach: bool,
            allow_file_outside: bool) -> None:
    """Submit the job in FILE; show its events until every task runs, or one fails.

    The file is evaluated here, as Nomad's CLI does: its variables, and
    file() relative to its directory. The agent gets the evaluated job and
    never reads a file of yours (nor one of its own) for it.
    """
    from herder import app  # the job parser and what it needs: this command alone reads a job file

    try:
        job, source = app.evaluate_job(file, app.parse_variables(variables), var_files,
                                       allow_file_outside=allow_file_outside)
    except JobError as exc:
        invalid("the job is invalid", exc.errors)
    for warning in job.warnings:
        say(f"Warning: {warning}")
    body = {"job": json.loads(source.text), "source": source.source, "lines": job.lines}
    agent = AgentClient()
    submitted = agent.request("POST", "/v1/jobs", json_body=body)
    for warning in submitted.get("warnings", []):
        if warning not in job.warnings:
            say(f"Warning: {warning}")
    if submitted.get("parameterized"):  # registered, not run: its children run when dispatched
        say(f"Job {submitted['name']} registered: parameterized, it runs when dispatched "
            f"(herder job dispatch {submitted['name']})")
        return
    if submitted.get("periodic") is not None:  # registered, not run: its children run at their times
        say(f"Job {submitted['name']} registered: {_schedule(submitted['periodic'])}")
        return
    current = [a for a in submitted["allocations"] if a.get("status") in ("pending", "running")] or \
        submitted["allocations"]
    ids = {a["id"] for a in current}
    for alloc in current:
        say(f"Allocation {alloc['id'][:8]} ({alloc['name']}) placed")
    if detach:
        return
    # Followed from the submission's index, so that nothing the job did before is missed:
    # a batch job until the client ended every allocation, any other until every task runs.
    until_done = submitted.get("type") in ("batch", "sysbatch")
    state = None if until_done else _running(agent, ids)
    ended: dict[str, str] = {}
    if state is None:
        for kind, entry in events(agent, ids, submitted["index"]):
            if kind == "task-event":
                click.echo(event_line(entry))
                if not until_done and (state := _running(agent, ids)) is not None:
                    break
            elif kind == "alloc-status":
                ended[entry["alloc_id"]] = entry["status"]
                if ended.keys() == ids:
                    state = "failed" if "failed" in ended.values() else "complete"
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


def _running(agent: AgentClient, ids: set[str]) -> str | None:
    """"failed" if a task failed; else "running" once every task has started; None before."""
    tasks = [t for alloc_id in ids for t in agent.request("GET", f"/v1/allocations/{alloc_id}")["tasks"].values()]
    if any(t["failed"] for t in tasks):
        return "failed"
    return "running" if all(t["state"] != "pending" for t in tasks) else None


@job.command("stop")
@click.argument("name")
@config_option
def job_stop(name: str) -> None:
    """Stop every task of job NAME gracefully."""
    stopped = AgentClient().request("DELETE", f"/v1/jobs/{name}")
    if stopped.get("periodic") is not None:
        running = [c["name"] for c in stopped["children"] if c["status"] == "running"]
        say(f"Job {name}: no more launches; stopping {len(running)} running child job(s)")
        return
    if stopped.get("parameterized"):
        say(f"Job {name}: no more dispatches (the children dispatched run on)")
        return
    say(f"Job {name}: stopping {len(stopped['allocations'])} allocation(s)")


@job.command("dispatch")
@meta_option
@click.option("--json", "as_json", is_flag=True, help="Print the agent's JSON answer (the child job).")
@click.argument("name")
@click.argument("payload_file", required=False, type=click.File("rb"), metavar="[PAYLOAD_FILE | -]")
@config_option
def job_dispatch(meta: dict[str, str], as_json: bool, name: str, payload_file: BinaryIO | None) -> None:
    """Dispatch the parameterized job NAME: run a child of it with the meta given and
    the payload in PAYLOAD_FILE (- reads stdin). Prints the child's name."""
    payload = read_payload(payload_file, MAX_PAYLOAD)
    dispatched = AgentClient().request("POST", f"/v1/jobs/{name}/dispatch", json_body={
        "meta": meta, "payload": base64.b64encode(payload).decode("ascii")})
    if as_json:
        click.echo(json.dumps(dispatched, indent=2))
        return
    for alloc in dispatched["allocations"]:
        say(f"Allocation {alloc['id'][:8]} ({alloc['name']}) placed")
    click.echo(dispatched["name"])


@job.group("periodic")
def periodic() -> None:
    """Act on periodic jobs."""


@periodic.command("force")
@click.argument("name")
@config_option
def periodic_force(name: str) -> None:
    """Launch a child of periodic job NAME now, even while another runs (prohibit_overlap)."""
    child = AgentClient().request("POST", f"/v1/jobs/{name}/periodic/force")
    say(f"Job {name}: launched {child['name']}")
    for alloc in child["allocations"]:
        say(f"Allocation {alloc['id'][:8]} ({alloc['name']}) placed")


def _schedule(periodic: dict[str, Any]) -> str:
    """A periodic job's schedule and next launch, in a few words."""
    crons = " | ".join(periodic["crons"])
    zone = f" ({periodic['time_zone']})" if periodic["time_zone"] not in ("", "UTC") else ""
    next_launch = periodic["next_launch"] or "none"
    overlap = ", no overlap" if periodic["prohibit_overlap"] else ""
    return f"periodic {crons}{zone}{overlap}; next launch {next_launch}"


@job.command("status")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the agent's JSON (documented in docs/agent.md).")
@config_option
def job_status(name: str | None, as_json: bool) -> None:
    """The jobs on the agent, or one job with its allocations."""
    agent = AgentClient()
    found = [agent.request("GET", f"/v1/jobs/{name}")] if name else agent.request("GET", "/v1/jobs")["jobs"]
    if as_json:
        click.echo(json.dumps(found[0] if name else {"jobs": found}, indent=2))
        return
    if not found:
        click.echo("No jobs")
    for entry in found:
        kind = "  parameterized" if entry.get("parameterized") else ""
        click.echo(f"{entry['name']}  {entry['status']}{kind}  ({entry['id'][:12]})")
        if entry.get("periodic") is not None:
            click.echo(f"  {_schedule(entry['periodic'])}")
        if name:
            for child in entry.get("children", []):
                click.echo(f"  child {child['name']:<40} {child['status']}")
        for alloc in entry["allocations"]:
            tasks = ", ".join(f"{n}={t['state']}{' failed' if t['failed'] else ''}"
                              for n, t in alloc["tasks"].items())
            click.echo(f"  {alloc['id'][:8]}  {alloc['name']:<24} {alloc['status']:<9} {tasks}")


# -- herder alloc ----------------------------------------------------------------

_USAGE_COLUMNS = (
    ("RSS", "memory_rss_bytes", "bytes"), ("Mem usage", "memory_usage_bytes", "bytes"),
    ("Mem limit", "memory_limit_bytes", "bytes"), ("CPU %", "cpu_percent", "percent"),
    ("CPU time", "cpu_total_ns", "ns"), ("Throttled", "cpu_throttled_periods", "count"),
    ("Throttled time", "cpu_throttled_ns", "ns"), ("Pids", "pids", "count"),
)


def _print_usage(usage: dict[str, Any]) -> None:
    """A task's usage as a two-line table, as the stats route gives it; ``-`` where the driver cannot tell."""
    cells = [(title, _usage_cell(usage.get(key), unit)) for title, key, unit in _USAGE_COLUMNS]
    widths = [max(len(title), len(value)) for title, value in cells]
    click.echo("  " + "  ".join(title.ljust(width) for (title, _), width in zip(cells, widths, strict=True)).rstrip())
    click.echo("  " + "  ".join(value.ljust(width) for (_, value), width in zip(cells, widths, strict=True)).rstrip())


def _usage_cell(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "bytes":
        return f"{value / (1 << 20):.1f} MiB"
    if unit == "percent":
        return f"{value:.1f}"
    if unit == "ns":
        return f"{value / 1e9:.2f} s"
    return str(value)



@click.group()
def alloc() -> None:
    """Inspect and act on allocations on the agent at HERDER_ADDR; IDs may be unique prefixes."""


@alloc.command("status")
@click.argument("alloc_id")
@click.option("-stats", "--stats", "with_stats", is_flag=True,
              help="Also each running task's resource usage: memory and CPU (with --json: only that).")
@click.option("--json", "as_json", is_flag=True, help="Print the agent's JSON (documented in docs/agent.md).")
@config_option
def alloc_status(alloc_id: str, with_stats: bool, as_json: bool) -> None:
    """An allocation: its tasks' states, ports, service checks and recent events (and usage, with -stats)."""
    agent = AgentClient()
    if with_stats and as_json:
        click.echo(json.dumps(agent.request("GET", f"/v1/allocations/{alloc_id}/stats"), indent=2))
        return
    status = agent.request("GET", f"/v1/allocations/{alloc_id}")
    if as_json:
        click.echo(json.dumps(status, indent=2))
        return
    usage = agent.request("GET", f"/v1/allocations/{status['id']}/stats")["tasks"] if with_stats else {}
    click.echo(f"ID      {status['id']}\nName    {status['name']}\nJob     {status['job']}\nStatus  {status['status']}")
    for port in status["ports"]:
        click.echo(f"Port    {port['label']} = {port['host_ip']}:{port['value']}"
                   + (f" -> {port['to']}" if port["to"] else ""))
    _print_reschedule(status)
    for name, task in status["tasks"].items():
        code = f", exit code {task['exit_code']}" if task["exit_code"] is not None else ""
        click.echo(f"\nTask {name!r} ({task['driver']}) is {task['state']}{' (failed)' if task['failed'] else ''}"
                   f", {task['restarts']} restart(s){code}")
        if name in usage:
            _print_usage(usage[name])
        for check in task["checks"]:
            click.echo(f"  check {printable(check['service'])}/{printable(check['check'])}: {check['status']}")
        for event in task["events"][-10:]:
            click.echo(f"  {event['time']}  {event['type']:<18} {printable(event['message'])}")


def _print_reschedule(status: dict[str, Any]) -> None:
    """What an allocation replaces and what replaced it, its reschedule attempts and next time."""
    reschedule = status["reschedule"]
    attempts = (f"{reschedule['attempted']}/{reschedule['attempts']}" if reschedule["attempts"]
                else f"{len(reschedule['events'])} (unlimited)") if reschedule["events"] else ""
    lines = [("replaces", status["previous_allocation"]), ("replaced by", status["next_allocation"]),
             ("attempts", attempts), ("next at", reschedule["next_at"] or "")]
    if any(value for _, value in lines):
        click.echo("Rescheduling")
        for label, value in lines:
            if value:
                click.echo(f"  {label:<12}{value}")


@alloc.command("logs")
@click.option("-f", "--follow", is_flag=True, help="Go on showing output as it comes.")
@click.option("--stderr", "stderr", is_flag=True, help="The task's stderr instead of its stdout.")
@click.option("--tail", "tail", type=click.IntRange(min=0), help="Only the last N bytes.")
@click.argument("alloc_id")
@click.argument("task")
@config_option
def alloc_logs(follow: bool, stderr: bool, tail: int | None, alloc_id: str, task: str) -> None:
    """The output of TASK in allocation ALLOC_ID."""
    params: dict[str, Any] = {"stream": "stderr" if stderr else "stdout", "follow": str(follow).lower()}
    if tail is not None:
        params |= {"origin": "end", "offset": tail}
    out = sys.stdout.buffer
    try:
        for chunk in AgentClient().stream(f"/v1/allocations/{alloc_id}/logs/{task}", params,
                                    None if follow else READ_TIMEOUT):
            out.write(chunk)
            out.flush()
    except KeyboardInterrupt:
        pass


class _ExecCommand(click.Command):
    """Also takes Nomad's spelling of the switches, ``-i=false`` and ``-t=true``, before the arguments."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        spelled: list[str] = []
        for index, arg in enumerate(args):
            name, equals, value = arg.partition("=")
            if equals and name in _SWITCHES:
                if value.lower() not in _BOOLEANS:
                    raise click.BadParameter(f"{value!r} is not true or false", ctx, param_hint=name)
                arg = _SWITCHES[name] if _BOOLEANS[value.lower()] else "--no-" + _SWITCHES[name][2:]
            elif not arg.startswith("-") or arg == "--":
                spelled += args[index:]  # the options end at the allocation
                break
            spelled.append(arg)
        return super().parse_args(ctx, spelled)


_SWITCHES = {"-i": "--stdin", "--stdin": "--stdin", "-t": "--tty", "--tty": "--tty"}
_BOOLEANS = {"true": True, "1": True, "t": True, "false": False, "0": False, "f": False}


@alloc.command("exec", cls=_ExecCommand, context_settings={"ignore_unknown_options": True,
                                                           "allow_interspersed_args": False})
@click.option("-i", "--stdin/--no-stdin", default=True,
              help="Pass stdin to the command (-i=false: none).  [default: on]")
@click.option("-t", "--tty/--no-tty", default=None,
              help="Run the command on a terminal (-t=false: pipes)  [default: when stdin is a terminal]")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True, max=3600), default=30.0, show_default=True,
              help="Seconds the command may run, without -i and -t only.")
@click.argument("alloc_id")
@click.argument("args", nargs=-1, required=True, type=click.UNPROCESSED, metavar="[TASK] CMD...")
@config_option
def alloc_exec(stdin: bool, tty: bool | None, timeout: float, alloc_id: str, args: tuple[str, ...]) -> None:
    """Run CMD inside TASK (which may be left out when the allocation has one task); exit with its code.

    By default, as `nomad alloc exec`: stdin goes to the command, its output comes as it prints, and it
    runs on a terminal when stdin is one (`herder alloc exec ALLOC TASK /bin/sh` is a shell in the task).
    With -i=false and -t=false it runs without input for at most --timeout seconds, and its output is
    printed when it ends.
    """
    agent = AgentClient()
    status = agent.request("GET", f"/v1/allocations/{alloc_id}")
    task, command = _task_and_command(status, args)
    if tty is None:
        tty = sys.stdin.isatty()
    if stdin or tty:
        from herder.cli import interactive  # its WebSocket client, loaded by this command alone

        code = interactive.run(agent, status["id"], task, command, stdin=stdin, tty=tty)
    else:
        result = agent.request("POST", f"/v1/allocations/{status['id']}/exec",
                               json_body={"task": task, "command": command, "timeout": timeout},
                               read_timeout=timeout + 30.0)
        click.echo(result["output"], nl=False)
        code = result["exit_code"]
    sys.exit(code if 0 <= code < 256 else EXIT_FAILED)


def _task_and_command(status: dict[str, Any], args: tuple[str, ...]) -> tuple[str, list[str]]:
    """TASK and CMD of ``[TASK] [--] CMD...``: the first argument is the task if the allocation has a task of
    that name and a command follows; else the command runs in the allocation's only task."""
    tasks = list(status["tasks"])
    if len(args) > 1 and args[0] in tasks:
        task, command = args[0], list(args[1:])
    elif len(tasks) == 1:
        task, command = tasks[0], list(args)
    else:
        fail(f"allocation {status['name']} has tasks {', '.join(tasks)}: name one before the command "
             f"(herder alloc exec ALLOC TASK CMD...)", EXIT_INVALID)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        fail("no command to run (herder alloc exec ALLOC [TASK] CMD...)", EXIT_INVALID)
    return task, command


@alloc.command("signal")
@click.option("-s", "--signal", "sig", default="SIGTERM", show_default=True, help="The signal to send.")
@click.argument("alloc_id")
@click.argument("task", required=False)
@config_option
def alloc_signal(sig: str, alloc_id: str, task: str | None) -> None:
    """Send a signal to TASK, or to every running task of the allocation."""
    say(AgentClient().request("POST", f"/v1/allocations/{alloc_id}/signal",
                        json_body={"task": task, "signal": sig})["message"])


@alloc.command("restart")
@click.argument("alloc_id")
@click.argument("task", required=False)
@config_option
def alloc_restart(alloc_id: str, task: str | None) -> None:
    """Restart TASK, or every running task of the allocation (not counted against the restart policy)."""
    say(AgentClient().request("POST", f"/v1/allocations/{alloc_id}/restart",
                        json_body={"task": task, "reason": "Restart requested from the command line"})["message"])


# -- herder system ---------------------------------------------------------------


@click.group()
def system() -> None:
    """Housekeeping on the agent at HERDER_ADDR."""


@system.command("gc")
@config_option
def system_gc() -> None:
    """Collect finished allocations and jobs now, as the agent does every [client] gc_interval."""
    say(AgentClient().request("PUT", "/v1/system/gc")["message"])
