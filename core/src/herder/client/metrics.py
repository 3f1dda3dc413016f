"""The client's figures as Prometheus metric families, read when they are scraped.

Nothing is mirrored into gauges as things happen: :class:`ClientCollector`
reads the allocations, the tasks' usage, the drivers' fingerprints, the
service checks, the supervisor and the state store at each scrape, so an
allocation the garbage collector removed leaves no series behind.

The tasks' usage is the latest the agent's :class:`UsageCollector` read
(every collection interval): a scrape waits on no driver. A task's CPU is the
seconds it used, a counter whose ``rate()`` is its share of a core over the
window Prometheus chooses.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import get_args

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import Collector

from herder.client.alloc_runner import AllocRunner
from herder.client.client import Client
from herder.client.stats import UsageCollector
from herder.client.task_runner import TaskRunner
from herder.services import CRITICAL, PASSING, WARNING
from herder.state import AllocStatus, TaskState
from herder.supervisor import SupervisorError

log = logging.getLogger(__name__)

TASK_LABELS = ("job", "group", "alloc", "task", "driver")
CHECK_STATUSES = (PASSING, WARNING, CRITICAL)

Health = Callable[[str], Mapping[str, Iterable[Mapping[str, str]]]]
"""The service checks of an allocation by its ID: by task, each with its service, check and status."""

# The families of a task's usage: the field of TaskStats, the family's name, kind and help, and the
# factor from the field's unit to the family's.
_USAGE: tuple[tuple[str, str, type[GaugeMetricFamily] | type[CounterMetricFamily], str, float], ...] = (
    ("memory_rss_bytes", "herder_task_memory_rss_bytes", GaugeMetricFamily,
     "Resident memory of the task's processes.", 1),
    ("memory_usage_bytes", "herder_task_memory_usage_bytes", GaugeMetricFamily,
     "Memory usage of the task's cgroup, page cache included (drivers with a cgroup).", 1),
    ("memory_limit_bytes", "herder_task_memory_limit_bytes", GaugeMetricFamily,
     "Memory limit of the task's cgroup (drivers with a cgroup).", 1),
    ("cpu_total_ns", "herder_task_cpu_seconds", CounterMetricFamily,
     "CPU time the task used, user and system.", 1e-9),
    ("cpu_throttled_periods", "herder_task_cpu_throttled_periods", CounterMetricFamily,
     "CFS periods in which the task's cgroup was throttled.", 1),
    ("cpu_throttled_ns", "herder_task_cpu_throttled_seconds", CounterMetricFamily,
     "Time the task's cgroup was throttled.", 1e-9),
    ("pids", "herder_task_processes", GaugeMetricFamily, "Processes of the task.", 1),
)


def task_labels(alloc: AllocRunner, runner: TaskRunner) -> list[str]:
    """The values of :data:`TASK_LABELS` for a task."""
    return [alloc.job.name, alloc.group.name, alloc.alloc.id, runner.name, runner.task.driver]


class ClientCollector(Collector):
    """The figures of ``client``: its allocations and tasks, their usage (the latest ``usage`` read),
    its drivers, the service checks (``health``), its supervisor and its state store."""

    def __init__(self, client: Client, usage: UsageCollector, health: Health) -> None:
        self._client = client
        self._usage = usage
        self._health = health

    def collect(self) -> Iterator[Metric]:
        allocs = self._client.allocs
        yield from self._states(allocs)
        yield from self._tasks(allocs)
        yield from self._checks(allocs)
        yield from self._drivers()
        yield from self._supervisor()
        yield from self._state_store()

    @staticmethod
    def _states(allocs: list[AllocRunner]) -> Iterator[Metric]:
        by_status = Counter(alloc.status for alloc in allocs)
        family = GaugeMetricFamily("herder_allocations", "Allocations by status.", labels=["state"])
        for status in get_args(AllocStatus):
            family.add_metric([status], by_status[status])
        yield family
        by_state = Counter(runner.status.state for alloc in allocs for runner in alloc.tasks)
        family = GaugeMetricFamily("herder_tasks", "Tasks by state.", labels=["state"])
        for state in get_args(TaskState):
            family.add_metric([state], by_state[state])
        yield family

    def _tasks(self, allocs: list[AllocRunner]) -> Iterator[Metric]:
        restarts = CounterMetricFamily("herder_task_restarts", "Restarts of the task.", labels=TASK_LABELS)
        usage = []
        for alloc in allocs:
            for runner in alloc.tasks:
                labels = task_labels(alloc, runner)
                restarts.add_metric(labels, runner.status.restarts)
                if runner.status.state == "running" and (handle := runner.handle) is not None and \
                        (stats := self._usage.latest(handle)) is not None:
                    usage.append((labels, stats))
        yield restarts
        for field, name, kind, help_text, factor in _USAGE:
            family = kind(name, help_text, labels=TASK_LABELS)
            for labels, stats in usage:
                value = getattr(stats, field)
                if value is not None:
                    family.add_metric(labels, value * factor)
            yield family

    def _checks(self, allocs: list[AllocRunner]) -> Iterator[Metric]:
        family = GaugeMetricFamily("herder_service_check_status",
                                   "Status of each service check: 1 for its current status, 0 for the others.",
                                   labels=[*TASK_LABELS, "service", "check", "status"])
        for alloc in allocs:
            checks = self._health(alloc.alloc.id)
            for runner in alloc.tasks:
                for check in checks.get(runner.name, ()):
                    labels = [*task_labels(alloc, runner), check["service"], check["check"]]
                    for status in CHECK_STATUSES:
                        family.add_metric([*labels, status], float(check["status"] == status))
        yield family

    def _drivers(self) -> Iterator[Metric]:
        detected = GaugeMetricFamily("herder_driver_detected", "1 if the driver's software is found on this host.",
                                     labels=["driver"])
        healthy = GaugeMetricFamily("herder_driver_healthy", "1 if the driver is detected and healthy.",
                                    labels=["driver"])
        # The fingerprints taken (at the first placement, then periodically): a scrape does not wait for one.
        for driver, fingerprint in sorted(self._client.fingerprints.latest().items()):
            detected.add_metric([driver], float(fingerprint.detected))
            healthy.add_metric([driver], float(fingerprint.detected and fingerprint.healthy))
        yield detected
        yield healthy

    def _supervisor(self) -> Iterator[Metric]:
        try:
            figures = self._client.supervisor.figures()
        except SupervisorError as exc:  # it went away: its tasks' events say so
            log.warning("metrics: the supervisor does not answer: %s", exc)
            return
        if figures is None:
            return  # not started yet (no task has run)
        processes = GaugeMetricFamily("herder_supervisor_processes",
                                      "Processes of the supervisor: running, or exited and not yet collected.",
                                      labels=["state"])
        processes.add_metric(["running"], figures.running)
        processes.add_metric(["exited"], figures.exited)
        yield processes
        if figures.logged_bytes is not None:
            yield CounterMetricFamily("herder_supervisor_logged_bytes",
                                      "Bytes of task output the supervisor took into the log files.",
                                      value=figures.logged_bytes)

    def _state_store(self) -> Iterator[Metric]:
        done = self._client.store.transactions
        family = CounterMetricFamily("herder_state_transactions", "Transactions of the state database.",
                                     labels=["outcome"])
        family.add_metric(["committed"], done.committed)
        family.add_metric(["failed"], done.failed)
        yield family
        yield SummaryMetricFamily("herder_state_transaction_seconds",
                                  "Time of the state database's transactions, from BEGIN to their end.",
                                  count_value=done.committed + done.failed, sum_value=done.seconds)
