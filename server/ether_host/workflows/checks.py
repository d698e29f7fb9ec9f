"""Checks of single fields of a spec: each reports a violation with its path (and position) and
returns a usable value, so one pass collects every problem."""

from __future__ import annotations

import copy
import difflib
import math
import re
from typing import Any

from ether_host.agents import Budget
from ether_host.errors import FieldViolation
from ether_host.workflows.source import Source, finite

_DURATION = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)\s*(ms|s|m|h))+\s*$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


class Checker:
    """Walks raw spec data, collecting every violation with its field path and position."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.violations: list[FieldViolation] = []
        # The first spec limit passed (its name and value), for ErrorInfo: a `when` past
        # MAX_WHEN_BYTES or MAX_WHEN_DEPTH (the other limits are checked before the walk).
        self.limit: tuple[str, int] | None = None

    def bad(self, path: str, description: str) -> None:
        where = self.source.where(path)
        self.violations.append(
            FieldViolation(path, f"{where}: {description}" if where else description)
        )

    def mapping(self, value: Any, path: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.bad(path, f"expected a mapping with keys {', '.join(allowed)}, got {kind(value)}")
            return {}
        for key in value:
            if key not in allowed:
                hint = suggest(str(key), allowed)
                self.bad(
                    join(path, key), f"unknown field {key!r}{hint}; allowed: {', '.join(allowed)}"
                )
        return value

    def text(self, value: Any, path: str, limit: int = 4096) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            self.bad(path, f"expected a string, got {kind(value)}")
            return ""
        if len(value) > limit:
            self.bad(path, f"longer than {limit} characters")
        return value

    def boolean(self, value: Any, path: str) -> bool:
        if value is None:
            return False
        if not isinstance(value, bool):
            self.bad(path, f"expected true or false, got {kind(value)}")
            return False
        return value

    def integer(self, value: Any, path: str, low: int, high: int) -> int:
        if value is None:
            return 0
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
            value = int(value)  # proto3 JSON writes 64-bit integers as strings
        if not isinstance(value, int) or isinstance(value, bool):
            self.bad(path, f"expected an integer, got {kind(value)}")
            return 0
        if not low <= value <= high:
            self.bad(path, f"{value} is out of range {low} to {high}")
            return 0
        return value

    def number(self, value: Any, path: str) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.bad(path, f"expected a number, got {kind(value)}")
            return None
        if math.isnan(value) or math.isinf(value):
            self.bad(path, "must be a finite number")
            return None
        if value < 0:
            self.bad(path, f"must not be negative, got {value:g}")
            return None
        return float(value)

    def duration(self, value: Any, path: str) -> float | None:
        """Seconds from a number or a string such as "30s", "1.5s", "500ms", "2m", "1h30m"."""
        if value is None:
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            seconds = float(value)
        elif isinstance(value, str) and value.strip().startswith("-"):
            self.bad(path, f"must not be negative, got {value!r}")
            return None
        elif isinstance(value, str) and _DURATION.match(value):
            seconds = sum(float(n) * _UNIT[u] for n, u in _DURATION_PART.findall(value))
        else:
            self.bad(
                path,
                f"expected a duration such as 30s, 1.5s, 500ms, 2m or 1h (or seconds), got {value!r}",
            )
            return None
        if math.isnan(seconds) or math.isinf(seconds):
            self.bad(path, f"must be a finite duration, got {value!r}")
            return None
        if seconds < 0:
            self.bad(path, f"must not be negative, got {value!r}")
            return None
        return seconds

    def params(self, value: Any, path: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            self.bad(path, f"expected a mapping of parameter names to values, got {kind(value)}")
            return {}
        self.json(value, path)
        return copy.deepcopy(value)

    def json(self, value: Any, path: str) -> bool:
        """Whether ``value`` can travel as JSON; each infinite or NaN number is a violation."""
        found = 0
        stack: list[tuple[Any, str]] = [(value, path)]
        while stack and found < 10:
            item, where = stack.pop()
            if isinstance(item, dict):
                stack.extend((v, join(where, k)) for k, v in reversed(item.items()))
            elif isinstance(item, list):
                stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(item))))
            elif not finite(item):
                self.bad(where, f"{item} is not a JSON number: numbers must be finite")
                found += 1
        return not found

    def budget(self, value: Any, path: str) -> Budget:
        raw = self.mapping(value, path, ("max_cost", "max_time", "max_iterations", "max_tasks"))
        budget = Budget(
            max_cost=self.number(raw.get("max_cost"), join(path, "max_cost")),
            max_time=self.duration(raw.get("max_time"), join(path, "max_time")),
        )
        for key in ("max_iterations", "max_tasks"):
            value = raw.get(key)
            if value is None:
                continue
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
                self.bad(join(path, key), f"must not be negative, got {value}")
                continue
            setattr(budget, key, self.integer(value, join(path, key), 0, 2**31 - 1))
        return budget


def join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        dict: "a mapping",
        list: "a list",
        str: f"the string {str(value)[:40]!r}",
        bool: str(value).lower(),
    }.get(type(value), f"{type(value).__name__} {value!r}"[:60])


def suggest(key: str, allowed: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
