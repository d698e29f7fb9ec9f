"""Workflow spec text (YAML, or JSON read as YAML) -> plain values plus where each field sits.

Validation errors name fields as ``stages[2].input_from``; for a spec given as
text, ``Source.where(field)`` gives the line and column of that field so the
message can point at it.

Text is bounded before anything is built (``limits``): its size before it is
parsed, then its nesting and its node count while the YAML events are composed
into nodes, an alias counting as the whole node it names. A "billion laughs" of
aliases, or thousands of nested lists, stop at the first node past a bound, so
the nodes a spec expands to are never made. A spec given as data (a decoded
message, a stored run) gets the same bounds from ``check_shape``.
"""

from __future__ import annotations

import datetime
import json
import math
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import SafeConstructor
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader, ReaderError
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from ether_host.errors import FieldViolation, InvalidArgument
from ether_host.reasons import Reason
from ether_host.workflows.limits import (
    MAX_SPEC_BYTES,
    MAX_SPEC_DEPTH,
    MAX_SPEC_EXPANDED_CHARS,
    MAX_SPEC_NODES,
)

# Field positions are kept this many levels deep (``stages[0].map[1].params`` is five): the
# checks never name a field deeper than that, and the paths of a deep value would grow with it.
MARK_LEVELS = 6
# A mapping key longer than this is cut in field paths (no spec field has such a name).
PATH_KEY_CHARS = 64
# Integers travel as JSON: at most 64-bit, and short enough to convert in no time.
INT_TAG = "tag:yaml.org,2002:int"
MAX_INT = 2**63 - 1
MAX_INT_CHARS = 64


@dataclass
class Source:
    """A spec as plain data, with the positions of its fields when it came from text."""

    data: Any
    marks: dict[str, tuple[int, int]] = field(
        default_factory=dict
    )  # field path -> (line, column), 1-based
    bounded: bool = False  # the limits were checked while the data was read

    def where(self, path: str) -> str:
        """'line L, column C' of ``path`` or of the nearest enclosing field; '' without text."""
        while path:
            if path in self.marks:
                line, column = self.marks[path]
                return f"line {line}, column {column}"
            path = _parent(path)
        return ""


def _parent(path: str) -> str:
    cut = max(path.rfind("."), path.rfind("["))
    return path[:cut] if cut > 0 else ""


