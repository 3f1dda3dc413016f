"""Templates: configuration files rendered into the task directory before it starts.

A built-in lifecycle plugin, run after artifacts in ``herder_task_prestart``
(so a template's ``source`` may come from an artifact). Each ``template``
stanza is rendered with Go's text/template language (:mod:`.gotemplate`)
and consul-template's functions (:mod:`.template_functions`: ``env``,
``file``, ``key``, ``keyOrDefault``, ``keyExists``, ``service``,
``services``, ``nomadService``, ``nomadServices``, ``toUpper``, ``toLower``, ``toTitle``, ``toJSON``, ``split``,
``join``, ``replaceAll``, ``trimSpace``, ``contains``, ``parseInt``,
``parseFloat``, ``parseBool``, ``base64Encode``, ``base64Decode``,
``timestamp``), written atomically with
its ``perms`` (default 0640; never setuid, setgid or sticky) and owned by the
task's user; with ``env = true`` its ``KEY=value`` lines join the task's
environment.

The task can write the directories templates are read from and rendered
into: every file is reached through :mod:`herder.sdk.safefs`, and a link on
the way (``local/d`` swapped for a link to ``/etc``) is refused, never
followed. In prestart that fails the task with the path named; in a
re-render it is a ``Template`` event, the template is left as it was and the
task runs on.

A template that refers to something not there yet (a key, a file, a service
without healthy instances) is not rendered empty: prestart waits, with a
``Template`` event naming what is missing (``Missing: kv.block(app/port)``),
until it appears or the task is stopped.

While the task runs, what each template read is watched (every
``poll_interval``); when it changes, the template is rendered again and, if
the file changed, its ``change_mode`` applied after a random share of its
``splay``: ``restart`` restarts the task, ``signal`` sends ``change_signal``,
``noop`` does nothing.
"""

from __future__ import annotations

import logging
import os
import random
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from herder import hookimpl
from herder.client.config import Config
from herder.client.hooks.gotemplate import MAX_OUTPUT, MAX_SECONDS, TemplateError
from herder.client.hooks.gotemplate import Template as GoTemplate
from herder.client.hooks.template_functions import FUNCTION_NAMES, Dependency, Reader
from herder.client.hooks.template_sources import (
    ConsulCatalog,
    ConsulKV,
    EmptyCatalog,
    KeyValueStore,
    LocalCatalog,
    NativeCatalog,
    NoKeyValueStore,
    ServiceCatalog,
    SourceError,
)
from herder.client.taskdir import Owner, task_owner
from herder.context import TaskContext
from herder.deadline import TimeLimitExceeded, time_limit
from herder.errors import ConfigError, HerderError, RecoverableError
from herder.model import Task, Template
from herder.objects import ExitResult, TaskHandle, parse_signal
from herder.sdk.durations import parse_duration
from herder.sdk.paths import locate_in_task_dir
from herder.sdk.safefs import UnsafePathError, open_beneath, open_file, read_file, safe_root, write_atomic
from herder.services import Backend
from herder.services.local import LocalRegistry

log = logging.getLogger(__name__)

TEMPLATE_EVENT = "Template"
"""Nomad's event type for what templates wait for and re-render."""


class TaskControl(Protocol):
    """What the plugin needs of a running task: the client's task runner."""

    @property
    def stopping(self) -> bool: ...

    def restart(self, reason: str = "") -> None: ...

    def signal(self, sig: int) -> None: ...


Runners = Callable[[TaskContext], TaskControl | None]
"""Finds the task runner of a task context (None when it is gone)."""


class TemplateRenderError(HerderError):
    """A template cannot be rendered: its text is wrong, or what it reads is."""


@dataclass(frozen=True)
class TemplatesConfig:
    """``[plugin.templates]``: how often what templates read is looked at again."""

    poll_interval: float = 1.0

    @classmethod
    def from_table(cls, table: dict[str, Any]) -> TemplatesConfig:
        unknown = sorted(set(table) - {"poll_interval"})
        if unknown:
            raise ConfigError(f"unknown key(s) in [plugin.templates]: {', '.join(unknown)}")
        try:
            interval = parse_duration(table.get("poll_interval", cls.poll_interval))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"[plugin.templates] poll_interval: {exc}") from None
        if interval <= 0:
            raise ConfigError("[plugin.templates] poll_interval must be positive")
        return cls(poll_interval=interval)


