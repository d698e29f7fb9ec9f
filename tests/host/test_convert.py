"""protobuf Struct <-> Python values (transport/convert.py): what survives the trip, what is
rounded the way a double rounds, and what is refused.

Pure functions with no process boundary, so the table calls them directly. Every test runs
twice: with the C converter the host uses (transport/_struct_wire.c) and with the Python one it
falls back to where that cannot be built (struct_values.py), so the two give the same values.
"""

from __future__ import annotations

import collections
import datetime
import decimal
import enum
import math
import pathlib
from typing import Any

import pytest
from google.protobuf import json_format, struct_pb2

from ether_host.transport import convert, struct_values
from ether_host.value_levels import LIST_LEVELS, MAX_VALUE_LEVELS, OBJECT_LEVELS

EXACT = 2**53


@pytest.fixture(autouse=True, params=["c", "python"])
def converter(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The converter under test, put where the host's code finds it (struct_values' names,
    which its helpers call, and convert's, which the servicers call)."""
    chosen = struct_values.NATIVE if request.param == "c" else struct_values.PYTHON
    if chosen is None:
        pytest.fail("the C converter was not built: `make setup` builds it (server/setup.py)")
    for name, function in chosen._asdict().items():
        monkeypatch.setattr(struct_values, name, function)
        if hasattr(convert, name):
            monkeypatch.setattr(convert, name, function)
    return str(request.param)


# (name, value going in, value coming back)
ROUND_TRIPS: list[tuple[str, Any, Any]] = [
    ("null", None, None),
    ("true", True, True),
    ("false", False, False),
    ("zero", 0, 0),
    ("negative int", -42, -42),
    ("int below 2^53", EXACT - 1, EXACT - 1),
    ("negative int above -2^53", -(EXACT - 1), -(EXACT - 1)),
    # A Struct number is a double: from 2^53 on it is no longer read back as an int, and an
    # int a double cannot hold comes back as the nearest double.
    ("2^53 comes back a float", EXACT, float(EXACT)),
    ("2^53 + 1 is rounded to 2^53", EXACT + 1, float(EXACT)),
    ("2^60 (exact in a double) is a float", 2**60, float(2**60)),
    ("-2^53 comes back a float", -EXACT, -float(EXACT)),
    ("integral float below 2^53 is an int", 3.0, 3),
    ("fraction", 2.5, 2.5),
    ("infinity", math.inf, math.inf),
    ("minus infinity", -math.inf, -math.inf),
    ("empty string", "", ""),
    ("unicode string", "héllo ✓ \x00", "héllo ✓ \x00"),
    ("empty list stays a list", [], []),
    ("empty dict stays a dict", {}, {}),
    ("tuple is a list", (1, "a"), [1, "a"]),
    ("nested lists", [[1, [2, [3, []]]], [], [None]], [[1, [2, [3, []]]], [], [None]]),
    (
        "dicts in lists in dicts",
        {"a": [{"b": [1, 2.5, {"c": None}]}, {}], "d": {"e": {"f": [True]}}},
        {"a": [{"b": [1, 2.5, {"c": None}]}, {}], "d": {"e": {"f": [True]}}},
    ),
    ("TOML date as text", datetime.date(2024, 2, 29), "2024-02-29"),
    (
        "TOML datetime as text",
        datetime.datetime(2024, 2, 29, 12, 30, tzinfo=datetime.UTC),
        "2024-02-29T12:30:00+00:00",
    ),
    ("TOML time as text", datetime.time(7, 5), "07:05:00"),
]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(value, expected) for _, value, expected in ROUND_TRIPS],
    ids=[name for name, _, _ in ROUND_TRIPS],
)
def test_value_round_trip(value: Any, expected: Any) -> None:
    """A value put into a protobuf Value and read back is ``expected``, of the same type."""
    back = convert.value_to_python(convert.to_value(value))
    assert back == expected
    assert _types(back) == _types(expected)
    wrapped = convert.struct_to_dict(convert.dict_to_struct({"k": value}))
    assert wrapped == {"k": expected} and _types(wrapped["k"]) == _types(expected)
    # A value as an item of a list, and in a dict in a list: each container reads and writes
    # its items in its own loop (transport/struct_values.py), so each position is checked.
    listed = convert.value_to_python(convert.to_value([value, {"k": value}, [value]]))
    assert listed == [expected, {"k": expected}, [expected]]
    assert _types(listed) == _types([expected, {"k": expected}, [expected]])


def test_what_clients_send_reads_as_json_format_reads_it() -> None:
    """A Struct as a client builds it (here with protobuf's own json_format, as grpcurl's -d
    does) reads back as that JSON, with integral numbers as ints, at every depth."""
    document = {
        "s": "é ✓",
        "n": [1, -2.5, 1e300, 0],
        "b": [True, False],
        "z": None,
        "o": {"": {}, "l": [[], [{}], [None, "x"]]},
    }
    message = json_format.ParseDict(document, struct_pb2.Struct())
    assert convert.struct_to_dict(message) == document
    assert _types(convert.struct_to_dict(message)) == _types(document)
    # and what the host writes is what json_format writes for the same value
    assert convert.dict_to_struct(document) == message
    assert convert.to_value(document) == json_format.ParseDict(document, struct_pb2.Value())


