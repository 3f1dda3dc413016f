"""What a template can call: consul-template's functions, the bound ones and the pure ones.

A render binds the functions that read (``env``, ``file``, ``key``,
``keyOrDefault``, ``keyExists``, ``service``, ``services``, ``nomadService``,
``nomadServices``) to its task
through a :class:`Reader`, which records what each read, for the plugin
(:mod:`.templates`) to watch, and what is missing, for it to wait for. The
pure functions (string, number, JSON, base64, time and regexp helpers) are the
same for every render; those that multiply their input (``replaceAll``,
``join``) refuse a result over the output's bound before building it.
:data:`FUNCTION_NAMES` is every name a template may call, what parsing checks
names against. The ``nomadVar`` family is known, and refused when called:
herder has no variables store.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from herder.client.hooks.gotemplate import MAX_OUTPUT, TemplateError
from herder.context import TaskContext
from herder.jobspec.goregexp import compile_go, replace_all
from herder.services.native import REGION

Dependency = tuple[str, str]
"""What a render read: (``kv`` | ``file`` | ``service`` | ``services`` | ``nomad.service`` | ``nomad.services`` |
``source``, argument)."""

NOMAD_SERVICE_QUERY = re.compile(r"(?:(?P<tag>[\w=:.\-]+)\.)?(?P<name>[\w\-]+)(?:@(?P<region>[\w.\-]+))?", re.ASCII)
"""consul-template's ``nomadService`` argument: ``[tag.]name[@region]``."""

NOMAD_VARIABLE_FUNCTIONS = ("nomadVar", "nomadVarExists", "nomadVarList", "nomadVarListSafe")

Lookup = Callable[[str, str, TaskContext], Any]
"""The current value of one dependency of a task (None when it is not there): the plugin's ``lookup``."""


class Reader:
    """The template functions of one render, recording what they read and what is missing."""

    def __init__(self, lookup: Lookup, ctx: TaskContext) -> None:
        self.lookup = lookup
        self.ctx = ctx
        self.deps: dict[Dependency, Any] = {}
        self.missing: list[str] = []

    def _miss(self, what: str) -> None:
        if what not in self.missing:
            self.missing.append(what)

    def read(self, kind: str, arg: str) -> Any:
        value = self.lookup(kind, arg, self.ctx)
        self.deps[(kind, arg)] = value
        return value

    # -- consul-template's functions -----------------------------------------------

    def env(self, *names: str) -> Any:
        if not names:  # ``env.NAME``: herder's SPEC writes it so
            return dict(self.ctx.env)
        if len(names) != 1:
            raise ValueError(f"env takes one name, got {len(names)}")
        return self.ctx.env.get(names[0], "")

    def file(self, path: str) -> str:
        value = self.read("file", path)
        if value is None:
            self._miss(f"file({path})")
            return ""
        return str(value)

    def key(self, path: str) -> str:
        value = self.read("kv", path)
        if value is None:
            self._miss(f"kv.block({path})")
            return ""
        return str(value)

    def key_or_default(self, path: str, default: str) -> str:
        value = self.read("kv", path)
        return default if value is None else str(value)

    def key_exists(self, path: str) -> bool:
        return self.read("kv", path) is not None

    def service(self, query: str, *options: str) -> list[Any]:
        entries = self.read("service", query)
        if not entries:
            self._miss(f"health.service({query})")
            return []
        return list(entries)

    def services(self) -> list[Any]:
        return list(self.read("services", ""))

    # -- consul-template's Nomad functions -------------------------------------------

    def nomad_service(self, *params: Any) -> list[Any]:
        """``nomadService "[tag.]name"`` or ``nomadService COUNT KEY "[tag.]name"``: every instance, or the
        COUNT that rendezvous hashing picks for KEY. No instance is an empty list, not something missing:
        as in Nomad, a template is rendered (again) when the last instance goes."""
        if len(params) == 1:
            query, chosen = params[0], ""
        elif len(params) == 3:
            count, key, query = params
            if not isinstance(count, int) or isinstance(count, bool):
                raise ValueError("expected integer for <count> argument")
            if not isinstance(key, str):
                raise ValueError("expected string for <key> argument")
            chosen = f"|{count}|{key}"  # after the query, which has no "|" (a tag may have a ":")
        else:
            raise ValueError("expected arguments <service> or <count> <key> <service>")
        if not isinstance(query, str):
            raise ValueError("expected string for <service> argument")
        matched = NOMAD_SERVICE_QUERY.fullmatch(query)
        if not matched:
            raise ValueError(f"nomad.service: invalid format: {query!r}")
        _own_region("nomad.service", matched["region"])
        return list(self.read("nomad.service", query + chosen) or ())

    def nomad_services(self, *region: str) -> list[Any]:
        """``nomadServices``: every native service's name and tags (``"@region"``: the agent's own)."""
        if len(region) > 1 or (region and not re.fullmatch(r"@[\w.\-]+", str(region[0]), re.ASCII)):
            raise ValueError(f"nomad.services: invalid format: {''.join(map(str, region))!r}")
        _own_region("nomad.services", region[0][1:] if region else None)
        return list(self.read("nomad.services", "") or ())

    def functions(self) -> dict[str, Callable[..., Any]]:
        return {
            "env": self.env, "file": self.file, "key": self.key, "keyOrDefault": self.key_or_default,
            "keyExists": self.key_exists, "service": self.service, "services": self.services,
            "nomadService": self.nomad_service, "nomadServices": self.nomad_services, **PURE_FUNCTIONS,
        }


# -- pure functions ------------------------------------------------------------------

