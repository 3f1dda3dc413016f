"""The ``service`` and ``check`` blocks of a job's tasks and groups, with the checks a schema cannot express:
ports that name one of their owner's port labels, script checks' tasks, one provider per group."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from herder.jobspec.connect import ConnectBuilder
from herder.jobspec.fields import duration, integer, texts
from herder.jobspec.paths import Path, render_path
from herder.model import Check, CheckRestart, Service
from herder.sdk.durations import parse_duration

_PORTED_CHECKS = {"http", "tcp", "grpc"}


class ServiceBlocks:
    """Builds services and checks, reporting problems to ``problem`` and warnings to ``warnings``."""

    def __init__(self, problem: Callable[[Path, str], None], warnings: list[str]) -> None:
        self.problem = problem
        self.warnings = warnings

    def port_ref(self, value: Any, labels: set[str], path: Path, owner: str) -> str:
        """A service or check port: a label of the ports of its ``owner`` (task or group), or a number."""
        text = str(value)
        if text and not text.isdigit() and "${" not in text and text not in labels:
            known = ", ".join(sorted(labels)) or "none"
            self.problem(path, f"port {text!r} is not a port label of the {owner} (labels: {known})")
        return text

    def one_provider(self, spec: dict[str, Any], path: Path) -> None:
        """Every service of a group, its own and its tasks', in one registry (Nomad 1.3's rule);
        an unset provider is Nomad's default, ``consul``."""
        first: tuple[str, Path] | None = None
        where = [((*path, "services", index), service) for index, service in enumerate(spec.get("services", []))]
        for task_index, task in enumerate(spec["tasks"]):
            where += [((*path, "tasks", task_index, "services", index), service)
                      for index, service in enumerate(task.get("services", []))]
        for service_path, service in where:
            provider = service.get("provider") or "consul"
            if first is None:
                first = (provider, service_path)
            elif provider != first[0]:
                self.problem((*service_path, "provider"),
                             f"Multiple service providers used: task group services must use the same provider "
                             f"({provider} here, {first[0]} at {render_path(first[1])})")
                return

    def service(self, spec: dict[str, Any], path: Path, labels: set[str], default_name: str,
                tasks: set[str] | None = None, connect: ConnectBuilder | None = None) -> Service:
        """A service of a task, or of a group (``tasks``: the group's task names,
        which its script checks must name one of; ``connect``: what makes its Connect parts)."""
        name = spec.get("name", default_name)
        port = self.port_ref(spec.get("port", ""), labels, (*path, "port"), "task" if tasks is None else "group")
        # A service's check_restart applies to each of its checks that has none (Nomad's merge).
        restart = spec.get("check_restart")
        checks = tuple(
            self.check({"check_restart": restart, **check} if restart and "check_restart" not in check else check,
                       (*path, "checks", index), labels, name, port, tasks)
            for index, check in enumerate(spec.get("checks", []))
        )
        service = Service(
            name=name,
            port=port,
            tags=tuple(spec.get("tags", [])),
            address_mode=spec.get("address_mode", "auto"),
            meta=texts(spec.get("meta")),
            checks=checks,
            provider=spec.get("provider", ""),
        )
        if connect is None:
            if "connect" in spec:
                self.problem((*path, "connect"), "is only for the services of a group (as in Nomad)")
            for index, check in enumerate(checks):
                if check.expose:
                    self.problem((*path, "checks", index, "expose"), "is only for the checks of a group service "
                                                                     "with a Connect sidecar_service")
            return service
        if "connect" in spec:
            service = dataclasses.replace(service, connect=connect.connect(spec["connect"], (*path, "connect"), name,
                                                                           port, tasks or set()))
        return connect.exposed_checks(service, path)

    def check(self, spec: dict[str, Any], path: Path, labels: set[str], service: str, service_port: str,
              tasks: set[str] | None) -> Check:
        port = self.port_ref(spec.get("port", ""), labels, (*path, "port"), "task" if tasks is None else "group")
        if spec["type"] in _PORTED_CHECKS and not (port or service_port):
            self.problem((*path, "port"), f"is required for {spec['type']} checks when the service has no port")
        task = spec.get("task", "")
        if tasks is None and task:
            # Nomad ignores it: a task's checks run in their task.
            self.warnings.append(f"{render_path((*path, 'task'))} is ignored: a task service's checks run in "
                                 f"its task")
            task = ""
        elif tasks is not None and spec["type"] == "script" and task not in tasks:
            known = ", ".join(sorted(tasks))
            self.problem((*path, "task"), f"a group service's script check must name the task it runs in "
                                          f"(one of: {known})" if not task else
                         f"names no task of the group (tasks: {known})")
        return Check(
            type=spec["type"],
            name=spec.get("name", f'service: "{service}" check'),
            interval=parse_duration(spec["interval"]),
            timeout=parse_duration(spec["timeout"]),
            path=spec.get("path", ""),
            method=spec.get("method", "GET"),
            protocol=spec.get("protocol", "http"),
            port=port,
            command=spec.get("command", ""),
            args=tuple(spec.get("args", [])),
            address_mode=spec.get("address_mode", "host"),
            header={key: tuple(values) for key, values in spec.get("header", {}).items()},
            tls_skip_verify=spec.get("tls_skip_verify", False),
            initial_status=spec.get("initial_status", ""),
            grpc_service=spec.get("grpc_service", ""),
            grpc_use_tls=spec.get("grpc_use_tls", False),
            check_restart=self.check_restart(spec["check_restart"]) if "check_restart" in spec else None,
            task=task,
            expose=spec.get("expose", False),
        )

    def check_restart(self, spec: dict[str, Any]) -> CheckRestart:
        return CheckRestart(
            limit=integer(spec, "limit", 0),
            grace=duration(spec, "grace", 1.0),
            ignore_warnings=spec.get("ignore_warnings", False),
        )
