"""The client's figures as Prometheus metric families, read when they are scraped.

Nothing is mirrored into gauges as things happen: :class:`ClientCollector`
reads the allocations, the tasks' usage, the drivers' fingerprints, the
service checks, the supervisor and the state store at each scrape, so a
figure is never stale and an allocation the garbage collector removed leaves
no series behind.

Reading the tasks' usage asks every driver (a process tree in ``/proc``, a
cgroup, a container engine). :class:`StatsReader` asks them on threads of its
own, at most once at a time per task, and waits for them at most
:data:`STATS_TIMEOUT`: a driver slow to answer leaves its tasks out of that
scrape rather than holding it up, and its slowness never piles up reads.
A task's CPU is the seconds it used, a counter whose ``rate()`` is its share
of a core over the window Prometheus chooses: not the sampler's percent,
which is over whatever time passed since anyone last asked.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, wait
from typing import TypeVar, get_args

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import Collector

from herder.client.alloc_runner import AllocRunner
from herder.client.client import Client
from herder.client.runtime import WorkerPool, shared_runtime
from herder.client.stats import StatsSampler
from herder.client.task_runner import TaskRunner
from herder.objects import TaskHandle, TaskStats
from herder.services import CRITICAL, PASSING, WARNING
from herder.state import AllocStatus, TaskState
from herder.supervisor import SupervisorError

log = logging.getLogger(__name__)

K = TypeVar("K")

STATS_TIMEOUT = 2.0
"""Seconds a scrape waits for the drivers to tell the tasks' usage."""
STATS_WORKERS = 4
"""Threads that read the tasks' usage: reads mostly wait on the kernel or a container engine."""
STATS_BATCH = 25
"""Tasks of one driver read one after the other by a worker."""

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


class StatsReader:
    """Reads running tasks' usage through a :class:`StatsSampler` for a scrape (see the module).

    The reads go to the workers in batches of at most :data:`STATS_BATCH` tasks of one driver: a
    handoff to a thread per task would cost more than most reads (a few files of ``/proc``), and a
    slow driver holds up no other driver's tasks.
    """

    def __init__(self, sampler: StatsSampler, *, timeout: float = STATS_TIMEOUT,
                 workers: int = STATS_WORKERS) -> None:
        self._sampler = sampler
        self._timeout = timeout
        self._pool = WorkerPool(workers, shared_runtime().timer, name="herder-metrics")
        self._reading: dict[int, Future[TaskStats | None]] = {}  # by the handle's id(), while it is read
        self._lock = threading.Lock()

    def read(self, handles: Mapping[K, tuple[str, TaskHandle]]) -> dict[K, TaskStats]:
        """The usage of the tasks of ``handles`` (each with its driver's name) whose driver told it
        within the timeout."""
        reads: dict[K, Future[TaskStats | None]] = {}
        batches: dict[str, list[tuple[TaskHandle, Future[TaskStats | None]]]] = {}
        with self._lock:
            for key, (driver, handle) in handles.items():
                read = self._reading.get(id(handle))
                if read is None:  # else the read still under way from an earlier scrape is awaited
                    read = self._reading[id(handle)] = Future()
                    batches.setdefault(driver, []).append((handle, read))
                reads[key] = read
        for batch in batches.values():
            for start in range(0, len(batch), STATS_BATCH):
                self._pool.submit(functools.partial(self._read, batch[start:start + STATS_BATCH]))
        wait(reads.values(), self._timeout)
        return {key: stats for key, read in reads.items() if read.done() and (stats := read.result()) is not None}

    def _read(self, batch: list[tuple[TaskHandle, Future[TaskStats | None]]]) -> None:
        sampled: dict[str, TaskStats | None] = {}
        try:
            # No second sample for a CPU percent: a scrape does not wait for one (the CPU seconds are there).
            sampled = self._sampler.sample({str(i): handle for i, (handle, _) in enumerate(batch)}, prime=False)
        finally:  # whatever happened, the scrape waiting for them is told
            with self._lock:
                for handle, _ in batch:
                    del self._reading[id(handle)]
            for i, (_, read) in enumerate(batch):
                read.set_result(sampled.get(str(i)))


class ClientCollector(Collector):
    """The figures of ``client``: its allocations and tasks, their usage (through ``stats``), its
    drivers, the service checks (``health``), its supervisor and its state store."""

    def __init__(self, client: Client, stats: StatsReader, health: Health) -> None:
        self._client = client
        self._stats = stats
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
        running: dict[tuple[AllocRunner, TaskRunner], tuple[str, TaskHandle]] = {}
        for alloc in allocs:
            for runner in alloc.tasks:
                restarts.add_metric(task_labels(alloc, runner), runner.status.restarts)
                if runner.status.state == "running" and (handle := runner.handle) is not None:
                    running[alloc, runner] = runner.task.driver, handle
        yield restarts
        usage = self._stats.read(running)
        for field, name, kind, help_text, factor in _USAGE:
            family = kind(name, help_text, labels=TASK_LABELS)
            for (alloc, runner), stats in usage.items():
                value = getattr(stats, field)
                if value is not None:
                    family.add_metric(task_labels(alloc, runner), value * factor)
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