_GO_LAYOUT = re.compile(r"2006|January|Jan|Monday|Mon|MST|Z07:00|-07:00|-0700|15|06|01|02|03|04|05|PM|\.000|_2|1|2")
_STRFTIME = {"2006": "%Y", "January": "%B", "Jan": "%b", "Monday": "%A", "Mon": "%a", "MST": "%Z", "-0700": "%z",
             "15": "%H", "06": "%y", "01": "%m", "02": "%d", "03": "%I", "04": "%M", "05": "%S", "PM": "%p",
             "1": "%-m", "2": "%-d"}


def _go_time(moment: datetime, layout: str) -> str:
    """``moment`` in a Go time layout (``2006-01-02T15:04:05Z07:00``)."""
    def token(match: re.Match[str]) -> str:
        text = match.group()
        if text in ("Z07:00", "-07:00"):
            offset = moment.strftime("%z")
            return "Z" if text == "Z07:00" and offset in ("+0000", "") else f"{offset[:3]}:{offset[3:]}"
        if text == ".000":
            return f".{moment.microsecond // 1000:03d}"
        if text == "_2":
            return f"{moment.day:2d}"
        if text == "1":
            return str(moment.month)
        if text == "2":
            return str(moment.day)
        return moment.strftime(_STRFTIME[text])
    return _GO_LAYOUT.sub(token, layout)


def timestamp(*layout: str) -> str:
    """consul-template's ``timestamp``: now in UTC, RFC 3339 or a Go layout; ``"unix"`` for seconds."""
    now = datetime.now(UTC)
    if not layout:
        return _go_time(now, "2006-01-02T15:04:05Z07:00")
    if layout[0] == "unix":
        return str(int(now.timestamp()))
    return _go_time(now, layout[0])


def _to_json(value: Any, indent: int | None = None) -> str:
    def plain(item: Any) -> Any:
        if hasattr(item, "__dataclass_fields__"):
            return {name: plain(getattr(item, name)) for name in item.__dataclass_fields__}
        if isinstance(item, (list, tuple)):
            return [plain(i) for i in item]
        if isinstance(item, Mapping):
            return {str(k): plain(v) for k, v in item.items()}
        return item
    return json.dumps(plain(value), sort_keys=True, indent=indent, separators=None if indent else (",", ":"))


def _contains(needle: Any, haystack: Any) -> bool:
    return needle in haystack


PURE_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "toUpper": lambda s: str(s).upper(),
    "toLower": lambda s: str(s).lower(),
    "toTitle": lambda s: str(s).title(),
    "trimSpace": lambda s: str(s).strip(),
    "toJSON": _to_json,
    "toJSONPretty": lambda v: _to_json(v, indent=2),
    "split": lambda sep, s: str(s).split(sep) if s != "" else [],
    "join": lambda sep, items: _join(sep, items),
    "replaceAll": lambda old, new, s: _replace_all(old, new, str(s)),
    "contains": _contains,
    "in": lambda haystack, needle: needle in haystack,
    "parseInt": lambda s: int(str(s).strip(), 0),
    "parseFloat": lambda s: float(str(s).strip()),
    "parseBool": lambda s: {"1": True, "t": True, "true": True, "0": False, "f": False, "false": False}[
        str(s).strip().lower()],
    "base64Encode": lambda s: base64.b64encode(str(s).encode()).decode(),
    "base64Decode": lambda s: base64.b64decode(str(s)).decode(),
    "timestamp": timestamp,
    # Go's regexp (RE2, linear time), as consul-template has them: the pattern comes first.
    "regexMatch": lambda pattern, s: compile_go(str(pattern)).search(str(s)) is not None,
    "regexReplaceAll": lambda pattern, replacement, s: replace_all(str(pattern), str(s), str(replacement),
                                                                   MAX_OUTPUT),
}


def _join(sep: str, items: Any) -> str:
    texts = [str(item) for item in items]
    _check_length(len(sep) * max(0, len(texts) - 1) + sum(map(len, texts)))
    return sep.join(texts)


def _replace_all(old: str, new: str, text: str) -> str:
    count = text.count(old) if old else len(text) + 1
    _check_length(len(text) + count * (len(new) - len(old)))
    return text.replace(old, new)


def _check_length(length: int) -> None:
    """Refuse a result over the output's bound before it is built: ``replaceAll`` and ``join`` multiply
    their input (``replaceAll "0" $a $a`` makes 100 MB of a 10 kB string)."""
    if length > MAX_OUTPUT:
        raise ValueError(f"the result would be longer than {MAX_OUTPUT} characters")


def _own_region(function: str, region: str | None) -> None:
    """Refuse another region than the agent's, as a Nomad that knows no such region: the agent's own
    services are not another region's, whoever registered them under the same name."""
    if region is not None and region != REGION:
        raise ValueError(f"{function}: no path to region {region!r} (herder's is {REGION!r})")


def _unbound(*args: Any) -> Any:
    raise TemplateError("a template function was called outside a render")


def _no_variables(name: str) -> Callable[..., Any]:
    def refuse(*args: Any) -> Any:
        raise ValueError(f"{name} is not supported: herder has no Nomad variables store")
    return refuse


PURE_FUNCTIONS.update({name: _no_variables(name) for name in NOMAD_VARIABLE_FUNCTIONS})

FUNCTION_NAMES: dict[str, Callable[..., Any]] = {
    **dict.fromkeys(("env", "file", "key", "keyOrDefault", "keyExists", "service", "services", "nomadService",
                     "nomadServices"), _unbound),
    **PURE_FUNCTIONS,
}
"""Every function a template may call: what parsing checks names against (a render binds them)."""
