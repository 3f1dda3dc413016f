"""A lean path for the reads clients poll most, in front of FastAPI: the same endpoints, without its routing.

A read of kept shapes (:mod:`.memo`) costs a fraction of what FastAPI spends around it: matching the path
against each route in turn, validating every parameter with pydantic, solving the route's dependencies. For a
GET of one of a few routes, :class:`Lean` calls the route's own endpoint function itself: the route it finds
is the one FastAPI would (the routes before it that could take the path are tried first, as one pattern); its
parameters are the strings FastAPI would give, within the lengths the route declares; the blocking query's
parameters are read by the route's own dependency, :func:`.blocking.blocking_query`; an error is answered by
the application's own handler. Anything else goes on to FastAPI and is answered as before: another method or
path, a blocking query (``index``: it waits), a parameter out of its bounds or of another type than a string.

It sits where FastAPI did, behind the same guards (the Host and site checks, the token, the body limit).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

from annotated_types import MaxLen, MinLen
from fastapi import FastAPI, Request
from fastapi.routing import APIRoute
from starlette._utils import get_route_path, is_async_callable
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from herder.agent.nomad.blocking import blocking_query

Endpoint = Callable[..., Awaitable[Response]]


def _pattern(route: BaseRoute) -> str:
    """``route``'s path pattern without its group names (several in one pattern would clash)."""
    path_regex: re.Pattern[str] | None = getattr(route, "path_regex", None)
    if path_regex is None:  # a kind of route that does not say its path: it may take any
        return "^"
    return re.sub(r"\(\?P<\w+>", "(?:", path_regex.pattern)


def _bounds(route: APIRoute, name: str) -> tuple[int, int | None] | None:
    """The lengths a string parameter ``name`` of ``route`` may have; None if it is not a plain string."""
    dependant = route.dependant
    for field in (*dependant.path_params, *dependant.query_params):
        if field.name != name:
            continue
        if field.field_info.annotation is not str:
            return None
        low, high = 0, None
        for rule in field.field_info.metadata:
            if isinstance(rule, MinLen):
                low = rule.min_length
            elif isinstance(rule, MaxLen):
                high = rule.max_length
            else:
                return None
        return low, high
    return None


class LeanRoute:
    """One route as :class:`Lean` answers it."""

    def __init__(self, route: APIRoute, before: list[BaseRoute]) -> None:
        dependant = route.dependant
        if not inspect.iscoroutinefunction(route.endpoint) or dependant.request_param_name is None or any(
                dependency.call is not blocking_query for dependency in dependant.dependencies):
            raise ValueError(f"{route.path}: only coroutines of a request and a blocking query take the lean path")
        self.route = route
        self.endpoint: Endpoint = route.endpoint
        self.request_name = dependant.request_param_name
        self.query_name = dependant.dependencies[0].name if dependant.dependencies else None
        # The routes before it that take a GET and could take its path: FastAPI would pick them first.
        shadows = [_pattern(other) for other in before
                   if not isinstance(other, Route) or other.methods is None or "GET" in other.methods]
        self.shadowed = re.compile("|".join(f"(?:{p})" for p in shadows)) if shadows else None
        if set(route.param_convertors) != {field.name for field in dependant.path_params}:
            raise ValueError(f"{route.path}: its endpoint takes other path parameters than its path gives")
        self.bounds: dict[str, tuple[int, int | None]] = {}
        for field in dependant.path_params:
            bounds = _bounds(route, field.name)
            if bounds is None:
                raise ValueError(f"{route.path}: path parameter {field.name} is not a plain string")
            self.bounds[field.name] = bounds
        # A query parameter of another kind (a flag, a number) is FastAPI's to validate: given, it goes there.
        self.query: list[str] = []
        self.elsewhere: set[str] = {"index"}
        for field in dependant.query_params:
            bounds = _bounds(route, field.name)
            if bounds is None or field.alias != field.name:
                self.elsewhere.add(field.alias)
            else:
                self.query.append(field.name)
                self.bounds[field.name] = bounds

    def arguments(self, path: str, request: Request) -> dict[str, Any] | None:
        """The endpoint's arguments for ``path`` but the blocking query; None if FastAPI must answer it."""
        found = self.route.path_regex.match(path)
        if found is None or (self.shadowed is not None and self.shadowed.match(path)):
            return None
        given = request.query_params
        if not self.elsewhere.isdisjoint(given.keys()):
            return None
        arguments: dict[str, Any] = {self.request_name: request}
        convertors = self.route.param_convertors
        for name, value in found.groupdict().items():
            arguments[name] = convertors[name].convert(value)
        for name in self.query:  # an absent one is left to the endpoint's default
            if (value := given.get(name)) is not None:
                arguments[name] = value
        for name, (low, high) in self.bounds.items():
            value = arguments.get(name)
            if value is not None and (len(value) < low or (high is not None and len(value) > high)):
                return None
        return arguments


class Lean:
    """``api`` with the GET routes of ``endpoints`` answered without FastAPI's routing (see the module)."""

    def __init__(self, api: FastAPI, endpoints: Collection[Endpoint]) -> None:
        self.api = api
        self.routes: list[LeanRoute] = []
        for position, route in enumerate(api.router.routes):
            if isinstance(route, APIRoute) and route.endpoint in endpoints and "GET" in (route.methods or ()):
                self.routes.append(LeanRoute(route, api.router.routes[:position]))
        missing = set(endpoints) - {lean.endpoint for lean in self.routes}
        if missing:
            raise ValueError(f"no GET route of {', '.join(sorted(e.__name__ for e in missing))}")
        self.handlers: Mapping[Any, Callable[[Request, Exception], Any]] = api.exception_handlers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            response = await self.answer(scope, receive)
            if response is not None:
                await response(scope, receive, send)
                return
        await self.api(scope, receive, send)

    async def answer(self, scope: Scope, receive: Receive) -> Response | None:
        """The answer of the lean route that takes the request; None if none does."""
        path = get_route_path(scope)
        request = Request(scope, receive)
        for lean in self.routes:
            arguments = lean.arguments(path, request)
            if arguments is None:
                continue
            scope["path_params"] = {name: arguments[name] for name in lean.route.param_convertors}
            try:
                if lean.query_name is not None:
                    arguments[lean.query_name] = await blocking_query(request)
                return await lean.endpoint(**arguments)
            except Exception as exc:
                handler = next((self.handlers[kind] for kind in type(exc).__mro__ if kind in self.handlers), None)
                if handler is None:
                    raise
                # As Starlette's ExceptionMiddleware calls it.
                if is_async_callable(handler):
                    answer: Response = await handler(request, exc)
                else:
                    answer = await run_in_threadpool(handler, request, exc)
                return answer
        return None
