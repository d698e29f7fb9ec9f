"""The checks every request gets before its method runs, read from the protos once.

The rules live in the .proto files (``ether.v1.field`` and ``ether.v1.oneof``, declared in
ether/v1/rules.proto): a required field or oneof, an integer range, a clamp, the most items of
a list or map, the longest string or bytes. Beside them, every enum field must hold a number
its enum defines, and every Duration and Timestamp must be valid; the servicers and the core
may then rely on all of that. A request type's checks are compiled from its descriptor into a
list of small closures the first time it is registered, so a request type without rules costs
one call that finds nothing to do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf.descriptor import Descriptor, FieldDescriptor, OneofDescriptor
from google.protobuf.message import DecodeError, Message

from ether.v1 import rules_pb2
from ether_host.errors import FieldViolation, InvalidArgument
from ether_host.reasons import Reason

# The ranges of google.protobuf.Duration and Timestamp (their .proto files).
DURATION_MAX_SECONDS = 315_576_000_000
TIMESTAMP_MIN_SECONDS = -62_135_596_800  # 0001-01-01T00:00:00Z
TIMESTAMP_MAX_SECONDS = 253_402_300_799  # 9999-12-31T23:59:59Z
MAX_NANOS = 999_999_999

_INTEGERS = frozenset(
    {
        FieldDescriptor.TYPE_INT32,
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_UINT32,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_SINT32,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_FIXED32,
        FieldDescriptor.TYPE_FIXED64,
        FieldDescriptor.TYPE_SFIXED32,
        FieldDescriptor.TYPE_SFIXED64,
    }
)


@dataclass(frozen=True)
class _Broken:
    """One broken rule: the field's path in the request, and why."""

    path: str
    description: str
    missing: bool = False


# A check of one field of a message: (message, path prefix, what is broken so far).
_Check = Callable[[Message, str, list[_Broken]], None]


# The fields of a streamed request that carry one item of work each, whose problems the method
# answers in the stream instead of ending it (docs/errors.md): the check of the whole request
# leaves them out, and the method checks them with ``field_checker``. Pipe answers an input that
# breaks the rules as it answers one it cannot run, so one bad input does not cancel the others.
ANSWERED_IN_STREAM: dict[str, frozenset[str]] = {
    "ether.v1.PipeRequest": frozenset({"input", "inputs"})
}


def checker(descriptor: Descriptor) -> Callable[[Message], None] | None:
    """The check of a request of this type, or None when the type has nothing to check.

    The check raises InvalidArgument naming every broken rule, and lowers a value above
    the maximum of a field that clamps to that maximum, in place. The fields
    ``ANSWERED_IN_STREAM`` names for this type are left to the method.
    """
    skipped = ANSWERED_IN_STREAM.get(descriptor.full_name)
    checks = _plan(descriptor) if skipped is None else _plan_fields(descriptor, skipped)
    if not checks:
        return None

    def check(request: Message) -> None:
        broken: list[_Broken] = []
        for each in checks:
            each(request, "", broken)
        if broken:
            raise _invalid(broken)

    return check


def field_checker(descriptor: Descriptor, name: str) -> Callable[[Message], None]:
    """The check of one field of a request of this type (its rules and its message's), named
    from the request down as ``checker`` names it: a method's own check of a field
    ``ANSWERED_IN_STREAM`` leaves to it, so both give the same message."""
    checks = _field_checks(descriptor.fields_by_name[name])

    def check(request: Message) -> None:
        broken: list[_Broken] = []
        for each in checks:
            each(request, "", broken)
        if broken:
            raise _invalid(broken)

    return check


def element_checker(descriptor: Descriptor, name: str) -> Callable[[Message, int], None]:
    """The check of one element of a repeated message field ``ANSWERED_IN_STREAM`` leaves to
    the method, named by its index (``inputs[3].agent is required``), so each element of a
    batch is answered on its own. The field's count is the method's to check (``max_items``)."""
    kind = descriptor.fields_by_name[name].message_type
    assert kind is not None
    inner = _inner(kind)

    def check(item: Message, index: int) -> None:
        if inner is None:
            return
        broken: list[_Broken] = []
        inner(item, f"{name}[{index}]", broken)
        if broken:
            raise _invalid(broken)

    return check


