"""Patterns of the test vectors: subset matching of frames, placeholders, and expansion.

A pattern is JSON. Objects match as subsets (listed keys must be present and match; others are
ignored), arrays element-wise with equal length, scalars by equality (1 == 1.0, but true != 1).
Strings and one-key objects starting with ``$`` are operators; README.md lists them.
"""

from __future__ import annotations

import re
from typing import Any

Bindings = dict[str, Any]

_TYPES: dict[str, Any] = {
    "$string": lambda v: isinstance(v, str),
    "$number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "$int": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and v.is_integer())
    ),
    "$bool": lambda v: isinstance(v, bool),
    "$object": lambda v: isinstance(v, dict),
    "$array": lambda v: isinstance(v, list),
    "$null": lambda v: v is None,
    "$any": lambda v: True,
}


class VectorError(Exception):
    """A malformed vector (a bug in the vector, not in the agent)."""


def is_operator(pattern: Any) -> bool:
    return isinstance(pattern, dict) and any(isinstance(k, str) and k[:1] == "$" for k in pattern)


def expand(template: Any, bindings: Bindings) -> Any:
    """Build a value to send: ``{"$var": name}``, ``{"$repeat": s, "count": n}``,
    ``{"$literal": v}``; everything else is copied."""
    if isinstance(template, list):
        return [expand(t, bindings) for t in template]
    if not isinstance(template, dict):
        return template
    if "$var" in template:
        name = template["$var"]
        if name not in bindings:
            raise VectorError(f"$var {name!r} is not bound (bound: {sorted(bindings)})")
        return bindings[name]
    if "$repeat" in template:
        return str(template["$repeat"]) * int(template.get("count", 1))
    if "$literal" in template:
        return template["$literal"]
    return {k: expand(v, bindings) for k, v in template.items()}


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 20]}...<{len(text)} chars>"


def match(pattern: Any, value: Any, bindings: Bindings, path: str = "$") -> list[str]:
    """Mismatches of ``value`` against ``pattern`` (empty: it matches). ``$capture`` binds into
    ``bindings`` only when the whole pattern matches; callers pass a copy while trying."""
    if isinstance(pattern, str) and pattern in _TYPES:
        return (
            [] if _TYPES[pattern](value) else [f"{path}: expected {pattern}, got {_short(value)}"]
        )
    if isinstance(pattern, str) and pattern[:1] == "$" and pattern != "$absent":
        raise VectorError(f"unknown placeholder {pattern!r} at {path}")
    if is_operator(pattern):
        return _operator(pattern, value, bindings, path)
    if isinstance(pattern, dict):
        if not isinstance(value, dict):
            return [f"{path}: expected an object, got {_short(value)}"]
        errors: list[str] = []
        for key, sub in pattern.items():
            if sub == "$absent":
                if key in value:
                    errors.append(f"{path}.{key}: expected absent, got {_short(value[key])}")
            elif key not in value:
                errors.append(f"{path}.{key}: missing")
            else:
                errors += match(sub, value[key], bindings, f"{path}.{key}")
        return errors
    if isinstance(pattern, list):
        if not isinstance(value, list):
            return [f"{path}: expected an array, got {_short(value)}"]
        if len(pattern) != len(value):
            return [f"{path}: expected {len(pattern)} items, got {len(value)}: {_short(value)}"]
        errors = []
        for i, (p, v) in enumerate(zip(pattern, value, strict=True)):
            errors += match(p, v, bindings, f"{path}[{i}]")
        return errors
    return (
        []
        if _equal(pattern, value)
        else [f"{path}: expected {_short(pattern)}, got {_short(value)}"]
    )


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _operator(op: dict[str, Any], value: Any, bindings: Bindings, path: str) -> list[str]:
    if "$capture" in op:
        name = op["$capture"]
        inner = op.get("match", "$any")
        errors = match(inner, value, bindings, path)
        if not errors:
            bindings[name] = value
        return errors
    if "$var" in op:
        name = op["$var"]
        if name not in bindings:
            raise VectorError(f"$var {name!r} is not bound at {path} (bound: {sorted(bindings)})")
        want = bindings[name]
        return (
            []
            if _equal(want, value)
            else [f"{path}: expected {_short(want)} (${name}), got {_short(value)}"]
        )
    if "$exact" in op:
        want = expand(op["$exact"], bindings)
        return (
            []
            if _equal(want, value)
            else [f"{path}: expected exactly {_short(want)}, got {_short(value)}"]
        )
    if "$repeat" in op:
        want = expand(op, bindings)
        if _equal(want, value):
            return []
        got = f"a string of {len(value)} chars" if isinstance(value, str) else _short(value)
        return [f"{path}: expected {_short(op)} ({len(want)} chars), got {got}"]
    if "$oneOf" in op:
        trials = []
        for option in op["$oneOf"]:
            trial = dict(bindings)
            errors = match(option, value, trial, path)
            if not errors:
                bindings.update(trial)
                return []
            trials.append("; ".join(errors))
        return [f"{path}: matches none of $oneOf: " + " | ".join(trials)]
    if "$has" in op:
        if not isinstance(value, list):
            return [f"{path}: expected an array, got {_short(value)}"]
        errors = []
        used: set[int] = set()
        for want in op["$has"]:
            for i, item in enumerate(value):
                if i not in used and not match(want, item, dict(bindings), path):
                    match(want, item, bindings, path)
                    used.add(i)
                    break
            else:
                errors.append(f"{path}: no item matches {_short(want)}")
        return errors
    if "$contains" in op:
        needle = op["$contains"]
        if isinstance(value, str) and needle in value:
            return []
        return [f"{path}: expected a string containing {needle!r}, got {_short(value)}"]
    if "$re" in op:
        if isinstance(value, str) and re.search(op["$re"], value):
            return []
        return [f"{path}: expected a string matching /{op['$re']}/, got {_short(value)}"]
    if "$between" in op:
        lo, hi = op["$between"]
        if _TYPES["$number"](value) and lo <= value <= hi:
            return []
        return [f"{path}: expected a number in [{lo}, {hi}], got {_short(value)}"]
    if "$len" in op:
        if isinstance(value, str | list | dict) and len(value) == op["$len"]:
            return []
        return [f"{path}: expected length {op['$len']}, got {_short(value)}"]
    if "$literal" in op:
        want = op["$literal"]
        return (
            [] if _equal(want, value) else [f"{path}: expected {_short(want)}, got {_short(value)}"]
        )
    raise VectorError(f"unknown operator {sorted(op)} at {path}")
