"""The Nomad task driver ``herder``: Nomad's base plugin and driver gRPC services over herder.

A Nomad job task says ``driver = "herder"`` and ``config { driver = "<herder
driver>"  config = { ... } }``; this service runs it through that herder
driver and herder's lifecycle plugins (see :mod:`herder_nomad.tasks`).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import grpc
from google.protobuf import any_pb2, timestamp_pb2
from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped]
from grpc_status import rpc_status

from herder import CreatedResources, DriverError, ExecSession, ExitResult, RecoverableError, Task, TaskEvent, TaskHandle
from herder.app.nomad import (
    STATE_FILE,
    Config,
    DeferredCleanups,
    Failed,
    Hooks,
    StateError,
    StatsSampler,
    Store,
    Supervisor,
    TaskLifecycle,
    load_hooks,
    parse_signal,
)
from herder_nomad import cty, hclspec, tasks
from herder_nomad.allocs import Allocations
from herder_nomad.identity import PluginIdentity, plugin_version
from herder_nomad.tasks import NomadTask
from herder_nomad.wire import (
    attribute_pb2,
    base_pb2,
    driver_pb2,
    driver_pb2_grpc,
    recoverable_error_pb2,
)

log = logging.getLogger(__name__)

FINGERPRINT_INTERVAL = 30.0
EXEC_TIMEOUT = 24 * 3600.0
"""An exec Nomad gives no timeout (``nomad alloc exec``): herder's exec hook needs one."""

PLUGIN_CONFIG_TYPE: cty.CtyType = ["object", {"data_dir": "string", "disabled_plugins": ["list", "string"],
                                              "plugin": "dynamic"}]
PLUGIN_TABLES_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "object"}}
TASK_CONFIG_TYPE: cty.CtyType = ["object", {"driver": "string", "config": "dynamic"}]
NOMADS_OWN = frozenset({"Task Setup", "Started", "Terminated", "Killed"})
"""The events Nomad records of a task on its own: the plugin's would be told twice."""


def default_data_dir() -> Path:
    """Where the plugin keeps herder's supervisor when the plugin block names no ``data_dir``."""
    if os.geteuid() == 0:
        return Path("/var/lib/herder/nomad")
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "herder" / "nomad"


def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    context.abort(code, message)
    raise AssertionError("unreachable")  # abort raises


def _abort_recoverable(context: grpc.ServicerContext, message: str) -> NoReturn:
    """What Nomad reads as a recoverable error: FAILED_PRECONDITION with a RecoverableError detail."""
    detail = any_pb2.Any()
    detail.Pack(recoverable_error_pb2.RecoverableError(recoverable=True))
    status = status_pb2.Status(code=code_pb2.FAILED_PRECONDITION, message=message, details=[detail])
    context.abort_with_status(rpc_status.to_status(status))
    raise AssertionError("unreachable")


def _timestamp(when: datetime | None) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    if when is not None:
        stamp.FromDatetime(when)
    return stamp


def _exit_result(result: ExitResult) -> driver_pb2.ExitResult:
    return driver_pb2.ExitResult(exit_code=result.exit_code, signal=result.signal, oom_killed=result.oom_killed)