def max_items(descriptor: Descriptor, name: str) -> int:
    """The most items the rules allow a repeated field of this type (0: no bound)."""
    return _field_rules(descriptor.fields_by_name[name]).max_items


def malformed(descriptor: Descriptor, error: DecodeError) -> InvalidArgument:
    """The error for request bytes that do not parse as ``descriptor``'s message."""
    detail = str(error).rpartition(": ")[2]
    if "MaxDepth" in detail:
        why = (
            "it nests messages more than 100 deep (each level of a JSON value in a "
            "google.protobuf.Struct or Value takes three, so keep such values under about "
            "30 levels)"
        )
    else:
        why = f"its bytes are not valid protobuf ({detail.lower() or 'parse error'})"
    return InvalidArgument(
        f"the request is not a valid {descriptor.full_name}: {why}",
        reason=Reason.MALFORMED_REQUEST,
        metadata={"message_type": descriptor.full_name},
    )


def _invalid(broken: list[_Broken]) -> InvalidArgument:
    missing = all(b.missing for b in broken)
    return InvalidArgument(
        "; ".join(f"{b.path} {b.description}" for b in broken),
        reason=Reason.MISSING_FIELD if missing else Reason.INVALID_FIELD,
        metadata={"fields": ",".join(b.path for b in broken)},
        violations=[FieldViolation(b.path, b.description) for b in broken],
    )


_plans: dict[str, list[_Check]] = {}
_planning: set[str] = set()  # the types whose plan is being built, for types that nest themselves


def _plan(descriptor: Descriptor) -> list[_Check]:
    name = descriptor.full_name
    known = _plans.get(name)
    if known is not None:
        return known
    checks: list[_Check] = []
    # Stored before it is filled: a message type that contains itself finds this same list.
    _plans[name] = checks
    if name.startswith("google.protobuf."):
        return checks  # Struct, Value and the rest hold anything; Duration etc. are below
    _planning.add(name)
    try:
        checks.extend(_plan_fields(descriptor, frozenset()))
    finally:
        _planning.discard(name)
    return checks


def _plan_fields(descriptor: Descriptor, skipped: frozenset[str]) -> list[_Check]:
    checks: list[_Check] = []
    for field in descriptor.fields:  # in declaration order, as the message names them
        if field.name in skipped:
            continue
        oneof = field.containing_oneof
        if oneof is not None and field is oneof.fields[0] and _oneof_rules(oneof).required:
            checks.append(_required_oneof(oneof.name, [f.name for f in oneof.fields]))
        checks.extend(_field_checks(field))
    return checks


def _field_rules(field: FieldDescriptor) -> rules_pb2.FieldRules:
    options = field.GetOptions()
    rules: rules_pb2.FieldRules = options.Extensions[rules_pb2.field]  # type: ignore[index]
    return rules


def _oneof_rules(oneof: OneofDescriptor) -> rules_pb2.OneofRules:
    options = oneof.GetOptions()
    rules: rules_pb2.OneofRules = options.Extensions[rules_pb2.oneof]  # type: ignore[index]
    return rules


def _field_checks(field: FieldDescriptor) -> list[_Check]:
    rules = _field_rules(field)
    checks: list[_Check] = []
    if rules.required:
        checks.append(_required(field))
    if field.type in _INTEGERS and (rules.HasField("min") or rules.HasField("max")):
        checks.append(_in_range(field, rules))
    # The checks of the field's value, or of each element: behind the count when there is one.
    each: list[_Check] = []
    if rules.HasField("max_len"):
        each.append(_within_length(field, rules.max_len))
    if field.type == FieldDescriptor.TYPE_ENUM:
        each.append(_defined_enum(field))
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        inner = _message_check(field)
        if inner is not None:
            each.append(inner)
    if rules.HasField("max_items"):
        if not field.is_repeated:
            raise ValueError(f"{field.full_name}: max_items is for repeated and map fields")
        checks.append(_counted(field, rules.max_items, each))
    else:
        checks.extend(each)
    return checks


