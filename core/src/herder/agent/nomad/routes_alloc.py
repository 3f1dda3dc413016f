"""The routes of ``nomad alloc fs`` and ``nomad alloc stop``: an allocation's files, and stopping one.

The files are the allocation's as its tasks see them, read through
:func:`herder.app.files` (no link followed, regular files only, a task's
``secrets`` never read; see :mod:`herder.client.allocfs`). What a task wrote
is sent as it is read, a chunk at a time, and never past the size the file
had when opened (a stream that follows it excepted): a file that grows for
ever, or a ``limit`` of an exabyte, costs one chunk of memory.
"""

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack
from typing import Annotated, Any, ParamSpec, TypeVar

from fastapi import FastAPI, Path, Query, Request
from fastapi.responses import Response, StreamingResponse

from herder import app
from herder.agent.nomad import models
from herder.agent.nomad.frames import DELETED, FOLLOW_POLL, FRAME_SIZE, HEARTBEAT, HEARTBEAT_FRAME, TRUNCATED, Framer
from herder.agent.nomad.ledger import Ledger
from herder.agent.nomad.shapes import NomadError, Shapes
from herder.app import Agent
from herder.client.allocfs import AllocFiles, FileInfo, FileRefused

P = ParamSpec("P")
T = TypeVar("T")

READ_CHUNK = 1 << 20
"""The most bytes of a file read at a time for ``cat`` and ``readat``."""

UNTRUSTED = {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox",
             "X-Content-Type-Options": "nosniff"}
"""Nomad's headers on what a task wrote (``cat``, ``readat``): a browser shows it as text, runs nothing."""

Id = Annotated[str, Path(min_length=1, max_length=256)]
FilePath = Annotated[str, Query(max_length=4096, description="A path in the allocation directory (`/` is it)")]


def register(api: FastAPI, agent: Agent, shapes: Shapes, ledger: Ledger,
             answer: Callable[[Any, int], Response], scoped: Callable[..., None]) -> None:
    """Add the routes to ``api``; ``answer`` makes a JSON answer at an index, ``scoped`` refuses another region
    (and, for a write, another namespace)."""

    def files(alloc_id: str, request: Request) -> AllocFiles:
        scoped(request)
        return app.files(shapes.alloc(alloc_id, request))

    @api.get("/v1/client/fs/ls/{alloc_id}", responses={200: {"model": list[models.AllocFileInfo]}})
    async def ls(request: Request, alloc_id: Id, path: FilePath = "/") -> Response:
        found = files(alloc_id, request)
        listed = await asyncio.to_thread(refused_as_nomad, found.entries, path or "/")
        return answer([file_info(info) for info in listed], ledger.index())

    @api.get("/v1/client/fs/stat/{alloc_id}", responses={200: {"model": models.AllocFileInfo}})
    async def stat(request: Request, alloc_id: Id, path: FilePath = "") -> Response:
        found = files(alloc_id, request)
        if not path:
            raise NomadError(400, "must provide a file name")
        return answer(file_info(await asyncio.to_thread(refused_as_nomad, found.stat, path)), ledger.index())

    @api.get("/v1/client/fs/cat/{alloc_id}")
    async def cat(request: Request, alloc_id: Id, path: FilePath = "") -> Response:
        return await read(request, alloc_id, path, 0, 0)

    @api.get("/v1/client/fs/readat/{alloc_id}")
    async def readat(request: Request, alloc_id: Id, offset: Annotated[int, Query(ge=0, le=2**63)],
                     path: FilePath = "", limit: Annotated[int, Query(ge=-1, le=2**63)] = 0) -> Response:
        """``limit`` 0 or below reads to the end, as Nomad's."""
        return await read(request, alloc_id, path, offset, limit)

    async def read(request: Request, alloc_id: str, path: str, offset: int, limit: int) -> Response:
        """The bytes of file ``path`` from ``offset``, at most ``limit`` (0 or below: all), and never past
        its size when opened."""
        stack, fd, size = await opened(request, alloc_id, path)
        end = size if limit <= 0 else min(size, offset + limit)

        async def chunks() -> AsyncIterator[bytes]:
            with stack:
                position = offset
                while position < end:
                    data = await asyncio.to_thread(os.pread, fd, min(READ_CHUNK, end - position), position)
                    if not data:  # truncated meanwhile
                        return
                    position += len(data)
                    yield data

        return StreamingResponse(chunks(), media_type="text/plain; charset=utf-8", headers=UNTRUSTED)

    @api.get("/v1/client/fs/stream/{alloc_id}")
    async def stream(request: Request, alloc_id: Id, path: FilePath = "",
                     offset: Annotated[int, Query(ge=0, le=2**63)] = 0,
                     origin: Annotated[str, Query(pattern="^(start|end)$")] = "start",
                     follow: bool = True) -> Response:
        """The file in Nomad's frames from ``offset`` (from its end with ``origin=end``); ``follow`` (the
        default, as Nomad's) goes on with what is written to it, through truncations, until it is deleted."""
        stack, fd, size = await opened(request, alloc_id, path)
        start = max(0, size - offset) if origin == "end" else min(offset, size)

        async def frames() -> AsyncIterator[bytes]:
            framer = Framer(path, start)
            with stack:
                idle = 0.0
                while True:
                    wanted = FRAME_SIZE if follow else min(FRAME_SIZE, size - framer.position)
                    data = await asyncio.to_thread(os.pread, fd, wanted, framer.position) if wanted > 0 else b""
                    if data:
                        idle = 0.0
                        yield framer.data(data)
                        continue
                    if not follow or await request.is_disconnected():
                        return
                    status = os.fstat(fd)
                    if status.st_nlink == 0:
                        yield framer.event(DELETED, framer.position)
                        return
                    if status.st_size < framer.position:
                        yield framer.event(TRUNCATED, 0)
                        continue
                    await asyncio.sleep(FOLLOW_POLL)
                    idle += FOLLOW_POLL
                    if idle >= HEARTBEAT:
                        idle = 0.0
                        yield HEARTBEAT_FRAME

        return StreamingResponse(frames(), media_type="application/json")

    async def opened(request: Request, alloc_id: str, path: str) -> tuple[ExitStack, int, int]:
        """File ``path`` open for reading: the stack that closes it, its descriptor and its size."""
        found = files(alloc_id, request)
        if not path:
            raise NomadError(400, "must provide a file name")
        stack = ExitStack()
        fd, size = await asyncio.to_thread(refused_as_nomad, stack.enter_context, found.open(path))
        return stack, fd, size

    @api.put("/v1/allocation/{alloc_id}/stop", responses={200: {"model": models.AllocStopResponse}})
    @api.post("/v1/allocation/{alloc_id}/stop", include_in_schema=False)
    def stop(request: Request, alloc_id: Id) -> Response:
        """Stop the allocation; a live one is replaced (see :meth:`herder.app.Agent.stop_alloc`)."""
        scoped(request, write=True)
        alloc = shapes.alloc(alloc_id, request)
        replacements = agent.stop_alloc(alloc)
        evaluation = ledger.evaluate(alloc.job.name, alloc.job.type, "alloc-stop", replacements)
        return answer(models.AllocStopResponse(EvalID=evaluation.id, Index=evaluation.create_index),
                      evaluation.create_index)