# Documents as clients send them, for the converter to read and write exactly as protobuf's own
# json_format does (what grpcurl and most clients use): edges of text (escapes, astral planes,
# lengths whose varint takes 1, 2 and 3 bytes), of numbers (0, -0.0, the smallest subnormal,
# 2^53 and past it, 1e300), of containers (empty, many keys, nesting) and null everywhere.
_NESTED: Any = "leaf"
for _ in range(15):
    _NESTED = {"n": [_NESTED, None]}
JSON_FORMAT_CORPUS: list[tuple[str, Any]] = [
    ("scalars", {"s": "x", "t": True, "f": False, "z": None, "n": 1, "neg": -7.25}),
    ("empty", {}),
    ("empty key and empty values", {"": "", "o": {}, "l": [], "zero": 0}),
    (
        "text edges",
        {"u": "h\u00e9llo \u2713 \U0001f600", "ctl": '\x00\n\t"\\/', "k\u00e9y \u2713": "v"},
    ),
    ("long text", {"a" * 127: "b" * 126, "c" * 128: "d" * 200, "e": "\u00e9" * 9000}),
    (
        "numbers",
        {
            "l": [0, -0.0, 5e-324, 1e300, -1e300, 2.5, EXACT - 1, EXACT, EXACT + 1, 2**60],
            "i": 123456789,
        },
    ),
    ("many keys", {f"key {i}": [i, str(i), i % 2 == 0, None] for i in range(300)}),
    ("lists", {"l": [[], [[]], [{}], [None, [None, {"a": [1, "2", [3.5]]}]]]}),
    ("nested 15 deep", {"deep": _NESTED}),
]


@pytest.mark.parametrize(
    "document",
    [document for _, document in JSON_FORMAT_CORPUS],
    ids=[name for name, _ in JSON_FORMAT_CORPUS],
)
def test_struct_conversion_matches_json_format(document: dict[str, Any]) -> None:
    """What the host reads from a Struct is what json_format reads (integral doubles below 2^53
    as ints), and what it writes is the message json_format builds, as a Struct and as a
    Value, for every document of the corpus."""
    message = json_format.ParseDict(document, struct_pb2.Struct())
    expected = convert.integral(json_format.MessageToDict(message))
    read = convert.struct_to_dict(message)
    assert read == expected and _types(read) == _types(expected)
    assert convert.value_to_python(struct_pb2.Value(struct_value=message)) == expected
    assert convert.dict_to_struct(document) == message
    assert convert.to_value(document) == json_format.ParseDict(document, struct_pb2.Value())
    # and through the wire, as a client's bytes reach the host
    wire = struct_pb2.Struct.FromString(message.SerializeToString())
    assert convert.struct_to_dict(wire) == expected


def test_an_unset_value_in_a_container_reads_as_null() -> None:
    """A Value with no kind set (a client may send one) reads as null inside a Struct and a
    list too, not as an error or a missing key."""
    message = struct_pb2.Struct()
    message.fields["unset"].SetInParent()
    message.fields["items"].list_value.values.add()
    assert convert.struct_to_dict(message) == {"unset": None, "items": [None]}


def test_subclasses_and_tuples_nested_take_the_general_path() -> None:
    """An IntEnum, a str or dict subclass and a tuple are written as their JSON kind wherever
    they sit (the fast path matches exact types only)."""

    class Level(enum.IntEnum):
        HIGH = 3

    class Name(str):
        pass

    value = {"a": [Level.HIGH, Name("x"), collections.OrderedDict(b=(1, True)), ()]}
    value["d"] = collections.OrderedDict()
    expected = {"a": [3, "x", {"b": [1, True]}, []], "d": {}}
    assert convert.struct_to_dict(convert.dict_to_struct(value)) == expected
    assert convert.value_to_python(convert.to_value(value)) == expected


def test_nan_round_trips_as_nan() -> None:
    """NaN is a double like any other: it goes through as NaN, not null and not an error."""
    back = convert.value_to_python(convert.to_value(math.nan))
    assert isinstance(back, float) and math.isnan(back)
    assert math.isnan(convert.struct_to_dict(convert.dict_to_struct({"x": [math.nan]}))["x"][0])


def test_an_unset_value_reads_as_null() -> None:
    assert convert.value_to_python(struct_pb2.Value()) is None


def test_keys_are_text() -> None:
    """Struct keys are strings; a non-string key is written as its text (as data_json does)."""
    mixed: dict[Any, Any] = {1: "a", "b": 2}
    assert convert.struct_to_dict(convert.dict_to_struct(mixed)) == {"1": "a", "b": 2}