class HerderDriver(PluginIdentity, driver_pb2_grpc.DriverServicer):
    """Both services of the plugin, sharing herder's plugins, the supervisor and the tasks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.hooks: Hooks | None = None
        self.data_dir = default_data_dir()
        self.supervisor: Supervisor | None = None
        self.tasks: dict[str, NomadTask] = {}
        self.events = tasks.EventHub()
        self.allocs = Allocations()
        self.later: DeferredCleanups | None = None
        """The cleanup steps left for later, in ``state.db`` of the data dir: made by ``SetConfig``."""
        self.sampler = StatsSampler()
        self.stopping = threading.Event()
        """Set when the plugin stops: every wait ends (the lifecycle's waits among them)."""

    # -- base plugin ----------------------------------------------------------

    def SetConfig(self, request: base_pb2.SetConfigRequest, context: grpc.ServicerContext) -> Any:
        try:
            config = cty.decode(request.msgpack_config, PLUGIN_CONFIG_TYPE) or {}
        except cty.CtyError as err:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"plugin \"herder\" config: {err}")
        tables = as_objects(config.get("plugin") or {}, PLUGIN_TABLES_SCHEMA)
        if not isinstance(tables, dict) or not all(isinstance(t, dict) for t in tables.values()):
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT,
                   'plugin "herder" config.plugin: expected an object of plugin tables, '
                   'like { raw_exec = { enabled = true } }')
        # As in Nomad and in herder's agent, raw_exec (tasks as the agent's own user) is off unless enabled.
        tables = {**tables, "raw_exec": {"enabled": False, **tables.get("raw_exec", {})}}
        data_dir = Path(config["data_dir"]).absolute() if config.get("data_dir") else self.data_dir
        hooks = load_hooks(Config(data_dir=data_dir, plugin=tables,
                                  disabled_plugins=frozenset(config.get("disabled_plugins") or ())))
        for record in hooks.plugins.records:
            if record.error:
                log.warning("herder plugin %s (%s %s) was not loaded: %s", record.name, record.distribution,
                            record.version, record.error)
        try:
            later = self._deferred_cleanups(data_dir, hooks)
        except (OSError, StateError) as err:
            _abort(context, grpc.StatusCode.FAILED_PRECONDITION, f"plugin \"herder\" data_dir {data_dir}: {err}")
        with self._lock:
            self.hooks = hooks
            self.data_dir = data_dir
            previous, self.later = self.later, later
        if previous is not None:
            previous.stop()
            previous.store.close()
        later.start()
        return base_pb2.SetConfigResponse()

    def _deferred_cleanups(self, data_dir: Path, hooks: Hooks) -> DeferredCleanups:
        """The cleanup steps left for later (:class:`herder.CleanupLater`), kept in ``state.db`` in the
        data dir as herder's own: a step left by an earlier plugin process runs when due, or at once
        when overdue, once started."""
        data_dir.mkdir(parents=True, exist_ok=True)
        store = Store(data_dir / STATE_FILE)
        return DeferredCleanups(store, hooks, lambda stored: tasks.rebuild(stored, self._supervisor()))

    # -- driver description -----------------------------------------------------

    def TaskConfigSchema(self, request: driver_pb2.TaskConfigSchemaRequest, context: grpc.ServicerContext) -> Any:
        # hclspec has no free-form block: the herder driver's config is an attribute of type any.
        return driver_pb2.TaskConfigSchemaResponse(spec=hclspec.obj({
            "driver": hclspec.attr("driver", "string", required=True),
            "config": hclspec.attr("config", "any"),
        }))

    def Capabilities(self, request: driver_pb2.CapabilitiesRequest, context: grpc.ServicerContext) -> Any:
        # Isolation is each herder driver's business (docker and exec mount the task dirs themselves):
        # Nomad builds plain task dirs with host paths, and the driver maps them.
        return driver_pb2.CapabilitiesResponse(capabilities=driver_pb2.DriverCapabilities(
            send_signals=True, exec=True, fs_isolation=driver_pb2.DriverCapabilities.NONE,
            network_isolation_modes=[driver_pb2.NetworkIsolationSpec.HOST]))

    def Fingerprint(self, request: driver_pb2.FingerprintRequest,
                    context: grpc.ServicerContext) -> Iterator[driver_pb2.FingerprintResponse]:
        last: bytes | None = None
        while context.is_active() and not self.stopping.is_set():
            response = self._fingerprint()
            encoded = response.SerializeToString(deterministic=True)
            if encoded != last:
                last = encoded
                yield response
            self.stopping.wait(FINGERPRINT_INTERVAL)

    def _fingerprint(self) -> driver_pb2.FingerprintResponse:
        hooks = self.hooks
        if hooks is None:
            return driver_pb2.FingerprintResponse(health=driver_pb2.FingerprintResponse.UNDETECTED,
                                                  health_description="not configured yet")
        attributes = {"driver.herder.version": attribute_pb2.Attribute(string_val=plugin_version())}
        healthy, unhealthy = [], []
        for name in hooks.drivers:
            fingerprint = hooks.fingerprint(name)
            prefix = f"driver.herder.{name}"
            attributes[prefix] = attribute_pb2.Attribute(bool_val=fingerprint.detected and fingerprint.healthy)
            attributes[f"{prefix}.detected"] = attribute_pb2.Attribute(bool_val=fingerprint.detected)
            attributes[f"{prefix}.healthy"] = attribute_pb2.Attribute(bool_val=fingerprint.healthy)
            for key, value in fingerprint.attributes.items():
                suffix = key.removeprefix(f"driver.{name}.")
                attributes[f"{prefix}.{suffix}"] = attribute_pb2.Attribute(string_val=str(value))
            if fingerprint.detected and fingerprint.healthy:
                healthy.append(name)
            else:
                unhealthy.append(f"{name} ({fingerprint.description})")
        description = f"healthy drivers: {', '.join(healthy) or 'none'}"
        if unhealthy:
            description += f"; unavailable: {', '.join(unhealthy)}"
        health = (driver_pb2.FingerprintResponse.HEALTHY if healthy
                  else driver_pb2.FingerprintResponse.UNHEALTHY)
        return driver_pb2.FingerprintResponse(attributes=attributes, health=health, health_description=description)

    # -- starting and recovering --------------------------------------------------

    def _hooks(self, context: grpc.ServicerContext) -> Hooks:
        if self.hooks is None:
            _abort(context, grpc.StatusCode.FAILED_PRECONDITION, "the herder plugin is not configured yet")
        return self.hooks

    def _later(self) -> DeferredCleanups:
        assert self.later is not None, "a task is started only once SetConfig made the deferred cleanups"
        return self.later

    def _supervisor(self) -> Supervisor:
        with self._lock:
            if self.supervisor is None:
                self.data_dir.mkdir(parents=True, exist_ok=True)
                # keep: tasks outlive this plugin process; a restarted Nomad client recovers them.
                self.supervisor = Supervisor(self.data_dir, session=f"nomad-{os.getpid()}", keep=True)
            return self.supervisor

    def _decode_task(self, config: driver_pb2.TaskConfig, hooks: Hooks, context: grpc.ServicerContext) -> Task:
        """The task of the herder driver, its config shaped by the driver's schema (the script checks it
        against the schema); errors name the path."""
        where = tasks.config_path(config)
        try:
            decoded = cty.decode(config.msgpack_driver_config, TASK_CONFIG_TYPE) or {}
        except cty.CtyError as err:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{where}: {err}")
        driver, driver_config = decoded.get("driver") or "", decoded.get("config")
        if driver_config is None:
            driver_config = {}
        if isinstance(driver_config, list) and driver_config and all(isinstance(x, dict) for x in driver_config):
            driver_config = _merged(driver_config)
        if not isinstance(driver_config, dict):
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT,
                   f"{where}.config: expected an object, like config = {{ image = \"...\" }}")
        if driver not in hooks.drivers:
            unavailable = hooks.plugins.unavailable()
            reason = (f"is {unavailable[driver]}" if driver in unavailable
                      else f"is not a herder driver (available: {', '.join(sorted(hooks.drivers)) or 'none'})")
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{where}.driver: {driver!r} {reason}")
        try:
            schema = hooks.task_schema(driver)
        except Exception as err:
            _abort(context, grpc.StatusCode.FAILED_PRECONDITION, f"{where}.driver: {err}")
        return tasks.build_task(config, driver, as_objects(driver_config, schema))

    def _emitter(self, config: driver_pb2.TaskConfig, hooks: Hooks, holder: list[NomadTask]) -> Any:
        def emit(event: TaskEvent) -> None:
            if holder:
                hooks.task_event(holder[0].task, holder[0].ctx, event)
            if event.type in NOMADS_OWN:
                return
            annotations = {key: str(value) for key, value in event.details.items()}
            message = f"{event.type}: {event.message}" if event.type != "Driver" and event.message else (
                event.message or event.type)
            self.events.publish(driver_pb2.DriverTaskEvent(
                task_id=config.id, alloc_id=config.alloc_id, task_name=config.name,
                timestamp=_timestamp(event.time), message=message, annotations=annotations))
        return emit


    def StartTask(self, request: driver_pb2.StartTaskRequest, context: grpc.ServicerContext) -> Any:
        hooks = self._hooks(context)
        config = request.task
        if config.id in self.tasks:
            _abort(context, grpc.StatusCode.ALREADY_EXISTS, f"task {config.id} is already started")
        task = self._decode_task(config, hooks, context)
        prerun_failed = self.allocs.starting(hooks, config, task)
        if prerun_failed is not None:
            _abort(context, grpc.StatusCode.INTERNAL, prerun_failed)
        holder: list[NomadTask] = []
        try:
            ctx = tasks.build_context(config, self._supervisor(), self._emitter(config, hooks, holder))
        except OSError as err:
            self.allocs.destroyed(hooks, config)
            _abort(context, grpc.StatusCode.FAILED_PRECONDITION, f"cannot open the task's log FIFOs: {err}")
        running = NomadTask(id=config.id, lifecycle=TaskLifecycle(hooks, task, ctx, interrupt=self.stopping),
                            config=config)
        holder.append(running)
        failed = tasks.start(running)
        if failed is not None:
            tasks.cleanup(running, self._later())
            if not isinstance(failed.error, RecoverableError):  # else Nomad starts the task again
                self.allocs.destroyed(hooks, config)
            self._refuse(failed, running, context)
        self.tasks[config.id] = running
        return driver_pb2.StartTaskResponse(
            result=driver_pb2.StartTaskResponse.SUCCESS, handle=self._handle(config, running),
            network_override=self._network(running))

    @staticmethod
    def _refuse(failed: Failed, running: NomadTask, context: grpc.ServicerContext) -> NoReturn:
        """Answer a ``StartTask`` whose task did not start: as Nomad reads each failure."""
        error, task = failed.error, running.task
        if failed.errors:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, failed.message)
        if isinstance(error, RecoverableError):
            _abort_recoverable(context, f"herder {task.driver}: {error}")
        if running.lifecycle.step.hook == "herder_driver_task_schema":
            _abort(context, grpc.StatusCode.FAILED_PRECONDITION, f"{tasks.config_path(running.config)}.driver: {error}")
        _abort(context, grpc.StatusCode.INTERNAL, failed.message if isinstance(error, DriverError | None)
               else running.lifecycle.hooks.describe_failure(running.lifecycle.step.hook, error))

    def _handle(self, config: driver_pb2.TaskConfig, running: NomadTask) -> driver_pb2.TaskHandle:
        return driver_pb2.TaskHandle(version=tasks.DRIVER_STATE_VERSION, config=config, state=driver_pb2.RUNNING,
                                     driver_state=json.dumps(running.driver_state()).encode())

    @staticmethod
    def _network(running: NomadTask) -> driver_pb2.NetworkOverride | None:
        network = running.handle.network if running.handle is not None else None
        if network is None:
            return None
        return driver_pb2.NetworkOverride(port_map=dict(network.port_map), addr=network.ip or "",
                                          auto_advertise=network.auto_advertise)

    def RecoverTask(self, request: driver_pb2.RecoverTaskRequest, context: grpc.ServicerContext) -> Any:
        hooks = self._hooks(context)
        config = request.handle.config
        task_id = request.task_id or config.id  # Nomad 1.1 sends the id in the handle's config only
        if task_id in self.tasks:
            return driver_pb2.RecoverTaskResponse()
        try:
            saved = json.loads(request.handle.driver_state)
        except ValueError:
            saved = None
        if not isinstance(saved, dict) or saved.get("version") != tasks.DRIVER_STATE_VERSION:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"task {task_id}: unreadable driver state")
        driver = saved["driver"]
        if driver not in hooks.drivers:
            _abort(context, grpc.StatusCode.FAILED_PRECONDITION,
                   f"task {task_id}: herder driver {driver!r} is not available")
        holder: list[NomadTask] = []
        created = CreatedResources([tuple(item) for item in saved.get("created", [])])
        try:
            ctx = tasks.build_context(config, self._supervisor(), self._emitter(config, hooks, holder), created)
        except OSError as err:
            _abort(context, grpc.StatusCode.FAILED_PRECONDITION, f"cannot open the task's log FIFOs: {err}")
        lifecycle = TaskLifecycle(hooks, tasks.build_task(config, driver, saved.get("config") or {}), ctx,
                                  interrupt=self.stopping)
        running = NomadTask(id=task_id, lifecycle=lifecycle, config=config,
                            started_at=datetime.fromisoformat(saved["started_at"]))
        holder.append(running)
        self.events.hold(task_id)  # Nomad takes the task's events once it has it back
        if not tasks.recover(running, saved["state"]):
            self.events.release(task_id)
            _abort(context, grpc.StatusCode.NOT_FOUND,
                   f"task {task_id}: herder's {driver} driver cannot find it any more")
        self.tasks[task_id] = running
        self.allocs.recovered(config, running.task)
        return driver_pb2.RecoverTaskResponse()

    # -- running tasks --------------------------------------------------------------

    def _task(self, task_id: str, context: grpc.ServicerContext) -> NomadTask:
        running = self.tasks.get(task_id)
        if running is None:
            _abort(context, grpc.StatusCode.NOT_FOUND, f"task {task_id} not found")
        return running

    def WaitTask(self, request: driver_pb2.WaitTaskRequest, context: grpc.ServicerContext) -> Any:
        running = self._task(request.task_id, context)
        self.events.release(running.id)  # Nomad waits for the task: it takes its events now
        while not tasks.exited_within(running, 1.0):
            if not context.is_active() or self.stopping.is_set():
                _abort(context, grpc.StatusCode.CANCELLED, "the wait was given up")
        assert running.result is not None
        return driver_pb2.WaitTaskResponse(result=_exit_result(running.result), err=running.result.error or "")

    def StopTask(self, request: driver_pb2.StopTaskRequest, context: grpc.ServicerContext) -> Any:
        running = self._task(request.task_id, context)
        try:
            # Nomad's convention: an empty signal means SIGINT.
            sig = parse_signal(request.signal) if request.signal else int(signal.SIGINT)
        except ValueError as err:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(err))
        timeout = request.timeout.ToTimedelta().total_seconds() if request.HasField("timeout") else 5.0
        try:
            tasks.stop(running, timeout, sig)
        except Exception as err:
            _abort(context, grpc.StatusCode.INTERNAL, f"stopping task {request.task_id}: {err}")
        return driver_pb2.StopTaskResponse()

    def DestroyTask(self, request: driver_pb2.DestroyTaskRequest, context: grpc.ServicerContext) -> Any:
        running = self.tasks.get(request.task_id)
        if running is None:
            return driver_pb2.DestroyTaskResponse()
        if running.running:
            if not request.force:
                _abort(context, grpc.StatusCode.FAILED_PRECONDITION,
                       f"task {request.task_id} is still running (destroy with force to kill it)")
            tasks.stop(running, 0.0, int(signal.SIGKILL))
        tasks.cleanup(running, self._later())
        self.tasks.pop(request.task_id, None)
        self.allocs.destroyed(running.lifecycle.hooks, running.config)
        return driver_pb2.DestroyTaskResponse()

    def InspectTask(self, request: driver_pb2.InspectTaskRequest, context: grpc.ServicerContext) -> Any:
        running = self._task(request.task_id, context)
        status = driver_pb2.TaskStatus(
            id=running.id, name=running.task.name,
            state=driver_pb2.EXITED if running.exited.is_set() else driver_pb2.RUNNING,
            started_at=_timestamp(running.started_at))
        if running.result is not None:
            status.completed_at.CopyFrom(_timestamp(running.completed_at))
            status.result.CopyFrom(_exit_result(running.result))
        network = self._network(running)
        return driver_pb2.InspectTaskResponse(
            task=status, driver=driver_pb2.TaskDriverStatus(attributes={"herder.driver": running.task.driver}),
            network_override=network)

    def TaskStats(self, request: driver_pb2.TaskStatsRequest,
                  context: grpc.ServicerContext) -> Iterator[driver_pb2.TaskStatsResponse]:
        running = self._task(request.task_id, context)
        interval = max(0.1, request.collection_interval.ToTimedelta().total_seconds() or 1.0)
        while context.is_active() and not running.exited.is_set() and not self.stopping.is_set():
            yield driver_pb2.TaskStatsResponse(stats=_stats(running, self.sampler))
            running.exited.wait(interval)

    def TaskEvents(self, request: driver_pb2.TaskEventsRequest,
                   context: grpc.ServicerContext) -> Iterator[driver_pb2.DriverTaskEvent]:
        q = self.events.subscribe()
        try:
            while context.is_active() and not self.stopping.is_set():
                try:
                    event = q.get(timeout=1.0)
                except Exception:  # queue.Empty: look at the context again
                    continue
                if event is None:
                    return
                yield event
        finally:
            self.events.unsubscribe(q)

    def SignalTask(self, request: driver_pb2.SignalTaskRequest, context: grpc.ServicerContext) -> Any:
        running = self._task(request.task_id, context)
        try:
            sig = parse_signal(request.signal)
        except ValueError as err:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(err))
        if running.handle is None or running.exited.is_set():
            _abort(context, grpc.StatusCode.FAILED_PRECONDITION, f"task {request.task_id} is not running")
        running.script.signal(running.handle, sig)
        return driver_pb2.SignalTaskResponse()

    def _runs(self, running: NomadTask, command: list[str], context: grpc.ServicerContext) -> TaskHandle:
        """The handle of a task an exec may go into (aborts the call otherwise)."""
        if running.handle is None or running.exited.is_set():
            _abort(context, grpc.StatusCode.FAILED_PRECONDITION, f"task {running.id} is not running")
        if not command:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "exec needs a command")
        return running.handle

    def ExecTask(self, request: driver_pb2.ExecTaskRequest, context: grpc.ServicerContext) -> Any:
        running = self._task(request.task_id, context)
        command = list(request.command)
        handle = self._runs(running, command, context)
        timeout = request.timeout.ToTimedelta().total_seconds() if request.HasField("timeout") else 0.0
        try:
            result = running.script.exec(handle, command, timeout or EXEC_TIMEOUT)
        except Exception as err:
            _abort(context, grpc.StatusCode.FAILED_PRECONDITION, str(err))
        # herder's exec gives stdout and stderr together: they come back as stdout.
        return driver_pb2.ExecTaskResponse(stdout=result.output, result=driver_pb2.ExitResult(
            exit_code=result.exit_code))

    def ExecTaskStreaming(self, request_iterator: Iterator[driver_pb2.ExecTaskStreamingRequest],
                          context: grpc.ServicerContext) -> Iterator[driver_pb2.ExecTaskStreamingResponse]:
        """``nomad alloc exec``: an interactive session in the task (``herder_task_exec_session``).
        Nomad's stream feeds its stdin and its terminal's size; its output goes back as it comes,
        then its exit code. The session ends, its command killed, when Nomad's stream does."""
        first = next(request_iterator, None)
        if first is None or not first.HasField("setup"):
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "exec stream: the first message must be its setup")
        running = self._task(first.setup.task_id, context)
        command = list(first.setup.command)
        handle = self._runs(running, command, context)
        try:
            session = running.script.exec_session(handle, command, first.setup.tty)
        except Exception as err:
            _abort(context, grpc.StatusCode.FAILED_PRECONDITION, str(err))
        threading.Thread(target=_feed, args=(request_iterator, session), name="exec-input", daemon=True).start()
        op = driver_pb2.ExecTaskStreamingIOOperation
        try:
            while (chunk := session.read()) is not None:
                stream, data = chunk
                yield (driver_pb2.ExecTaskStreamingResponse(stdout=op(data=data)) if stream == "stdout" else
                       driver_pb2.ExecTaskStreamingResponse(stderr=op(data=data)))
            yield driver_pb2.ExecTaskStreamingResponse(stdout=op(close=True))
            yield driver_pb2.ExecTaskStreamingResponse(stderr=op(close=True))
            code = session.wait()
            yield driver_pb2.ExecTaskStreamingResponse(exited=True, result=driver_pb2.ExitResult(
                exit_code=code if code is not None else -1))
        finally:
            session.close()

    # -- shutting down ---------------------------------------------------------------

    def close(self) -> None:
        """The plugin stops: tasks go on running (Nomad recovers them through a new plugin); cleanup
        steps not done yet stay in the state database, for the next plugin process."""
        self.stopping.set()
        if self.later is not None:
            self.later.stop()
            try:
                self.later.store.close()
            except StateError as err:  # its last writes are lost: a step done may be made again
                log.warning("the state of the cleanup steps left for later: %s", err)
        self.events.close()
        if self.supervisor is not None:
            self.supervisor.close()


