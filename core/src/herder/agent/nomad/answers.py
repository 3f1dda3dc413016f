"""How the Nomad-compatible API reads a request and answers: JSON bodies sent without a type,
answers with the index they reflect, the one region and namespace, and their OpenAPI descriptions."""

import json
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError

from herder.agent.nomad.shapes import REGION, NomadError, foreign

Body = TypeVar("Body", bound=BaseModel)


def ok(model: Any) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI description of a route's answer, ``model`` as JSON (the routes answer
    :class:`Response` with Nomad's headers, so FastAPI cannot tell it from the function)."""
    return {200: {"model": model, "description": "Nomad's answer; X-Nomad-Index is the index it reflects"}}


def body(model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI description of a JSON request body: the routes read the body themselves,
    as Nomad's clients send JSON without a Content-Type."""
    return {"requestBody": {"required": False, "content": {"application/json": {"schema": model.model_json_schema()}}}}


async def decode(request: Request, model: type[Body]) -> Body:
    """The request's JSON body as ``model``: Nomad's clients send JSON without saying so
    (no ``Content-Type``; a body of another type was refused in front, :mod:`herder.agent.samesite`);
    an empty body is an empty object."""
    raw = await request.body()
    try:
        return model.model_validate(json.loads(raw) if raw.strip() else {})
    except RecursionError:
        raise NomadError(400, "Failed to decode request: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError and ValidationError are ValueErrors
        problems = exc.errors() if isinstance(exc, ValidationError) else None
        text = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in problems) \
            if problems else str(exc)
        raise NomadError(400, f"Failed to decode request: {text}") from None


def json_answer(body: Any, index: int) -> Response:
    """``body`` as Nomad answers a read: JSON, with the index it reflects."""
    content = body.model_dump(mode="json") if isinstance(body, BaseModel) else _dump(body)
    return JSONResponse(content, headers={"X-Nomad-Index": str(index), "X-Nomad-KnownLeader": "true",
                                          "X-Nomad-LastContact": "0"})


def _dump(body: Any) -> Any:
    if isinstance(body, list):
        return [_dump(item) for item in body]
    return body.model_dump(mode="json") if isinstance(body, BaseModel) else body


def scoped(request: Request, *, write: bool = False) -> None:
    """Refuse a region other than the agent's, and a write to a namespace other than ``default``,
    as a Nomad with one region and no such namespace does."""
    region = request.query_params.get("region", "")
    if region and region != REGION:
        raise NomadError(400, "No path to region")
    if write and foreign(request):
        raise NomadError(400, f"namespace {request.query_params.get('namespace')!r} not found")