def refused_as_nomad(call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``call(...)``, a path refused or missing answered as Nomad answers: 404 for one not there, 400 else."""
    try:
        return call(*args, **kwargs)
    except FileRefused as exc:
        raise NomadError(404 if exc.missing else 400, str(exc)) from None


def file_info(info: FileInfo) -> models.AllocFileInfo:
    return models.AllocFileInfo(Name=info.name, IsDir=info.is_dir, Size=info.size, FileMode=go_file_mode(info.mode),
                                ModTime=_rfc3339_ns(info.modified_ns), ContentType=info.content_type)


_TYPES = ((0o040000, "d"), (0o120000, "L"), (0o060000, "D"), (0o010000, "p"), (0o140000, "S"), (0o020000, "Dc"))
"""Each file type (``S_IFMT``) and the letters of its Go ``os.FileMode``."""


def go_file_mode(mode: int) -> str:
    """``st_mode`` as Go's ``os.FileMode.String()`` writes it, as Nomad's CLI shows it: type letters (``d``,
    ``L`` for a link, ``D`` a device, ``p`` a FIFO, ``S`` a socket, ``c`` a character device), ``u``, ``g``
    and ``t`` for setuid, setgid and sticky, then ``rwxrwxrwx`` (``-`` for no letter)."""
    kind = next((letters for bits, letters in _TYPES if mode & 0o170000 == bits), "")
    letters = kind[:1] + ("u" if mode & 0o4000 else "") + ("g" if mode & 0o2000 else "") + kind[1:] + \
        ("t" if mode & 0o1000 else "")
    permissions = "".join(char if mode & (1 << (8 - i)) else "-" for i, char in enumerate("rwxrwxrwx"))
    return (letters or "-") + permissions


def _rfc3339_ns(ns: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 1_000_000_000)) + f".{ns % 1_000_000_000:09d}Z"
