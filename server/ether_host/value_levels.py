"""How deep a JSON value nests once written as a protobuf ``Value``: the core's side of the bound
that transport/struct_values.py applies when it writes one (docs/limits.md).

Protobuf decoders -- every client's, and the host's own -- stop at 100 levels, the message
that carries the value included (10 are left for it). An object takes 3 levels (a Struct, its
map entry, the entry's Value), a list 2 (a ListValue and its Value): 30 objects, or 45 lists,
one in another. Kept in the core (no protobuf here) so that what the host stores for clients to
read back -- a session's context -- is refused when written, not when read.
"""

from __future__ import annotations

from typing import Any

MAX_VALUE_LEVELS = 90
OBJECT_LEVELS = 3
LIST_LEVELS = 2


def nests_too_deep(value: Any, levels: int = 0) -> bool:
    """Whether ``value``, written as a Value under ``levels`` protobuf levels already taken
    (3: a top-level key of an object), would pass MAX_VALUE_LEVELS. Walks the value once,
    without recursion (a value from JSON may nest as deep as its parser allowed)."""
    stack: list[tuple[Any, int]] = [(value, levels)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            depth += OBJECT_LEVELS
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            depth += LIST_LEVELS
            children = item
        else:
            continue
        if depth > MAX_VALUE_LEVELS:
            return True
        stack.extend((child, depth) for child in children if isinstance(child, dict | list | tuple))
    return False
