"""Paths into the data of earlier stages: ``<stage>.data[.key|.index|.*]...``.

``input_from`` and ``when`` name values this way. ``*`` maps the rest of the
path over every element of a list (``explore.data.*.path`` is the list of
each element's ``path``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WILDCARD = "*"


class PathError(ValueError):
    """A path that cannot name anything, whatever the data."""


@dataclass(frozen=True)
class DataPath:
    """A parsed ``<stage>.data...`` path."""

    stage: str
    keys: tuple[str, ...]

    def __str__(self) -> str:
        return ".".join((self.stage, "data", *self.keys))


def parse_path(text: str) -> DataPath:
    """Split ``text`` into the stage and the keys after ``data``; PathError if malformed."""
    parts = text.strip().split(".")
    if len(parts) < 2 or parts[1] != "data" or not parts[0]:
        raise PathError(f"{text!r} names nothing: write <stage>.data or <stage>.data.<key>...")
    if any(not part for part in parts[2:]):
        raise PathError(f"{text!r} has an empty key: keys are separated by single dots")
    return DataPath(parts[0], tuple(parts[2:]))


class Missing:
    """Marker for a path that names no value in the data it was resolved against."""

    def __init__(self, where: str) -> None:
        self.where = where

    def __repr__(self) -> str:
        return f"Missing({self.where!r})"


def resolve(value: Any, keys: tuple[str, ...], walked: str = "data") -> Any:
    """The value ``keys`` name inside ``value``, or a Missing saying where it stopped."""
    for position, key in enumerate(keys):
        if key == WILDCARD:
            if not isinstance(value, list):
                return Missing(f"{walked} is not a list, so {walked}.* names nothing")
            rest = keys[position + 1 :]
            items = []
            for index, element in enumerate(value):
                found = resolve(element, rest, f"{walked}.{index}")
                if isinstance(found, Missing):
                    return found
                items.append(found)
            return items
        if isinstance(value, dict):
            if key not in value:
                known = ", ".join(sorted(value)[:10]) or "none"
                return Missing(f"{walked} has no key {key!r} (keys: {known})")
            value = value[key]
        elif isinstance(value, list):
            try:
                index = int(key)
            except ValueError:
                return Missing(f"{walked} is a list; {key!r} is not an index")
            if not -len(value) <= index < len(value):
                return Missing(f"{walked} has {len(value)} elements; index {index} is out of range")
            value = value[index]
        else:
            kind = "null" if value is None else type(value).__name__
            return Missing(f"{walked} is {kind}, which has no key {key!r}")
        walked = f"{walked}.{key}"
    return value