REFUSED: list[tuple[str, Any, type[Exception]]] = [
    ("object", object(), TypeError),
    ("bytes", b"raw", TypeError),
    ("set", {1, 2}, TypeError),
    ("decimal", decimal.Decimal("1.5"), TypeError),
    ("path", pathlib.Path("/tmp"), TypeError),
    ("nested in a list", [1, [2, object()]], TypeError),
    ("nested in a dict", {"a": {"b": b"x"}}, TypeError),
    ("int too big for a double", 10**400, OverflowError),
]


@pytest.mark.parametrize(
    ("value", "error"),
    [(value, error) for _, value, error in REFUSED],
    ids=[name for name, _, _ in REFUSED],
)
def test_values_without_a_struct_form_are_refused(value: Any, error: type[Exception]) -> None:
    """A value JSON cannot carry raises; it is never turned into its ``str()``."""
    with pytest.raises(error):
        convert.to_value(value)
    with pytest.raises(error):
        convert.dict_to_struct({"k": value})


def test_a_repeated_value_field_is_read_and_filled_in_one_step() -> None:
    """A map stage's inputs (a repeated Value field) read back as the list that filled them,
    every kind of value in it; filling appends after what the field holds; an item with no
    Struct form, or too deep, raises as a single Value would; other fields are untouched."""
    from ether.v1 import workflow_pb2

    items: list[Any] = [None, True, 0, -2.5, "é", [], {}, [1, {"a": [None]}], {"k": "v"}]
    items += [{"n": i} for i in range(300)]  # lengths past one varint byte, and many items
    stage = workflow_pb2.Stage(name="map", agent="echo")
    struct_values.fill_values(stage, "inputs", items)
    assert struct_values.values_of(stage, "inputs") == items
    assert stage.name == "map" and stage.agent == "echo"
    assert list(stage.inputs) == [convert.to_value(item) for item in items]
    struct_values.fill_values(stage, "inputs", ("more",))
    assert struct_values.values_of(stage, "inputs")[-2:] == [{"n": 299}, "more"]
    assert struct_values.values_of(workflow_pb2.Stage(), "inputs") == []
    with pytest.raises(TypeError):
        struct_values.fill_values(workflow_pb2.Stage(), "inputs", [1, object()])
    with pytest.raises(struct_values.ValueTooDeep):
        struct_values.fill_values(workflow_pb2.Stage(), "inputs", [_lists(100)])


def _objects(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def _lists(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_nesting_is_written_up_to_the_bound_and_refused_past_it() -> None:
    """A value as deep as a Value can carry to a client is written (and reads back the same);
    one object or list deeper raises ValueTooDeep, from any starting depth, empty or not."""
    most_objects = MAX_VALUE_LEVELS // OBJECT_LEVELS
    most_lists = MAX_VALUE_LEVELS // LIST_LEVELS
    for fits, too_deep in [
        (_objects(most_objects), _objects(most_objects + 1)),
        (_lists(most_lists), _lists(most_lists + 1)),
        ({"x": _objects(most_objects - 1)}, {"x": _objects(most_objects)}),
    ]:
        assert convert.value_to_python(convert.to_value(fits)) == fits
        target = struct_pb2.Value()
        with pytest.raises(struct_values.ValueTooDeep):
            struct_values.fill_value(target, too_deep, 0)
    # a Struct is the dict's own object level
    as_struct = struct_pb2.Struct()
    struct_values.fill_struct(as_struct, _objects(most_objects), 0)
    assert convert.struct_to_dict(as_struct) == _objects(most_objects)
    with pytest.raises(struct_values.ValueTooDeep):
        struct_values.fill_struct(struct_pb2.Struct(), _objects(most_objects + 1), 0)
    with pytest.raises(struct_values.ValueTooDeep):  # already ``depth`` levels down
        struct_values.fill_value(struct_pb2.Value(), [], MAX_VALUE_LEVELS - LIST_LEVELS + 1)
    # too deep to carry, a stored value reads as a note saying so, never an error
    note = convert.value_to_python(convert.to_value(_objects(most_objects + 1), "the data"))
    assert note.startswith("the data is not shown here: it nests objects and lists deeper")


def test_integral_walks_nested_values() -> None:
    """``integral`` gives integral doubles below 2^53 back as ints, at any depth."""
    value = {"a": [1.0, 2.5, {"b": float(EXACT)}], "c": -7.0, "d": "8.0", "e": True}
    assert convert.integral(value) == {
        "a": [1, 2.5, {"b": float(EXACT)}],
        "c": -7,
        "d": "8.0",
        "e": True,
    }
    assert _types(convert.integral(value)) == _types(
        {"a": [1, 2.5, {"b": 1.0}], "c": 1, "d": "", "e": True}
    )


def _types(value: Any) -> Any:
    """The shape of ``value`` with each leaf replaced by its type, to tell 3 from 3.0."""
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_types(v) for v in value]
    return type(value)
