"""google.protobuf Struct / Value <-> Python values, on the hot path of every call that sends
params as a Struct or asks for its result as a Value (what grpcurl and most clients do).

Hand-written: json_format costs ~140 us per call on this machine (research/perf-baselines.md),
more than the whole stdio hop. What each piece here saves was measured on the bench's 1 KB
params (bench/RESULTS.md, "Ether against the floor"); the rules are those of JSON in a double:

- a number is a double; an integral one below 2^53 in magnitude is read back as an int;
- NaN and the infinities pass as doubles; an unset Value reads as null;
- an empty object or list stays an object or list (never null);
- a dict key that is not text is written as its ``str()``; a value with no Struct form raises
  TypeError (OverflowError for an int no double holds), never its ``str()``.

Two converters give the same values by these rules: the C one (_struct_wire.c, built by the
install: 5-10 times faster, it walks the message's wire bytes that upb hands over) and the
Python one below, which is its reference and what a machine that cannot build C runs.
tests/host/test_convert.py runs every case through both. ``struct_to_dict``, ``fill_value``
and the rest, at the bottom, are the C converter's when it is there.

Each container's items are read or written in one loop with the common leaf kinds handled in
line, rather than one call per value: a Python call is a quarter of a leaf's cost here.

Measured on the bench's 1 KB params and not taken (in-process, best of 7): writing a Value as
wire bytes built in Python and parsed by upb in one MergeFromString (18.5 us against 20.6 by
assignment, but slower for flat string-valued dicts, and 32.1 against 31.2 us of thread CPU
inside the host at 64 in flight); Struct.update (39 us); bufbuild's protobuf-py, installed with
connectrpc (its native from_binary + to_json 27 us to read, _from_json_value + to_binary 29 us
to write); decoding a Struct's wire bytes in Python (30 us to read). What upb's Python API costs
per value (a wrapper object per Value read or written) is most of what is left.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

from google.protobuf import struct_pb2
from google.protobuf.message import Message

from ether_host.value_levels import LIST_LEVELS, MAX_VALUE_LEVELS, OBJECT_LEVELS

MAX_EXACT = 2**53
_NULL = struct_pb2.NULL_VALUE
# Called unbound: saves making a bound method per value (about a tenth of reading a Struct).
_which = struct_pb2.Value.WhichOneof


def integral(value: Any) -> Any:
    """JSON numbers arrive as doubles in Struct; give integral ones back as ints."""
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < MAX_EXACT else value
    if isinstance(value, dict):
        return {k: integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral(v) for v in value]
    return value


# --- reading ---------------------------------------------------------------------------------
# Kinds in the order JSON payloads hold them most. A Struct's fields are read by key, since the
# map's items() is a Python generator (collections.abc) on upb. In a container, a non-empty
# string_value, then a non-zero number_value, is read first: only a Value of that kind has one
# (a oneof's other members read as their default; NaN is non-zero), and it saves the
# WhichOneof call on the two commonest leaves.


def _value_to_python_py(message: struct_pb2.Value) -> Any:
    kind = _which(message, "kind")
    if kind == "string_value":
        return message.string_value
    if kind == "number_value":
        number = message.number_value
        return int(number) if number.is_integer() and abs(number) < MAX_EXACT else number
    if kind == "struct_value":
        return _read_fields(message.struct_value.fields)
    if kind == "list_value":
        return _read_values(message.list_value.values)
    if kind == "bool_value":
        return message.bool_value
    return None


def _struct_to_dict_py(message: struct_pb2.Struct) -> dict[str, Any]:
    return _read_fields(message.fields)


def _read_fields(fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in fields:
        value = fields[key]
        text = value.string_value
        if text:
            out[key] = text
            continue
        number = value.number_value
        if number:
            out[key] = int(number) if number.is_integer() and abs(number) < MAX_EXACT else number
            continue
        kind = _which(value, "kind")
        if kind == "string_value":
            out[key] = text
        elif kind == "number_value":
            number = value.number_value
            out[key] = int(number) if number.is_integer() and abs(number) < MAX_EXACT else number
        elif kind == "struct_value":
            out[key] = _read_fields(value.struct_value.fields)
        elif kind == "list_value":
            out[key] = _read_values(value.list_value.values)
        elif kind == "bool_value":
            out[key] = value.bool_value
        else:
            out[key] = None
    return out


def _read_values(values: Any) -> list[Any]:
    out: list[Any] = []
    append = out.append
    for value in values:
        text = value.string_value
        if text:
            append(text)
            continue
        number = value.number_value
        if number:
            append(int(number) if number.is_integer() and abs(number) < MAX_EXACT else number)
            continue
        kind = _which(value, "kind")
        if kind == "string_value":
            append(text)
        elif kind == "number_value":
            number = value.number_value
            append(int(number) if number.is_integer() and abs(number) < MAX_EXACT else number)
        elif kind == "struct_value":
            append(_read_fields(value.struct_value.fields))
        elif kind == "list_value":
            append(_read_values(value.list_value.values))
        elif kind == "bool_value":
            append(value.bool_value)
        else:
            append(None)
    return out


# --- writing ---------------------------------------------------------------------------------
# Exact types first, by identity (a third cheaper than an isinstance chain on a 1 KB payload);
# subclasses (an IntEnum, an OrderedDict) and dates take the general path (_fill_other). An
# empty object or list is marked present with SetInParent, else it would read as null.


# The bound on how deep a Value may nest, and what objects and lists take of it, are the core's
# (value_levels.py says why): the host's context refuses a write past it, this writer refuses
# to write one.
_OBJECT, _LIST = OBJECT_LEVELS, LIST_LEVELS


class ValueTooDeep(ValueError):
    """A value nesting objects and lists past MAX_VALUE_LEVELS: no Value can carry it."""

    def __init__(self) -> None:
        super().__init__(
            "it nests objects and lists deeper than a protobuf Value can carry to a client "
            f"(decoders stop at 100 levels, and each object takes {_OBJECT}, each list "
            f"{_LIST}: at most {MAX_VALUE_LEVELS // _OBJECT} objects or "
            f"{MAX_VALUE_LEVELS // _LIST} lists, one in another)"
        )


def _fill_value_py(target: struct_pb2.Value, value: Any, depth: int = 0) -> None:
    """Write ``value`` into an empty Value in place (such as a response's field: passing a
    built message into another copies it). ValueTooDeep past MAX_VALUE_LEVELS."""
    kind = type(value)
    if kind is str:
        target.string_value = value
    elif kind is dict:
        _fill_object(target.struct_value, value, depth)
    elif kind is int or kind is float:
        target.number_value = value
    elif kind is bool:
        target.bool_value = value
    elif value is None:
        target.null_value = _NULL
    elif kind is list:
        _fill_list(target.list_value, value, depth)
    else:
        _fill_other(target, value, depth)


def _fill_struct_py(target: struct_pb2.Struct, value: dict[str, Any], depth: int = 0) -> None:
    """Write a dict's items into a Struct in place (``depth``: the protobuf levels above it
    within the value, 0 at the top). ValueTooDeep past MAX_VALUE_LEVELS."""
    depth += _OBJECT
    if depth > MAX_VALUE_LEVELS:
        raise ValueTooDeep
    fields = target.fields
    for key, item in value.items():
        if type(key) is not str:
            key = str(key)
        kind = type(item)
        if kind is str:
            fields[key].string_value = item
        elif kind is int or kind is float:
            fields[key].number_value = item
        elif kind is dict:
            _fill_object(fields[key].struct_value, item, depth)
        elif kind is bool:
            fields[key].bool_value = item
        elif item is None:
            fields[key].null_value = _NULL
        elif kind is list:
            _fill_list(fields[key].list_value, item, depth)
        else:
            _fill_other(fields[key], item, depth)


def _fill_object(target: struct_pb2.Struct, value: dict[Any, Any], depth: int) -> None:
    if value:
        _fill_struct_py(target, value, depth)
    elif depth + _OBJECT > MAX_VALUE_LEVELS:
        raise ValueTooDeep
    else:
        target.SetInParent()


def _fill_list(
    target: struct_pb2.ListValue, items: list[Any] | tuple[Any, ...], depth: int
) -> None:
    depth += _LIST
    if depth > MAX_VALUE_LEVELS:
        raise ValueTooDeep
    if not items:
        target.SetInParent()
        return
    add = target.values.add
    for item in items:
        kind = type(item)
        if kind is str:
            add().string_value = item
        elif kind is int or kind is float:
            add().number_value = item
        elif kind is dict:
            _fill_object(add().struct_value, item, depth)
        elif kind is bool:
            add().bool_value = item
        elif item is None:
            add().null_value = _NULL
        elif kind is list:
            _fill_list(add().list_value, item, depth)
        else:
            _fill_other(add(), item, depth)


def _fill_other(target: struct_pb2.Value, value: Any, depth: int) -> None:
    _fill_value_py(target, _plain(value), depth)


def _plain(value: Any) -> Any:
    """A value of a type the exact-type paths do not take (a subclass such as an IntEnum or an
    OrderedDict, a tuple, a date) in its plain form, which both converters then write; a value
    with no Struct form raises TypeError, never its ``str()``."""
    if isinstance(value, bool):  # before int, its base
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, datetime.date | datetime.time):
        # TOML dates (an agent's config) as the RFC 3339 text orjson gives agents
        return value.isoformat()
    raise TypeError(
        f"a {type(value).__name__} has no protobuf Struct form: only null, bool, numbers, "
        "strings, lists and dicts (and TOML dates, as text) do"
    )


class _FillValue(Protocol):
    def __call__(self, target: struct_pb2.Value, value: Any, depth: int = 0) -> None: ...


class _FillStruct(Protocol):
    def __call__(
        self, target: struct_pb2.Struct, value: dict[str, Any], depth: int = 0
    ) -> None: ...


def _values_of_py(message: Message, field: str) -> list[Any]:
    return [_value_to_python_py(item) for item in getattr(message, field)]


def _fill_values_py(message: Message, field: str, items: Sequence[Any]) -> None:
    add = getattr(message, field).add
    for item in items:
        _fill_value_py(add(), item)


class Converter(NamedTuple):
    """The conversions everything above and the servicers are built on."""

    struct_to_dict: Callable[[struct_pb2.Struct], dict[str, Any]]
    value_to_python: Callable[[struct_pb2.Value], Any]
    # Write into an empty message in place (such as a response's field: passing a built
    # message into another copies it); ValueTooDeep past MAX_VALUE_LEVELS, ``depth`` being the
    # protobuf levels above it within the value (0 at the top).
    fill_value: _FillValue
    fill_struct: _FillStruct
    # A message's repeated Value field (``field``, by name) read as a list, or filled from one
    # (appended to; each item at depth 0): in one step, for lists of thousands (a map stage's
    # inputs), where a call per item costs more than the item.
    values_of: Callable[[Message, str], list[Any]]
    fill_values: Callable[[Message, str, Sequence[Any]], None]


PYTHON = Converter(
    _struct_to_dict_py,
    _value_to_python_py,
    _fill_value_py,
    _fill_struct_py,
    _values_of_py,
    _fill_values_py,
)


def _native_converter() -> Converter | None:
    """The C converter (_struct_wire.c: 5-10 times faster, the same values), when the install
    built it; upb gives and takes the messages' bytes (SerializeToString, MergeFromString)."""
    try:
        from ether_host.transport import _struct_wire
    except ImportError:
        return None
    _struct_wire.configure(_OBJECT, _LIST, MAX_VALUE_LEVELS, ValueTooDeep, _plain)
    read_struct, read_value = _struct_wire.struct_to_dict, _struct_wire.value_to_python
    value_bytes, struct_bytes = _struct_wire.value_bytes, _struct_wire.struct_bytes
    read_values, values_bytes = _struct_wire.repeated_values, _struct_wire.repeated_value_bytes

    def struct_to_dict(message: struct_pb2.Struct) -> dict[str, Any]:
        return read_struct(message.SerializeToString())

    def value_to_python(message: struct_pb2.Value) -> Any:
        return read_value(message.SerializeToString())

    def fill_value(target: struct_pb2.Value, value: Any, depth: int = 0) -> None:
        target.MergeFromString(value_bytes(value, depth))

    def fill_struct(target: struct_pb2.Struct, value: dict[str, Any], depth: int = 0) -> None:
        target.MergeFromString(struct_bytes(value, depth))

    def values_of(message: Message, field: str) -> list[Any]:
        number = message.DESCRIPTOR.fields_by_name[field].number
        return read_values(message.SerializeToString(), number)

    def fill_values(message: Message, field: str, items: Sequence[Any]) -> None:
        number = message.DESCRIPTOR.fields_by_name[field].number
        message.MergeFromString(values_bytes(items, number))

    return Converter(
        struct_to_dict, value_to_python, fill_value, fill_struct, values_of, fill_values
    )