def _required(field: FieldDescriptor) -> _Check:
    name = field.name
    if field.is_repeated:

        def unset(message: Message) -> bool:
            return not len(getattr(message, name))
    elif field.has_presence:

        def unset(message: Message) -> bool:
            return not message.HasField(name)
    else:

        def unset(message: Message) -> bool:
            return not getattr(message, name)

    def check(message: Message, prefix: str, broken: list[_Broken]) -> None:
        if unset(message):
            broken.append(_Broken(prefix + name, "is required", missing=True))

    return check


def _required_oneof(name: str, members: list[str]) -> _Check:
    description = f"is required: set one of {', '.join(members)}"

    def check(message: Message, prefix: str, broken: list[_Broken]) -> None:
        if message.WhichOneof(name) is None:
            broken.append(_Broken(prefix + name, description, missing=True))

    return check


def _in_range(field: FieldDescriptor, rules: rules_pb2.FieldRules) -> _Check:
    name = field.name
    low = rules.min if rules.HasField("min") else None
    high = rules.max if rules.HasField("max") else None
    clamp = rules.clamp
    optional = field.has_presence
    required = rules.required  # then an unset (zero) value is reported as missing, not as 0
    if low is not None and high is not None:
        expected = f"{low} to {high}" + (f" (above {high} counts as {high})" if clamp else "")
    elif low is not None:
        expected = f"at least {low}"
    else:
        expected = f"at most {high}"

    def check(message: Message, prefix: str, broken: list[_Broken]) -> None:
        if optional and not message.HasField(name):
            return
        value = getattr(message, name)
        if required and not value:
            return
        if high is not None and value > high:
            if clamp:
                setattr(message, name, high)
                return
        elif low is None or value >= low:
            return
        broken.append(_Broken(prefix + name, f"is {value}; expected {expected}"))

    return check


def _counted(field: FieldDescriptor, limit: int, each: list[_Check]) -> _Check:
    """At most ``limit`` elements (or map entries), then ``each`` check of them.

    Past the limit the elements are not checked: a list of millions of bad values is one
    violation, not millions.
    """
    name = field.name
    kind = field.message_type
    unit = "entries" if kind is not None and kind.GetOptions().map_entry else "items"

    def check(message: Message, prefix: str, broken: list[_Broken]) -> None:
        count = len(getattr(message, name))
        if count > limit:
            broken.append(_Broken(prefix + name, f"has {count} {unit}; at most {limit}"))
            return
        for one in each:
            one(message, prefix, broken)

    return check


def _unit(field: FieldDescriptor) -> str:
    if field.type == FieldDescriptor.TYPE_STRING:
        return "characters"
    if field.type == FieldDescriptor.TYPE_BYTES:
        return "bytes"
    raise ValueError(f"{field.full_name}: max_len is for string and bytes fields")


def _within_length(field: FieldDescriptor, limit: int) -> _Check:
    """No string (or bytes) of the field longer than ``limit``: the value, each element of
    a list, each key and value of a map."""
    name = field.name
    kind = field.message_type
    if kind is not None and kind.GetOptions().map_entry:
        key, value = kind.fields_by_name["key"], kind.fields_by_name["value"]
        key_unit = _unit(key) if key.type == FieldDescriptor.TYPE_STRING else None
        value_unit = (
            _unit(value)
            if value.type in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES)
            else None
        )
        if key_unit is None and value_unit is None:
            raise ValueError(f"{field.full_name}: max_len is for maps of strings or bytes")

        def check_map(message: Message, prefix: str, broken: list[_Broken]) -> None:
            for k, v in getattr(message, name).items():
                if key_unit is not None and len(k) > limit:
                    broken.append(
                        _Broken(
                            prefix + name,
                            f"has a key {len(k)} {key_unit} long; at most {limit}",
                        )
                    )
                elif value_unit is not None and len(v) > limit:
                    broken.append(
                        _Broken(
                            f"{prefix}{name}[{k!r}]",
                            f"is {len(v)} {value_unit} long; at most {limit}",
                        )
                    )

        return check_map
    unit = _unit(field)
    if field.is_repeated:

        def check_each(message: Message, prefix: str, broken: list[_Broken]) -> None:
            for index, item in enumerate(getattr(message, name)):
                if len(item) > limit:
                    broken.append(
                        _Broken(
                            f"{prefix}{name}[{index}]",
                            f"is {len(item)} {unit} long; at most {limit}",
                        )
                    )

        return check_each

    def check(message: Message, prefix: str, broken: list[_Broken]) -> None:
        size = len(getattr(message, name))
        if size > limit:
            broken.append(_Broken(prefix + name, f"is {size} {unit} long; at most {limit}"))

    return check