def _child(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    text = str(key)
    if len(text) > PATH_KEY_CHARS:
        text = text[:PATH_KEY_CHARS] + "..."
    return f"{path}.{text}" if path else text


class LimitError(Exception):
    """A spec past one of the ``limits``; ``where`` is 'line L, column C: ' or ''."""

    def __init__(self, name: str, limit: int, description: str, where: str = "") -> None:
        super().__init__(description)
        self.name = name
        self.limit = limit
        self.description = description
        self.where = where

    def invalid(self, field_name: str) -> InvalidArgument:
        return InvalidArgument(
            f"{field_name} is over a limit: {self.where}{self.description}",
            reason=Reason.INVALID_WORKFLOW,
            metadata={"limit": self.name, "max": str(self.limit)},
            violations=[FieldViolation(field_name, f"{self.where}{self.description}")],
        )


def _at(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""


def check_size(size: int, field_name: str) -> None:
    """INVALID_ARGUMENT if ``size`` bytes of spec are over MAX_SPEC_BYTES."""
    if size > MAX_SPEC_BYTES:
        raise LimitError(
            "MAX_SPEC_BYTES",
            MAX_SPEC_BYTES,
            f"the spec is larger than {MAX_SPEC_BYTES} bytes ({MAX_SPEC_BYTES // 1024} KiB), "
            "the most a spec may have (MAX_SPEC_BYTES)",
        ).invalid(field_name)


def load_text(text: str) -> Source:
    """Parse spec text; INVALID_ARGUMENT with the line and column of a syntax error."""
    if len(text) > MAX_SPEC_BYTES:  # characters: at least as many bytes, so over already
        check_size(len(text), "spec_text")
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError as error:
        line, column = _line_column(text, error.start)
        raise _invalid(
            f"line {line}, column {column}: not valid Unicode (a lone surrogate)",
            "unreadable spec_text",
        ) from None
    check_size(len(encoded), "spec_text")
    if not text.strip():
        raise _invalid("spec_text is empty: give the workflow as YAML or JSON")
    parser: Any = None
    try:
        parser = _parser(text)
        node = _Composer(parser).single_node()
        if node is None:
            raise _invalid("spec_text holds no document")
        marks: dict[str, tuple[int, int]] = {}
        data = _build(SafeConstructor(), node, "", 0, marks)
    except LimitError as error:
        raise error.invalid("spec_text") from None
    except ReaderError as error:
        # The C parser counts bytes of the UTF-8 text, the Python one characters.
        position = error.position
        if _C_PARSER is not None:
            position = len(encoded[:position].decode("utf-8", errors="ignore"))
        line, column = _line_column(text, position)
        raise _invalid(
            f"line {line}, column {column}: {_reader_problem(error)}",
            "unreadable spec_text",
        ) from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        problem = error.problem or error.context or "syntax error"
        raise _invalid(f"{_at(mark)}{problem}", "YAML syntax error in spec_text") from None
    except yaml.YAMLError as error:
        raise _invalid(str(error), "YAML syntax error in spec_text") from None
    finally:
        if parser is not None:
            parser.dispose()
    return Source(data, marks, bounded=True)


def _line_column(text: str, position: int) -> tuple[int, int]:
    """1-based line and column of character ``position`` of ``text``."""
    line = text.count("\n", 0, position) + 1
    return line, position - (text.rfind("\n", 0, position) + 1) + 1


def _reader_problem(error: ReaderError) -> str:
    character = error.character
    code = ord(character) if isinstance(character, str) and character else int(character or -1)
    if code < 0:
        return str(error.reason)
    return (
        f"character U+{code:04X} is not allowed in YAML "
        "(control characters other than TAB, LF and CR must be escaped in a quoted string)"
    )


class _PyParser(Reader, Scanner, Parser):
    """PyYAML's own parser, where PyYAML was built without libyaml."""

    def __init__(self, text: str) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)

    def dispose(self) -> None:
        self.states = []
        self.state = None


# libyaml's parser makes the events about six times faster than PyYAML's; either way the
# nodes are composed here, where the limits are counted.
_C_PARSER: Any
try:
    from yaml._yaml import CParser as _C_PARSER
except ImportError:  # PyYAML built without libyaml
    _C_PARSER = None


def _parser(text: str) -> Any:
    return _C_PARSER(text) if _C_PARSER is not None else _PyParser(text)


class _Composer:
    """PyYAML's composer (one document, anchors and aliases), counting as it goes.

    ``nodes`` and ``chars`` total the document as if its aliases were expanded, and
    ``deepest`` is the deepest level reached that way: a fresh node adds itself, an
    alias adds the measure (nodes, height, characters) of the node it names, taken
    from the totals when that node was complete. So the bounds hold for the expanded
    document without anything being expanded, and an alias to a node still being
    composed (a cycle) has no measure and is refused.
    """

    def __init__(self, events: Any) -> None:
        self.events = events
        self.resolver: Any = Resolver()  # untyped in the stubs
        self.anchors: dict[str, Node] = {}
        self.measures: dict[str, tuple[int, int, int]] = {}  # anchor -> measure, once complete
        self.depth = 0  # mappings and lists open around the node being composed
        self.deepest = 0
        self.nodes = 0
        self.chars = 0

    def single_node(self) -> Node | None:
        events = self.events
        events.get_event()  # stream start
        node = None
        if not events.check_event(StreamEndEvent):
            events.get_event()  # document start
            node = self.node()
            events.get_event()  # document end
        if not events.check_event(StreamEndEvent):
            event = events.get_event()
            raise ComposerError(
                "expected a single document in the stream",
                node.start_mark if node is not None else None,
                "but found another document",
                event.start_mark,
            )
        events.get_event()
        return node

    def check(self, mark: Any) -> None:
        """LimitError for the first bound the totals pass."""
        if self.deepest > MAX_SPEC_DEPTH:
            raise LimitError(
                "MAX_SPEC_DEPTH",
                MAX_SPEC_DEPTH,
                f"mappings and lists nest more than {MAX_SPEC_DEPTH} levels deep "
                "(MAX_SPEC_DEPTH; aliases count as what they name)",
                _at(mark),
            )
        if self.nodes > MAX_SPEC_NODES:
            raise LimitError(
                "MAX_SPEC_NODES",
                MAX_SPEC_NODES,
                f"the spec has more than {MAX_SPEC_NODES} nodes (mappings, lists and "
                "scalars) with its aliases expanded (MAX_SPEC_NODES)",
                _at(mark),
            )
        if self.chars > MAX_SPEC_EXPANDED_CHARS:
            raise LimitError(
                "MAX_SPEC_EXPANDED_CHARS",
                MAX_SPEC_EXPANDED_CHARS,
                f"the spec's scalars hold more than {MAX_SPEC_EXPANDED_CHARS} characters "
                "with its aliases expanded (MAX_SPEC_EXPANDED_CHARS)",
                _at(mark),
            )

    def node(self) -> Node:
        events = self.events
        event: Any = events.peek_event()  # Any: libyaml's events carry its own Mark type
        kind = type(event)
        if kind is ScalarEvent:  # most nodes: kept short
            events.get_event()
            self.nodes += 1
            self.chars += len(event.value)
            if self.nodes > MAX_SPEC_NODES or self.chars > MAX_SPEC_EXPANDED_CHARS:
                self.check(event.start_mark)
            tag = event.tag
            if tag is None or tag == "!":
                tag = self.resolver.resolve(ScalarNode, event.value, event.implicit)
            node: Node = ScalarNode(
                tag, event.value, event.start_mark, event.end_mark, style=event.style
            )
            if event.anchor is not None:
                self.anchor(event, node, (1, 0, len(event.value)))
            return node
        if kind is AliasEvent:
            events.get_event()
            target = self.anchors.get(event.anchor)
            if target is None:
                raise ComposerError(
                    None, None, f"found undefined alias {event.anchor!r}", event.start_mark
                )
            measure = self.measures.get(event.anchor)
            if measure is None:
                raise ComposerError(
                    None,
                    None,
                    f"alias {event.anchor!r} names a node that contains it (a cycle)",
                    event.start_mark,
                )
            nodes, height, chars = measure
            self.nodes += nodes
            self.chars += chars
            self.deepest = max(self.deepest, self.depth + height)
            self.check(event.start_mark)
            return target
        if kind is SequenceStartEvent or kind is MappingStartEvent:
            return self.collection(event)
        raise ComposerError(None, None, f"unexpected {type(event).__name__}", event.start_mark)

    def anchor(self, event: Any, node: Node, measure: tuple[int, int, int] | None) -> None:
        if event.anchor in self.anchors:
            raise ComposerError(
                f"found duplicate anchor {event.anchor!r}; first occurrence",
                self.anchors[event.anchor].start_mark,
                "second occurrence",
                event.start_mark,
            )
        self.anchors[event.anchor] = node
        if measure is not None:
            self.measures[event.anchor] = measure

    def collection(self, start: Any) -> Node:
        events = self.events
        events.get_event()
        before = (self.nodes, self.chars, self.deepest)
        self.nodes += 1
        self.depth += 1
        self.deepest = self.depth
        self.check(start.start_mark)
        sequence = isinstance(start, SequenceStartEvent)
        kind: Any = SequenceNode if sequence else MappingNode
        tag = start.tag
        if tag is None or tag == "!":
            tag = self.resolver.resolve(kind, None, start.implicit)
        node: Any = kind(tag, [], start.start_mark, None, flow_style=start.flow_style)
        if start.anchor is not None:
            self.anchor(start, node, None)  # no measure yet: an alias inside is a cycle
        end = SequenceEndEvent if sequence else MappingEndEvent
        items = node.value
        while not events.check_event(end):
            if sequence:
                items.append(self.node())
            else:
                key = self.node()
                items.append((key, self.node()))
        node.end_mark = events.get_event().end_mark
        if start.anchor is not None:
            self.measures[start.anchor] = (
                self.nodes - before[0],
                self.deepest - self.depth + 1,
                self.chars - before[1],
            )
        self.depth -= 1
        self.deepest = max(before[2], self.deepest)
        result: Node = node
        return result


def check_shape(data: Any, field_name: str = "spec") -> None:
    """The limits on a spec given as data: INVALID_ARGUMENT naming the first one passed."""
    nodes = chars = 0
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if isinstance(value, (dict, list)):
            if depth > MAX_SPEC_DEPTH:
                raise LimitError(
                    "MAX_SPEC_DEPTH",
                    MAX_SPEC_DEPTH,
                    f"mappings and lists nest more than {MAX_SPEC_DEPTH} levels deep "
                    "(MAX_SPEC_DEPTH)",
                ).invalid(field_name)
            if isinstance(value, dict):
                chars += sum(len(str(key)) for key in value)
                nodes += len(value)
                stack.extend((item, depth + 1) for item in value.values())
            else:
                stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, str):
            chars += len(value)
        if nodes > MAX_SPEC_NODES:
            raise LimitError(
                "MAX_SPEC_NODES",
                MAX_SPEC_NODES,
                f"the spec has more than {MAX_SPEC_NODES} nodes (mappings, lists and "
                "scalars) (MAX_SPEC_NODES)",
            ).invalid(field_name)
        if chars > MAX_SPEC_EXPANDED_CHARS:
            raise LimitError(
                "MAX_SPEC_EXPANDED_CHARS",
                MAX_SPEC_EXPANDED_CHARS,
                f"the spec's strings hold more than {MAX_SPEC_EXPANDED_CHARS} characters "
                "(MAX_SPEC_EXPANDED_CHARS)",
            ).invalid(field_name)


