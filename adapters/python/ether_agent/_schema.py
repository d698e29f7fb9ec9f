"""JSON schemas of action params: derived from type hints, and their shape checked on arrival.

The params rule (docs/protocol.md): the host checks a task's params against the whole schema
(JSON Schema Draft 2020-12) before the task reaches the agent. The adapter checks only the shape
-- ``type`` and ``required``, through ``properties``, ``items`` and ``additionalProperties`` --
so a handler never sees the wrong JSON type, and the three SDKs never refuse what the host
accepted. Every other keyword (enum, const, minimum, anyOf, oneOf, pattern, ...) is the host's.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

Schema = dict[str, Any]

_SCALARS: dict[Any, Schema] = {
    str: {"type": "string"},
    bool: {"type": "boolean"},
    int: {"type": "integer"},
    float: {"type": "number"},
    type(None): {"type": "null"},
}
_ARRAYS = (list, tuple, set, frozenset, collections.abc.Sequence, collections.abc.Set)
_OBJECTS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)


def type_schema(tp: Any) -> Schema:
    """The JSON schema of a Python type hint; ``{}`` (anything) when it has no JSON shape."""
    if tp is Any:
        return {}
    if tp in _SCALARS:
        return dict(_SCALARS[tp])
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is typing.Annotated:
        schema = type_schema(args[0])
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            schema["description"] = notes[0]
        return schema
    if origin in (Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        nullable = len(options) < len(args)
        schemas = [type_schema(a) for a in options]
        if any(not s for s in schemas):
            return {}
        if nullable:
            schemas.append({"type": "null"})
        return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    if origin is Literal:
        return {"enum": list(args)}
    if tp in _ARRAYS or origin in _ARRAYS:
        schema = {"type": "array"}
        if args and args[-1] is not Ellipsis:
            items = type_schema(args[0])
            if items:
                schema["items"] = items
        return schema
    if tp in _OBJECTS or origin in _OBJECTS:
        schema = {"type": "object"}
        if len(args) == 2:
            values = type_schema(args[1])
            if values:
                schema["additionalProperties"] = values
        return schema
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    if typing.is_typeddict(tp):
        hints = typing.get_type_hints(tp)
        required = sorted(getattr(tp, "__required_keys__", hints))
        return {
            "type": "object",
            "properties": {k: type_schema(v) for k, v in hints.items()},
            "required": required,
        }
    if dataclasses.is_dataclass(tp):
        return {"type": "object"}
    return {}


# --- validation ------------------------------------------------------------------------------


def _is_type(value: Any, name: str) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "null":
        return value is None
    return True


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


# Keys that do not constrain an object: a schema of only these accepts any params object.
_NOT_CONSTRAINING = frozenset(
    {"type", "title", "description", "$schema", "$id", "additionalProperties"}
)


def accepts_any_object(schema: Schema) -> bool:
    """True when every JSON object passes ``schema`` (``dict[str, Any]`` params, say): the
    runtime then skips walking each task's params (the host decides the same way)."""
    return (
        schema.get("type") == "object"
        and schema.keys() <= _NOT_CONSTRAINING
        and schema.get("additionalProperties", True) in (True, {})
    )


def validate(schema: Schema, value: Any, path: str = "") -> list[dict[str, str]]:
    """Shape violations of ``value`` against ``schema``: ``[{"field", "description"}]``."""
    out: list[dict[str, str]] = []
    _check(schema, value, path, out)
    return out


def _check(schema: Any, value: Any, path: str, out: list[dict[str, str]]) -> None:
    if not isinstance(schema, dict) or not schema:
        return
    field = path or "params"
    expected = schema.get("type")
    if isinstance(expected, str | list):
        names = expected if isinstance(expected, list) else [expected]
        if not any(_is_type(value, n) for n in names):
            want = " or ".join(str(n) for n in names)
            out.append({"field": field, "description": f"expected {want}, got {_describe(value)}"})
            return
    if isinstance(value, dict):
        _check_object(schema, value, path, out)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _check(schema["items"], item, f"{path}[{i}]", out)


def _check_object(
    schema: Schema, value: dict[str, Any], path: str, out: list[dict[str, str]]
) -> None:
    props = schema.get("properties")
    props = props if isinstance(props, dict) else {}
    prefix = f"{path}." if path else ""
    required = schema.get("required")
    for name in required if isinstance(required, list) else ():
        if isinstance(name, str) and name not in value:
            out.append({"field": prefix + name, "description": "required"})
    extra = schema.get("additionalProperties")
    for key, item in value.items():
        if key in props:
            _check(props[key], item, prefix + key, out)
        elif isinstance(extra, dict):
            _check(extra, item, prefix + key, out)
