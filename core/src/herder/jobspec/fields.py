"""Reading the fields of a validated canonical document: texts, integers and durations as herder keeps them."""

from __future__ import annotations

from typing import Any, overload

from herder.sdk.durations import parse_duration


def text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def texts(mapping: dict[str, Any] | None) -> dict[str, str]:
    return {key: text(value) for key, value in (mapping or {}).items()}


@overload
def integer(spec: dict[str, Any], key: str, default: int) -> int: ...


@overload
def integer(spec: dict[str, Any], key: str, default: None) -> int | None: ...


def integer(spec: dict[str, Any], key: str, default: int | None) -> int | None:
    """An integer field; JSON Schema lets ``2.0`` pass as an integer."""
    return int(spec[key]) if key in spec else default


def duration(spec: dict[str, Any], key: str, default: float) -> float:
    return parse_duration(spec[key]) if key in spec else default