def _defined_enum(field: FieldDescriptor) -> _Check:
    name = field.name
    enum = field.enum_type
    assert enum is not None
    defined = frozenset(enum.values_by_number)
    description = f"is not a {enum.name}; use one of {', '.join(enum.values_by_name)}"

    if field.is_repeated:

        def check(message: Message, prefix: str, broken: list[_Broken]) -> None:
            for index, value in enumerate(getattr(message, name)):
                if value not in defined:
                    broken.append(_Broken(f"{prefix}{name}[{index}]", f"{value} {description}"))

        return check

    def check_one(message: Message, prefix: str, broken: list[_Broken]) -> None:
        value = getattr(message, name)
        if value not in defined:
            broken.append(_Broken(prefix + name, f"{value} {description}"))

    return check_one


def _message_check(field: FieldDescriptor) -> _Check | None:
    """The checks of a message field's own fields, or None when its type has none."""
    name = field.name
    kind = field.message_type
    assert kind is not None
    if kind.GetOptions().map_entry:
        value_type = kind.fields_by_name["value"].message_type
        in_map = None if value_type is None else _inner(value_type)
        if in_map is None:
            return None

        def check_map(message: Message, prefix: str, broken: list[_Broken]) -> None:
            for key, item in getattr(message, name).items():
                in_map(item, f"{prefix}{name}[{key!r}]", broken)

        return check_map
    inner = _inner(kind)
    if inner is None:
        return None
    if field.is_repeated:

        def check_each(message: Message, prefix: str, broken: list[_Broken]) -> None:
            for index, item in enumerate(getattr(message, name)):
                inner(item, f"{prefix}{name}[{index}]", broken)

        return check_each

    def check(message: Message, prefix: str, broken: list[_Broken]) -> None:
        if message.HasField(name):
            inner(getattr(message, name), prefix + name, broken)

    return check


def _inner(kind: Descriptor) -> Callable[[Message, str, list[_Broken]], None] | None:
    """Checks ``kind`` as a nested message at ``path``, or None when nothing is checked."""
    if kind.full_name == "google.protobuf.Duration":
        return _valid_duration
    if kind.full_name == "google.protobuf.Timestamp":
        return _valid_timestamp
    checks = _plan(kind)
    # A type still being planned (it contains itself) has no checks yet but may get some.
    if not checks and kind.full_name not in _planning:
        return None

    def check(message: Message, path: str, broken: list[_Broken]) -> None:
        prefix = path + "."
        for each in checks:
            each(message, prefix, broken)

    return check


def _valid_duration(message: Message, path: str, broken: list[_Broken]) -> None:
    seconds, nanos = message.seconds, message.nanos  # type: ignore[attr-defined]
    if (
        abs(seconds) > DURATION_MAX_SECONDS
        or abs(nanos) > MAX_NANOS
        or (seconds > 0 and nanos < 0)
        or (seconds < 0 and nanos > 0)
    ):
        broken.append(
            _Broken(
                path,
                f"is not a valid Duration (seconds {seconds}, nanos {nanos}): seconds and nanos "
                f"must have the same sign, nanos at most {MAX_NANOS} in size, seconds at most "
                f"{DURATION_MAX_SECONDS}",
            )
        )


def _valid_timestamp(message: Message, path: str, broken: list[_Broken]) -> None:
    seconds, nanos = message.seconds, message.nanos  # type: ignore[attr-defined]
    if not TIMESTAMP_MIN_SECONDS <= seconds <= TIMESTAMP_MAX_SECONDS or not 0 <= nanos <= MAX_NANOS:
        broken.append(
            _Broken(
                path,
                f"is not a valid Timestamp (seconds {seconds}, nanos {nanos}): it must lie in "
                f"years 1 to 9999, with nanos 0 to {MAX_NANOS}",
            )
        )
