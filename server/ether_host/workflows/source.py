"""Workflow spec text (YAML, or JSON read as YAML) -> plain values plus where each field sits.

Validation errors name fields as ``stages[2].input_from``; for a spec given as
text, ``Source.where(field)`` gives the line and column of that field so the
message can point at it.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

import yaml

from ether_host.errors import FieldViolation, InvalidArgument

MAX_SPEC_BYTES = 1024 * 1024


@dataclass
class Source:
    """A spec as plain data, with the positions of its fields when it came from text."""

    data: Any
    marks: dict[str, tuple[int, int]] = field(
        default_factory=dict
    )  # field path -> (line, column), 1-based

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
    return f"{path}.{key}" if path else str(key)


def load_text(text: str) -> Source:
    """Parse spec text; INVALID_ARGUMENT with the line and column of a syntax error."""
    if len(text.encode("utf-8", errors="replace")) > MAX_SPEC_BYTES:
        raise _invalid(f"spec_text is larger than {MAX_SPEC_BYTES} bytes")
    if not text.strip():
        raise _invalid("spec_text is empty: give the workflow as YAML or JSON")
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise _invalid("spec_text holds no document")
        marks: dict[str, tuple[int, int]] = {}
        data = _build(loader, node, "", marks)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = error.problem or error.context or "syntax error"
        raise _invalid(f"{where}{problem}", "YAML syntax error in spec_text") from None
    except yaml.YAMLError as error:
        raise _invalid(str(error), "YAML syntax error in spec_text") from None
    finally:
        loader.dispose()
    return Source(data, marks)


def _build(
    loader: yaml.SafeLoader, node: yaml.Node, path: str, marks: dict[str, tuple[int, int]]
) -> Any:
    if path:
        marks.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise yaml.MarkedYAMLError(
                    None, None, "a mapping key must be a plain value", key_node.start_mark
                )
            if key in out:
                raise yaml.MarkedYAMLError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            child = _child(path, str(key))
            marks[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            out[key] = _build(loader, value_node, child, marks)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [
            _build(loader, item, _child(path, index), marks)
            for index, item in enumerate(node.value)
        ]
    value = loader.construct_object(node, deep=True)
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()  # params are JSON: keep dates as the text they were
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def _invalid(description: str, message: str = "") -> InvalidArgument:
    return InvalidArgument(
        f"{message or 'invalid spec_text'}: {description}",
        reason="INVALID_WORKFLOW",
        violations=[FieldViolation("spec_text", description)],
    )