NATIVE = _native_converter()
(
    struct_to_dict,
    value_to_python,
    fill_value,
    fill_struct,
    values_of,
    fill_values,
) = NATIVE or PYTHON


# The one field of a Struct that stands in for a value too deep to carry (fill_struct_or_note).
NOT_SHOWN = "not_shown"


def not_shown_note(what: str, deep: ValueTooDeep) -> str:
    """The text a value too deep to carry is replaced by, ``what`` naming it."""
    return f"{what} is not shown here: {deep}"


def fill_value_or_note(target: struct_pb2.Value, value: Any, what: str) -> None:
    """fill_value, or, for a value too deep to carry, a text in its place saying so (``what``
    names it): for stored values a reply must show (a run's result, its tasks' data), where an
    answer no client can decode, or an INTERNAL for the whole page, would be worse."""
    try:
        fill_value(target, value)
    except ValueTooDeep as deep:
        target.Clear()
        target.string_value = not_shown_note(what, deep)


def fill_struct_or_note(target: struct_pb2.Struct, value: dict[str, Any], what: str) -> None:
    """fill_value_or_note's Struct twin: too deep, the Struct holds one field, ``not_shown``,
    with the text. The Struct is set even when ``value`` is empty (as ParseDict sets it)."""
    target.SetInParent()
    try:
        fill_struct(target, value)
    except ValueTooDeep as deep:
        target.Clear()
        target.fields[NOT_SHOWN].string_value = not_shown_note(what, deep)


def dict_to_struct(value: dict[str, Any] | None, what: str = "this value") -> struct_pb2.Struct:
    """A Struct of ``value`` for a reply; too deep to carry, a note in its place
    (fill_struct_or_note): what an agent wrote (a log line's fields, a session's context, an
    event's data) must not turn a read into INTERNAL."""
    message = struct_pb2.Struct()
    if value:
        fill_struct_or_note(message, value, what)
    return message


def to_value(value: Any, what: str = "this value") -> struct_pb2.Value:
    """A Value of ``value`` for a reply; too deep to carry, a text in its place
    (fill_value_or_note)."""
    message = struct_pb2.Value()
    fill_value_or_note(message, value, what)
    return message