@dataclass
class _Rendered:
    """One template's last render: its text and what it read."""

    template: Template
    content: str
    deps: dict[Dependency, Any]


@dataclass
class _Watched:
    task: Task
    ctx: TaskContext
    rendered: list[_Rendered]
    running: bool = False
    timers: list[threading.Timer] = field(default_factory=list)
    failure: str = ""
    """The last re-render failure told in an event: the same one is not told again every poll."""


def _split_query(query: str) -> tuple[str, str]:
    """``tag.name@dc`` -> (name, tag); the datacenter is the agent's own."""
    name = query.split("@", 1)[0]
    tag, _, rest = name.rpartition(".")
    return (rest, tag) if tag else (name, "")


PARSED_CACHE_SIZE = 256
"""How many parsed templates the plugin keeps: past it, the one parsed first is dropped."""


# -- env files ------------------------------------------------------------------------

_ENV_LINE = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=\s*(.*)$")


def parse_env_file(text: str, where: str) -> dict[str, str]:
    """``KEY=value`` lines (blank lines and ``#`` comments skipped, values optionally quoted).

    :raises TemplateRenderError: a line that is not one.
    """
    env: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _ENV_LINE.match(stripped)
        if match is None:
            raise TemplateRenderError(f"{where}: line {number} is not KEY=value: {stripped[:60]!r}")
        key, value = match.groups()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
            if match.group(2)[0] == '"':
                value = value.encode().decode("unicode_escape")
        env[key] = value
    return env


# -- the plugin ----------------------------------------------------------------------

