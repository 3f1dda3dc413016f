"""Values Nomad sends as cty msgpack (go-cty's msgpack encoding), read into plain Python.

cty msgpack is not self-describing plain msgpack: a value is encoded by its cty
type, which the reader must know. A value whose type is ``any`` (cty's dynamic
pseudo-type) in the type it is encoded with arrives as ``[type JSON, value]``
(Nomad encodes a task's config with its concrete type, so its ``any``
attributes arrive as plain values, but not every value it sends); an unknown value is msgpack
extension type 0; a number too big for int64 or float64 arrives as a string.
The types here are cty's JSON type notation: ``"string"``, ``"number"``,
``"bool"``, ``"dynamic"``, ``["list", T]``, ``["set", T]``, ``["map", T]``,
``["object", {name: T}]``, ``["tuple", [T, ...]]``.
"""

from __future__ import annotations

import json
from typing import Any

import msgpack  # type: ignore[import-untyped]

CtyType = str | list[Any]

_UNKNOWN_EXT = 0


class CtyError(ValueError):
    """A value that is not what its type says, or not known yet."""


class _Unknown:
    """An unknown value (msgpack extension type 0)."""


def _ext_hook(code: int, data: bytes) -> Any:
    if code == _UNKNOWN_EXT:
        return _Unknown()
    raise CtyError(f"unexpected msgpack extension type {code}")


def decode(data: bytes, type: CtyType) -> Any:
    """The value of ``type`` encoded in ``data``; an empty ``data`` is null."""
    if not data:
        return None
    try:
        raw = msgpack.unpackb(data, raw=False, ext_hook=_ext_hook, strict_map_key=False)
    except (ValueError, msgpack.UnpackException) as err:
        raise CtyError(f"not cty msgpack: {err}") from err
    return convert(raw, type)


def convert(raw: Any, type: CtyType, where: str = "") -> Any:
    """``raw`` (msgpack decoded as is) as a plain Python value of cty ``type``."""
    if raw is None:
        return None
    if isinstance(raw, _Unknown):
        raise CtyError(f"{where or 'value'} is not known yet")
    if type == "dynamic":
        if not (isinstance(raw, list) and len(raw) == 2 and isinstance(raw[0], bytes)):
            # Encoded by its concrete type (what Nomad does for a task's config): read as is.
            return _plain(raw, where)
        type_json, value = raw
        try:
            actual = json.loads(type_json)
        except (TypeError, ValueError) as err:
            raise CtyError(f"{where or 'value'}: bad type {type_json!r}") from err
        return convert(value, actual, where)
    if type == "number":
        return _number(raw, where)
    if type in ("string", "bool"):
        return raw
    if isinstance(type, list) and len(type) == 2:
        kind, inner = type
        if kind in ("list", "set"):
            return [convert(item, inner, f"{where}[{index}]") for index, item in enumerate(_items(raw, where))]
        if kind == "tuple":
            items = _items(raw, where)
            return [convert(item, item_type, f"{where}[{index}]")
                    for index, (item, item_type) in enumerate(zip(items, inner, strict=False))]
        if kind == "map":
            return {key: convert(value, inner, f"{where}.{key}") for key, value in _pairs(raw, where).items()}
        if kind == "object":
            pairs = _pairs(raw, where)
            return {name: convert(pairs.get(name), attr_type, f"{where}.{name}" if where else name)
                    for name, attr_type in inner.items()}
    raise CtyError(f"{where or 'value'}: unsupported cty type {type!r}")


def _plain(raw: Any, where: str) -> Any:
    if isinstance(raw, _Unknown):
        raise CtyError(f"{where or 'value'} is not known yet")
    if isinstance(raw, list):
        return [_plain(item, f"{where}[{index}]") for index, item in enumerate(raw)]
    if isinstance(raw, dict):
        return {key: _plain(value, f"{where}.{key}") for key, value in raw.items()}
    return raw


def _number(raw: Any, where: str) -> int | float:
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise CtyError(f"{where or 'value'}: not a number: {raw!r}")
    if isinstance(raw, str):  # beyond int64 and float64: cty writes its decimal text
        try:
            return int(raw)
        except ValueError:
            return float(raw)
    return raw


def _items(raw: Any, where: str) -> list[Any]:
    if not isinstance(raw, list):
        raise CtyError(f"{where or 'value'}: expected a sequence")
    return raw


def _pairs(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise CtyError(f"{where or 'value'}: expected a map")
    return raw


def encode_dynamic(value: Any) -> bytes:
    """``value`` (JSON-like) as cty msgpack of type ``dynamic``: what Nomad sends for an ``any`` attribute.

    Used by the tests, and to describe the format; numbers and nested values take their natural cty type.
    """
    return msgpack.packb(_dynamic(value), use_bin_type=True)


def encode_object(attributes: dict[str, tuple[CtyType, Any]]) -> bytes:
    """An object of the given ``{name: (type, value)}`` as cty msgpack (dynamic attributes wrapped)."""
    return msgpack.packb({name: _dynamic(value) if type == "dynamic" else value
                          for name, (type, value) in attributes.items()}, use_bin_type=True)


def _dynamic(value: Any) -> list[Any]:
    return [json.dumps(_type_of(value)).encode(), value]


def _type_of(value: Any) -> CtyType:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return ["object", {key: _type_of(item) for key, item in value.items()}]
    if isinstance(value, list):
        return ["tuple", [_type_of(item) for item in value]]
    return "dynamic"
