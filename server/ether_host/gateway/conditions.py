"""The `when` language of pipeline triggers: a small, safe expression on the context.

    context.risk.score > 0.8 and turn >= 3
    "refund" in message.text or len(context.history) > 10
    not context.greeted

Names: ``context`` (the session's context), ``turn`` (the turn number),
``message`` (``text`` and ``data``), ``true``/``false``/``null`` (and Python's
spellings). Paths use dots or ``[...]`` with a literal; a missing key is
``null``. Operators: ``== != < <= > >= in not in``, ``and or not``, ``len(...)``,
literals and lists. Nothing else parses, so nothing else runs: no attribute of
a Python object is ever looked up, and a comparison of mismatched types is
simply false.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

MAX_LENGTH = 1000
# Nesting of operators, calls, paths and lists: checking and evaluating recurse this deep at most.
MAX_DEPTH = 64
ROOTS = ("context", "turn", "message")
CONSTANTS = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


class ConditionError(ValueError):
    """The expression is not in the language; the message says where."""


class Condition:
    """A parsed, checked expression; ``holds(scope)`` evaluates it."""

    def __init__(self, text: str) -> None:
        if len(text) > MAX_LENGTH:
            raise ConditionError(f"longer than {MAX_LENGTH} characters")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as error:
            raise ConditionError(
                f"does not parse at column {error.offset or 0}: {error.msg}"
            ) from None
        _check(tree.body, 1)
        self.text = text
        self._tree = tree.body

    def holds(self, scope: dict[str, Any]) -> bool:
        try:
            return bool(_eval(self._tree, scope))
        except (TypeError, ValueError, KeyError, IndexError, AttributeError):
            return False


def _check(node: ast.AST, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ConditionError(f"nests more than {MAX_DEPTH} levels deep")
    depth += 1
    if isinstance(node, ast.BoolOp):
        for value in node.values:
            _check(value, depth)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
        _check(node.operand, depth)
    elif isinstance(node, ast.Compare):
        if not all(type(op) in _COMPARE for op in node.ops):
            raise ConditionError("only == != < <= > >= in and not in compare")
        _check(node.left, depth)
        for comparator in node.comparators:
            _check(comparator, depth)
    elif isinstance(node, ast.Call):
        if not (
            isinstance(node.func, ast.Name)
            and node.func.id == "len"
            and len(node.args) == 1
            and not node.keywords
        ):
            raise ConditionError("the only function is len(x)")
        _check(node.args[0], depth)
    elif isinstance(node, ast.Constant):
        if not isinstance(node.value, str | int | float | bool | type(None)):
            raise ConditionError(f"unsupported literal {node.value!r}")
    elif isinstance(node, ast.List | ast.Tuple):
        for element in node.elts:
            _check(element, depth)
    elif isinstance(node, ast.Name):
        if node.id not in ROOTS and node.id not in CONSTANTS:
            raise ConditionError(
                f"unknown name {node.id!r}; use context.<key>, turn or message.text"
            )
    elif isinstance(node, ast.Attribute):
        _check(node.value, depth)
    elif isinstance(node, ast.Subscript):
        if not isinstance(node.slice, ast.Constant) or not isinstance(node.slice.value, str | int):
            raise ConditionError("an index must be a literal string or number")
        _check(node.value, depth)
    else:
        raise ConditionError(f"{type(node).__name__} is not allowed in a condition")


def _eval(node: ast.AST, scope: dict[str, Any]) -> Any:
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            return all(_eval(v, scope) for v in node.values)
        return any(_eval(v, scope) for v in node.values)
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, scope)
        return (not value) if isinstance(node.op, ast.Not) else -value
    if isinstance(node, ast.Compare):
        left = _eval(node.left, scope)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = _eval(comparator, scope)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Call):
        value = _eval(node.args[0], scope)
        return len(value) if isinstance(value, str | list | dict) else 0
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List | ast.Tuple):
        return [_eval(e, scope) for e in node.elts]
    if isinstance(node, ast.Name):
        return CONSTANTS[node.id] if node.id in CONSTANTS else scope.get(node.id)
    if isinstance(node, ast.Attribute):
        return _step(_eval(node.value, scope), node.attr)
    if isinstance(node, ast.Subscript):
        assert isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str | int)
        return _step(_eval(node.value, scope), node.slice.value)
    raise TypeError(type(node).__name__)


def _step(value: Any, key: str | int) -> Any:
    """One path step through JSON: a key of an object or an index of a list; None when absent."""
    if isinstance(value, dict) and isinstance(key, str):
        return value.get(key)
    if isinstance(value, list) and isinstance(key, int) and -len(value) <= key < len(value):
        return value[key]
    return None