class TemplatesPlugin:
    """The built-in ``templates`` lifecycle plugin."""

    name = "templates"

    def __init__(self, config: TemplatesConfig | None = None, *, kv: KeyValueStore | None = None,
                 catalog: ServiceCatalog | None = None, native: NativeCatalog | None = None,
                 runners: Runners | None = None) -> None:
        self.config = config or TemplatesConfig()
        self.kv: KeyValueStore = kv or NoKeyValueStore()
        self.catalog: ServiceCatalog = catalog or EmptyCatalog()
        self.native = native
        self.runners: Runners = runners or (lambda ctx: None)
        self._watched: dict[tuple[str, str], _Watched] = {}
        self._cache: dict[tuple[str, str, str, str], GoTemplate] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """The watcher starts with the first running task that has templates."""

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            watched = list(self._watched.values())
            self._watched.clear()
        for entry in watched:
            for timer in entry.timers:
                timer.cancel()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for source in (self.kv, self.catalog):
            close = getattr(source, "close", None)
            if close is not None:
                close()

    # -- reading -------------------------------------------------------------------

    def lookup(self, kind: str, arg: str, ctx: TaskContext) -> Any:
        """The current value of one dependency; None when it is not there."""
        try:
            if kind == "kv":
                return self.kv.get(arg)
            if kind == "service":
                name, tag = _split_query(arg)
                return tuple(self.catalog.service(name, tag))
            if kind == "services":
                return tuple(self.catalog.services())
            if kind in ("nomad.service", "nomad.services"):
                return self._native(kind, arg)
        except SourceError as exc:
            log.info("template source unavailable: %s", exc)
            return None
        if kind in ("file", "source"):
            try:
                root, relative = locate_in_task_dir(ctx.task_dir, arg)
                with safe_root(root) as fd:
                    return read_file(fd, relative, limit=MAX_OUTPUT).decode("utf-8")
            except (ValueError, UnsafePathError) as exc:  # UnicodeDecodeError is a ValueError
                raise TemplateRenderError(f"{kind}({arg}): {exc}") from None
            except OSError:
                return None
        raise ValueError(f"unknown dependency kind {kind!r}")

    def _native(self, kind: str, arg: str) -> tuple[Any, ...]:
        if self.native is None:
            return ()
        if kind == "nomad.services":
            return tuple(self.native.services())
        query, _, chosen = arg.partition("|")  # the query has no "|" (checked when it was read)
        name, tag = _split_query(query)
        count, _, key = chosen.partition("|")
        return tuple(self.native.service(name, tag, int(count or 0), key))

    def render(self, template: Template, ctx: TaskContext) -> tuple[str, dict[Dependency, Any], list[str]]:
        """Render one template: its text, what it read, and what is missing."""
        reader = Reader(self.lookup, ctx)
        text = template.data
        where = f"template {template.destination}"
        if template.source:
            source = reader.read("source", template.source)
            if source is None:
                return "", reader.deps, [f"source({template.source})"]
            text = source
        try:
            with time_limit(MAX_SECONDS, "rendering the template"):
                parsed = self._parsed(text, template)
                content = parsed.execute(None, reader.functions())
        except (TemplateError, TimeLimitExceeded) as exc:
            raise TemplateRenderError(f"{where}: {exc}") from None
        except RecursionError:
            raise TemplateRenderError(f"{where}: the template is nested too deeply") from None
        return content, reader.deps, reader.missing

    def _parsed(self, text: str, template: Template) -> GoTemplate:
        """The parsed template, kept: a re-render or a restart only executes it again."""
        key = (text, template.destination, template.left_delimiter, template.right_delimiter)
        with self._lock:
            parsed = self._cache.get(key)
        if parsed is None:
            parsed = GoTemplate(text, name=template.destination, left=template.left_delimiter,
                                right=template.right_delimiter, functions=FUNCTION_NAMES)
            with self._lock:
                if len(self._cache) >= PARSED_CACHE_SIZE:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[key] = parsed
        return parsed

    def _write(self, template: Template, content: str, ctx: TaskContext, owner: Owner | None) -> bool:
        """Write the rendered file atomically; False when it already had this content.

        Missing directories on the way are made 0755 for ``owner``. The file
        belongs to ``owner`` (the task's user) or, for a task without one, to
        the owner of the directory it is in: a driver that gave the task its
        directories (exec's ``nobody``) keeps the task able to read it.

        :raises TemplateRenderError: the destination leaves the task directory,
            or a link or a file is in its way.
        """
        data = content.encode()
        mode = int(template.perms, 8) & 0o777  # validation refuses more; never apply setuid, setgid or sticky
        try:
            root, relative = locate_in_task_dir(ctx.task_dir, template.destination)
            directory, _, name = relative.rpartition("/")
            with safe_root(root) as root_fd, open_beneath(root_fd, directory, create=0o755, owner=owner) as fd:
                if owner is None and os.geteuid() == 0:
                    info = os.fstat(fd)
                    owner = (info.st_uid, info.st_gid)
                if _has_content(fd, name, data, mode, owner):
                    return False
                write_atomic(fd, name, data, mode=mode, owner=owner)
        except (ValueError, UnsafePathError) as exc:
            raise TemplateRenderError(f"template {template.destination}: {exc}") from None
        return True

    # -- hooks ---------------------------------------------------------------------

    @hookimpl
    def herder_task_prestart(self, task: Task, ctx: TaskContext) -> None:
        if not task.templates:
            return
        announced: list[str] = []
        while True:
            rendered: list[_Rendered] = []
            missing: list[str] = []
            for template in task.templates:
                content, deps, absent = self.render(template, ctx)
                missing.extend(absent)
                rendered.append(_Rendered(template, content, deps))
            if not missing:
                break
            if missing != announced:
                ctx.emit_event(TEMPLATE_EVENT, f"Missing: {', '.join(missing)}", missing=missing)
                announced = missing
            runner = self.runners(ctx)
            if self._closed.wait(self.config.poll_interval) or (runner is not None and runner.stopping):
                raise RecoverableError("stopped while templates waited for: " + ", ".join(missing))
        owner = task_owner(task.user)
        for entry in rendered:
            self._write(entry.template, entry.content, ctx, owner)
            if entry.template.env:
                ctx.env.update(parse_env_file(entry.content, f"template {entry.template.destination}"))
        with self._lock:
            self._watched[_key(ctx)] = _Watched(task, ctx, rendered)

    @hookimpl
    def herder_task_poststart(self, task: Task, ctx: TaskContext, handle: TaskHandle) -> None:
        if not task.templates:
            return
        with self._lock:
            entry = self._watched.get(_key(ctx))
        if entry is None:
            # A task found running after herder restarted had no prestart here: learn what
            # its templates read now, so that a change from here on is seen.
            rendered = [_Rendered(t, *self.render(t, ctx)[:2]) for t in task.templates]
            entry = _Watched(task, ctx, rendered)
        with self._lock:
            self._watched[_key(ctx)] = entry
            entry.running = True
            if self._thread is None and not self._closed.is_set():
                self._thread = threading.Thread(target=self._watch, name="templates", daemon=True)
                self._thread.start()

    @hookimpl
    def herder_task_exited(self, task: Task, ctx: TaskContext, result: ExitResult) -> None:
        self._forget(ctx)

    @hookimpl
    def herder_task_cleanup(self, task: Task, ctx: TaskContext) -> None:
        self._forget(ctx)

    def _forget(self, ctx: TaskContext) -> None:
        with self._lock:
            entry = self._watched.pop(_key(ctx), None)
        if entry is not None:
            for timer in entry.timers:
                timer.cancel()

    # -- watching --------------------------------------------------------------------

    def _watch(self) -> None:
        while not self._closed.wait(self.config.poll_interval):
            with self._lock:
                entries = [entry for entry in self._watched.values() if entry.running]
            for entry in entries:
                try:
                    self._check(entry)
                except Exception as exc:  # one task's template must not stop the others' watching
                    failure = f"Template failed to re-render: {exc}"
                    if failure != entry.failure:
                        entry.ctx.emit_event(TEMPLATE_EVENT, failure)
                        entry.failure = failure
                else:
                    entry.failure = ""

    def _check(self, entry: _Watched) -> None:
        changed: list[Template] = []
        for index, rendered in enumerate(entry.rendered):
            if all(self.lookup(kind, arg, entry.ctx) == value for (kind, arg), value in rendered.deps.items()):
                continue
            content, deps, missing = self.render(rendered.template, entry.ctx)
            if missing:
                continue  # keep the last good file until what it needs is back
            entry.rendered[index] = _Rendered(rendered.template, content, deps)
            if self._write(rendered.template, content, entry.ctx, task_owner(entry.task.user)):
                changed.append(rendered.template)
        if not changed:
            return
        restart = [t for t in changed if t.change_mode == "restart"]
        signals = sorted({t.change_signal for t in changed if t.change_mode == "signal"})
        names = ", ".join(t.destination for t in changed)
        if not restart and not signals:
            entry.ctx.emit_event(TEMPLATE_EVENT, f"Template re-rendered: {names}")
            return
        splay = random.uniform(0, max(t.splay for t in (restart or changed)))

        def apply() -> None:
            runner = self.runners(entry.ctx)
            if runner is None or runner.stopping:
                return
            if restart:
                runner.restart(f"Template with change_mode restart re-rendered: {names}")
            else:
                for sig in signals:
                    runner.signal(parse_signal(sig))

        timer = threading.Timer(splay, apply)
        timer.daemon = True
        entry.timers = [t for t in entry.timers if t.is_alive()] + [timer]
        entry.ctx.emit_event(TEMPLATE_EVENT, f"Template re-rendered: {names}", splay=round(splay, 3))
        timer.start()


def template_sources(config: Config, backend: Backend) -> tuple[KeyValueStore, ServiceCatalog]:
    """The KV store and service catalog of the configured services ``backend``."""
    if config.services_backend == "consul":
        address = str(config.consul.get("address", "127.0.0.1:8500"))
        token = str(config.consul.get("token", ""))
        return ConsulKV(address, token), ConsulCatalog(address, token)
    if isinstance(backend, LocalRegistry):
        return NoKeyValueStore(), LocalCatalog(backend)
    return NoKeyValueStore(), EmptyCatalog()


def _key(ctx: TaskContext) -> tuple[str, str]:
    return (ctx.alloc_id, ctx.task_name)


def _has_content(dir_fd: int, name: str, data: bytes, mode: int, owner: Owner | None) -> bool:
    """Whether ``name`` in ``dir_fd`` is already a regular file with ``data``, ``mode`` and ``owner``."""
    try:
        fd = open_file(dir_fd, name)
    except (OSError, UnsafePathError):  # missing, or a link or directory the write replaces or refuses
        return False
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        if info.st_mode & 0o7777 != mode or (owner is not None and (info.st_uid, info.st_gid) != owner):
            return False
        return file.read(len(data) + 1) == data

