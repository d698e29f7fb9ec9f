"""The ``when`` expressions of stages: a small, safe language over earlier stages.

::

    scan.status == "SUCCEEDED" and len(scan.data.matches) > 0
    not (review.data.score < 3) or triage.status in ["PARTIAL", "FAILED"]

Operands: ``<stage>.status`` (SUCCEEDED, PARTIAL, FAILED, SKIPPED, CANCELLED),
``<stage>.data[.path]`` (a missing path is null), numbers, "strings" or
'strings', true, false, null, [lists], and the bare status names.
Operators: ``== != < <= > >=``, ``in``, ``not in``, ``and``, ``or``, ``not``,
``len(...)`` and parentheses. Comparing values of different kinds is false,
never an error, so a condition cannot crash a run.

An expression is at most ``MAX_WHEN_BYTES`` long and nests at most
``MAX_WHEN_DEPTH`` levels (parentheses, ``not``, ``len(...)``, lists), checked
before and while it is parsed; ``and``/``or`` chains are flat, so neither
parsing nor evaluating ever recurses deeper than that.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ether_host.workflows.limits import MAX_WHEN_BYTES, MAX_WHEN_DEPTH
from ether_host.workflows.paths import Missing, resolve

STATUS_NAMES = ("SUCCEEDED", "PARTIAL", "FAILED", "SKIPPED", "CANCELLED")
_TOKEN = re.compile(
    r"""\s*(?:
      (?P<number>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
    | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<op>==|!=|<=|>=|<|>|\(|\)|\[|\]|,)
    | (?P<name>[A-Za-z_][\w-]*(?:\.(?:[\w-]+|\*))*)
    )""",
    re.VERBOSE,
)
_KEYWORDS = {"and", "or", "not", "in", "true", "false", "null", "len"}


class ExprError(ValueError):
    """A ``when`` expression that does not parse or names what it may not; ``limit``: the
    bound it passes (MAX_WHEN_BYTES or MAX_WHEN_DEPTH, and its value), when that is why."""

    def __init__(self, message: str, limit: tuple[str, int] | None = None) -> None:
        super().__init__(message)
        self.limit = limit


@dataclass(frozen=True)
class Ref:
    """``<stage>.status`` or ``<stage>.data.<keys>``."""

    stage: str
    field: str
    keys: tuple[str, ...] = ()


Env = Callable[[Ref], Any]
Node = tuple[Any, ...]


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    position = 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise ExprError(
                f"unexpected {text[position:].lstrip()[:12]!r} at character {position + 1}"
            )
        kind = match.lastgroup or ""
        value = match.group(kind)
        if kind == "name" and value in _KEYWORDS:
            kind = value
        out.append((kind, value))
        position = match.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0
        self.depth = 0
        self.refs: list[Ref] = []

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_WHEN_DEPTH:
            raise ExprError(
                f"nests more than {MAX_WHEN_DEPTH} levels deep (MAX_WHEN_DEPTH): "
                "parentheses, not, len(...) and lists each add one",
                ("MAX_WHEN_DEPTH", MAX_WHEN_DEPTH),
            )

    def peek(self, offset: int = 0) -> tuple[str, str]:
        index = self.at + offset
        return self.tokens[index] if index < len(self.tokens) else ("end", "")

    def take(self, kind: str, value: str | None = None) -> str:
        found_kind, found = self.peek()
        if found_kind != kind or (value is not None and found != value):
            wanted = value or kind
            raise ExprError(f"expected {wanted!r} but found {found or 'the end'!r}")
        self.at += 1
        return found

    def parse(self) -> Node:
        node = self.or_()
        if self.peek()[0] != "end":
            raise ExprError(f"unexpected {self.peek()[1]!r} after a complete expression")
        return node

    def or_(self) -> Node:
        nodes = [self.and_()]
        while self.peek()[0] == "or":
            self.at += 1
            nodes.append(self.and_())
        return nodes[0] if len(nodes) == 1 else ("or", *nodes)

    def and_(self) -> Node:
        nodes = [self.not_()]
        while self.peek()[0] == "and":
            self.at += 1
            nodes.append(self.not_())
        return nodes[0] if len(nodes) == 1 else ("and", *nodes)

    def not_(self) -> Node:
        if self.peek()[0] == "not":
            self.at += 1
            self.enter()
            node = ("not", self.not_())
            self.depth -= 1
            return node
        return self.compare()

    def compare(self) -> Node:
        left = self.operand()
        kind, value = self.peek()
        if kind == "op" and value in ("==", "!=", "<", "<=", ">", ">="):
            self.at += 1
            return ("cmp", value, left, self.operand())
        if kind == "in":
            self.at += 1
            return ("in", left, self.operand())
        if kind == "not" and self.peek(1)[0] == "in":
            self.at += 2
            return ("not", ("in", left, self.operand()))
        return left

    def operand(self) -> Node:
        kind, value = self.peek()
        self.at += 1
        if kind == "number":
            number = float(value)
            return (
                "lit",
                int(number)
                if number.is_integer() and "." not in value and "e" not in value.lower()
                else number,
            )
        if kind == "string":
            return ("lit", _unquote(value))
        if kind in ("true", "false", "null"):
            return ("lit", {"true": True, "false": False, "null": None}[kind])
        if kind == "len":
            self.take("op", "(")
            self.enter()
            inner = self.or_()
            self.depth -= 1
            self.take("op", ")")
            return ("len", inner)
        if kind == "op" and value == "(":
            self.enter()
            inner = self.or_()
            self.depth -= 1
            self.take("op", ")")
            return inner
        if kind == "op" and value == "[":
            self.enter()
            items: list[Node] = []
            while self.peek() != ("op", "]"):
                items.append(self.operand())
                if self.peek() == ("op", ","):
                    self.at += 1
                elif self.peek() != ("op", "]"):
                    raise ExprError(
                        f"expected ',' or ']' in a list but found {self.peek()[1] or 'the end'!r}"
                    )
            self.at += 1
            self.depth -= 1
            return ("list", *items)
        if kind == "name":
            return self.reference(value)
        raise ExprError(f"expected a value but found {value or 'the end'!r}")

    def reference(self, name: str) -> Node:
        parts = name.split(".")
        if len(parts) == 1:
            if name in STATUS_NAMES:
                return ("lit", name)
            raise ExprError(f"unknown name {name!r}: write <stage>.status or <stage>.data[.path]")
        stage, field, keys = parts[0], parts[1], tuple(parts[2:])
        if field == "status" and not keys:
            ref = Ref(stage, "status")
        elif field == "data":
            ref = Ref(stage, "data", keys)
        else:
            raise ExprError(f"{name!r} names nothing: write {stage}.status or {stage}.data[.path]")
        self.refs.append(ref)
        return ("ref", ref)


def _unquote(text: str) -> str:
    """A string literal's value: JSON's escapes, in double or single quotes (``\\'`` too)."""
    if text.startswith("'"):
        inner, out, escaped = text[1:-1], ['"'], False
        for char in inner:
            if escaped:
                out.append("'" if char == "'" else "\\" + char)
                escaped = False
            elif char == "\\":
                escaped = True
            else:
                out.append('\\"' if char == '"' else char)
        text = "".join(out) + '"'
    try:
        value: str = json.loads(text)
    except ValueError as error:
        raise ExprError(f"bad string literal {text}: {error}") from None
    return value


@dataclass(frozen=True)
class Condition:
    """A parsed ``when`` expression."""

    text: str
    tree: Node
    refs: tuple[Ref, ...]

    def evaluate(self, env: Env) -> bool:
        return _truthy(_eval(self.tree, env))


def parse_condition(text: str) -> Condition:
    """Parse ``text``; ExprError with a message a person can act on."""
    # More characters than the limit are at least as many bytes: no need to encode them.
    if len(text) > MAX_WHEN_BYTES or len(text.encode(errors="surrogatepass")) > MAX_WHEN_BYTES:
        raise ExprError(
            f"is longer than {MAX_WHEN_BYTES} bytes (MAX_WHEN_BYTES)",
            ("MAX_WHEN_BYTES", MAX_WHEN_BYTES),
        )
    parsed = _parse(text)
    if isinstance(parsed, ExprError):  # a new one each time: the cached one keeps no traceback
        raise ExprError(str(parsed), parsed.limit)
    return parsed


@functools.lru_cache(maxsize=256)
def _parse(text: str) -> Condition | ExprError:
    """A condition, or why ``text`` is not one (cached: a spec may repeat a condition)."""
    try:
        parser = _Parser(text)
        if not parser.tokens:
            raise ExprError("empty expression")
        tree = parser.parse()
    except ExprError as error:
        return ExprError(str(error), error.limit)
    return Condition(text, tree, tuple(parser.refs))


def _truthy(value: Any) -> bool:
    return value not in (None, False, 0, "", [], {}) if not isinstance(value, Missing) else False


def _eval(node: Node, env: Env) -> Any:
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "list":
        return [_eval(child, env) for child in node[1:]]
    if kind == "ref":
        value = env(node[1])
        return None if isinstance(value, Missing) else value
    if kind == "len":
        value = _eval(node[1], env)
        return len(value) if isinstance(value, (list, dict, str)) else 0
    if kind == "not":
        return not _truthy(_eval(node[1], env))
    if kind == "and":
        return all(_truthy(_eval(child, env)) for child in node[1:])
    if kind == "or":
        return any(_truthy(_eval(child, env)) for child in node[1:])
    if kind == "in":
        item, container = _eval(node[1], env), _eval(node[2], env)
        if isinstance(container, str):
            return isinstance(item, str) and item in container
        if isinstance(container, list):
            return any(_equal(item, element) for element in container)
        if isinstance(container, dict):
            return isinstance(item, str) and item in container
        return False
    if kind == "cmp":
        return _compare(node[1], _eval(node[2], env), _eval(node[3], env))
    raise AssertionError(f"unknown node {kind}")


def _compare(op: str, left: Any, right: Any) -> bool:
    if op == "==":
        return _equal(left, right)
    if op == "!=":
        return not _equal(left, right)
    numbers = (int, float)
    comparable = (
        isinstance(left, numbers)
        and isinstance(right, numbers)
        and not isinstance(left, bool)
        and not isinstance(right, bool)
    ) or (isinstance(left, str) and isinstance(right, str))
    if not comparable:
        return False
    return bool(
        {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]
    )


def _kind(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return repr(value)  # true, false and null are kinds of their own, never numbers
    return "number" if isinstance(value, int | float) else type(value).__name__


def _equal(left: Any, right: Any) -> bool:
    """JSON equality: values of different kinds differ (``true != 1``), at any depth."""
    if _kind(left) != _kind(right):
        return False
    if isinstance(left, list):
        return len(left) == len(right) and all(map(_equal, left, right))
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(_equal(left[k], right[k]) for k in left)
    return bool(left == right)


def data_env(status: Callable[[str], str], data: Callable[[str], Any]) -> Env:
    """An Env over stage statuses and stage data (paths resolved with ``resolve``)."""

    def lookup(ref: Ref) -> Any:
        if ref.field == "status":
            return status(ref.stage)
        return resolve(data(ref.stage), ref.keys)

    return lookup


__all__ = [
    "STATUS_NAMES",
    "Condition",
    "ExprError",
    "Missing",
    "Ref",
    "data_env",
    "parse_condition",
]
