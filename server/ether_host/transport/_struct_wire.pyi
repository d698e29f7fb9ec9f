"""Types of the C converter (_struct_wire.c); struct_values.py is what the host calls."""

from collections.abc import Callable
from typing import Any

def struct_to_dict(data: bytes, /) -> dict[str, Any]: ...
def value_to_python(data: bytes, /) -> Any: ...
def value_bytes(value: Any, depth: int = 0, /) -> bytes: ...
def struct_bytes(value: dict[Any, Any], depth: int = 0, /) -> bytes: ...
def configure(
    object_levels: int,
    list_levels: int,
    max_levels: int,
    too_deep: type[Exception],
    other: Callable[[Any], Any],
    /,
) -> None: ...