def _build(
    loader: SafeConstructor,
    node: Node,
    path: str | None,
    level: int,
    marks: dict[str, tuple[int, int]],
) -> Any:
    """Plain values of a composed (and so bounded) node; positions of fields near the top."""
    if path:
        marks.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
    deeper = level < MARK_LEVELS and path is not None
    if isinstance(node, MappingNode):
        merged = _flatten(loader, node)
        out: dict[Any, Any] = {}
        inherited: set[Any] = set()  # keys whose value came from a merge key (`<<: *defaults`)
        for position, (key_node, value_node) in enumerate(node.value):
            key = _construct(loader, key_node)
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise yaml.MarkedYAMLError(
                    None, None, "a mapping key must be a plain value", key_node.start_mark
                )
            if not isinstance(key, str):
                raise yaml.MarkedYAMLError(
                    None, None, _key_not_text(key_node, key), key_node.start_mark
                )
            if key in out and key not in inherited:
                raise yaml.MarkedYAMLError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            if position < merged:  # merged pairs come first; a later pair overrides them
                inherited.add(key)
            else:
                inherited.discard(key)
            child = _child(path, str(key)) if deeper and path is not None else None
            if child is not None:
                marks[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            out[key] = _build(loader, value_node, child, level + 1, marks)
        return out
    if isinstance(node, SequenceNode):
        return [
            _build(
                loader,
                item,
                _child(path, index) if deeper and path is not None else None,
                level + 1,
                marks,
            )
            for index, item in enumerate(node.value)
        ]
    if node.tag == INT_TAG and len(node.value) > MAX_INT_CHARS:  # 1:2:3:... costs quadratic time
        raise _too_big(node)
    value = _construct(loader, node)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        raise _too_big(node)
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()  # params are JSON: keep dates as the text they were
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def _key_not_text(node: Node, key: Any) -> str:
    """Every key of a spec is text (it is JSON); YAML 1.1 reads a bare `on`, `yes`, `2` or `~`
    as a boolean, a number or null. Quoting is the fix, where `unknown field True` (or
    `expected a mapping of parameter names`, for params) left the user to guess."""
    if isinstance(key, bool):
        read = f"the boolean {str(key).lower()}"
    else:
        read = "null" if key is None else "a number"
    written = str(node.value)
    return (
        f"the key {written} is read by YAML as {read}, not as text: quote it "
        f"({json.dumps(written)}); every key in a spec is text"
    )


def _construct(loader: SafeConstructor, node: Node) -> Any:
    """The value of a scalar (or of a key); INVALID_ARGUMENT for text its tag cannot read,
    such as `2001-13-45` (a date) or `!!int abc`."""
    try:
        return loader.construct_object(node, deep=True)
    except (ValueError, KeyError, AttributeError, TypeError, OverflowError, IndexError):
        tag = str(node.tag).removeprefix("tag:yaml.org,2002:")
        shown = _clip(node.value) if isinstance(node.value, str) else "the value"
        raise _invalid(
            f"{_at(node.start_mark)}{shown!r} is not a valid {tag} "
            "(quote it to pass it as a string)"
        ) from None


def _flatten(loader: SafeConstructor, node: MappingNode) -> int:
    """Resolve the merge keys of ``node`` in place (once: an aliased node is built again);
    how many of its pairs, at its start, came from them."""
    merged: int | None = getattr(node, "merged_pairs", None)
    if merged is None:
        own = sum(1 for key, _ in node.value if key.tag != "tag:yaml.org,2002:merge")
        loader.flatten_mapping(node)
        merged = len(node.value) - own
        setattr(node, "merged_pairs", merged)  # noqa: B010 (a yaml Node takes attributes)
    return merged


def _too_big(node: Node) -> InvalidArgument:
    return _invalid(
        f"{_at(node.start_mark)}integer {_clip(str(node.value))} is out of range: integers are "
        f"at most {MAX_INT} in magnitude (quote the value to pass it as a string)"
    )


def _clip(text: str, limit: int = 24) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def finite(value: Any) -> bool:
    """False for a float that JSON cannot carry (infinity or NaN)."""
    return not isinstance(value, float) or math.isfinite(value)


def _invalid(description: str, message: str = "") -> InvalidArgument:
    return InvalidArgument(
        f"{message or 'invalid spec_text'}: {description}",
        reason=Reason.INVALID_WORKFLOW,
        violations=[FieldViolation("spec_text", description)],
    )