def as_objects(value: Any, schema: dict[str, Any] | None) -> Any:
    """``value`` with each list of maps where ``schema`` wants an object made that object.

    Nomad stores an object in a task's config as a list of maps, the shape of
    HCL1's blocks (``config = { ... }`` and ``port_map { ... }`` both arrive as
    ``[{...}]``): the herder driver's schema tells which of them are objects.
    """
    if not isinstance(schema, dict):
        return value
    if _wants_object(schema) and isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        value = _merged(value)
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        return {key: as_objects(item, properties.get(key, extra if isinstance(extra, dict) else None))
                for key, item in value.items()}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [as_objects(item, schema["items"]) for item in value]
    return value


def _wants_object(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind and "array" not in kind)


def _merged(maps: list[dict[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for item in maps:
        merged.update(item)
    return merged


def _feed(requests: Iterator[driver_pb2.ExecTaskStreamingRequest], session: ExecSession) -> None:
    """Nomad's side of an exec stream into ``session``: stdin, its end, the terminal's size."""
    try:
        for request in requests:
            if request.HasField("stdin"):
                if request.stdin.data:
                    session.write(request.stdin.data)
                if request.stdin.close:
                    session.close_stdin()
            if request.HasField("tty_size"):
                session.resize(request.tty_size.width, request.tty_size.height)
    except grpc.RpcError:
        pass  # the stream ended (Nomad's client went away): the output side closes the session


def _measured(usage: Any, field: str, value: float | None, kind: int) -> None:
    """Set ``field`` of a MemoryUsage or CPUUsage and list it as measured, if the driver knows it."""
    if value is not None:
        setattr(usage, field, value)
        usage.measured_fields.append(kind)


def _stats(running: NomadTask, sampler: StatsSampler) -> driver_pb2.TaskStats:
    """The task's usage in Nomad's terms: the figures its driver knows, each listed as measured."""
    stats = sampler.sample({running.id: running.handle}).get(running.id) if running.handle is not None else None
    memory, cpu = driver_pb2.MemoryUsage(), driver_pb2.CPUUsage()
    if stats is not None:
        _measured(memory, "rss", stats.memory_rss_bytes, driver_pb2.MemoryUsage.RSS)
        _measured(memory, "usage", stats.memory_usage_bytes, driver_pb2.MemoryUsage.USAGE)
        _measured(cpu, "percent", stats.cpu_percent, driver_pb2.CPUUsage.PERCENT)
        _measured(cpu, "throttled_periods", stats.cpu_throttled_periods, driver_pb2.CPUUsage.THROTTLED_PERIODS)
        _measured(cpu, "throttled_time", stats.cpu_throttled_ns, driver_pb2.CPUUsage.THROTTLED_TIME)
    return driver_pb2.TaskStats(id=running.id, timestamp=_timestamp(datetime.now(UTC)),
                                agg_resource_usage=driver_pb2.TaskResourceUsage(cpu=cpu, memory=memory))
