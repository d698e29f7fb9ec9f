"""Ether actions as MCP tools: the one mapping both MCP fronts use (``ether mcp`` over stdio, and
``/mcp`` on the HTTP listener), written once on plain data so that neither the gRPC client nor
the core shapes leak into it.

Tool names: ``AGENT__ACTION`` (two underscores), the characters MCP clients and model APIs
accept everywhere (``[A-Za-z0-9_-]``, at most 64). A name that would hold any other character
has it replaced by ``_``; a name that was changed that way, or would be longer than 64, or
collides with a name already given, is cut to 55 characters and ends with ``_`` and the first 8
hex digits of the SHA-256 of ``AGENT/ACTION`` (so it stays the same from one listing to the
next). docs/interop.md, "Ether agents as MCP tools", says the same for users.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

SEPARATOR = "__"
MAX_NAME = 64
_SUFFIX_HEX = 8
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
SUCCESS, PARTIAL, ERROR = "SUCCESS", "PARTIAL", "ERROR"
# Keys of the ``_meta`` a tool result carries (reverse-DNS-free prefixes are allowed by MCP).
META_TASK = "ether/task_id"
META_STATUS = "ether/status"
META_CODE = "ether/error_code"


@dataclass(frozen=True)
class ActionTool:
    """One action of one agent, as an MCP tool shows it."""

    agent: str
    action: str
    description: str = ""
    params_schema: Mapping[str, Any] = field(default_factory=dict)
    result_schema: Mapping[str, Any] = field(default_factory=dict)
    idempotent: bool = False
    agent_description: str = ""


@dataclass(frozen=True)
class ToolOutcome:
    """How a call ended: a task's status with its data, or an error with the Ether error's code
    (a task's ``error.code``, or the status a refused request got) and message."""

    status: str
    data: Any = None
    error_code: str = ""
    error_message: str = ""
    task_id: str = ""


def _hashed(agent: str, action: str, base: str) -> str:
    digest = hashlib.sha256(f"{agent}/{action}".encode()).hexdigest()[:_SUFFIX_HEX]
    return f"{base[: MAX_NAME - _SUFFIX_HEX - 1]}_{digest}"


def name_tools(tools: Iterable[ActionTool]) -> dict[str, ActionTool]:
    """Each tool under its MCP name (module docstring), in agent then action order."""
    named: dict[str, ActionTool] = {}
    for tool in sorted(tools, key=lambda t: (t.agent, t.action)):
        plain = f"{tool.agent}{SEPARATOR}{tool.action}"
        safe = _UNSAFE.sub("_", plain)
        name = safe
        if safe != plain or len(safe) > MAX_NAME or safe in named:
            name = _hashed(tool.agent, tool.action, safe)
        named[name] = tool
    return named


def _object_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """An action's params schema as an MCP inputSchema, which must describe an object: an empty
    schema (any params object) becomes ``{"type": "object"}``."""
    shaped = dict(schema)
    if not shaped:
        return {"type": "object"}
    shaped.setdefault("type", "object")
    return shaped


def _wraps(schema: Mapping[str, Any]) -> bool:
    """Whether a result of this schema travels wrapped as ``{"result": data}``: MCP's
    structuredContent is always an object."""
    return schema.get("type") != "object"


def tool_of(name: str, tool: ActionTool) -> types.Tool:
    """The MCP tool of an action: its inputSchema the params schema, an outputSchema when the
    action declares a result schema (wrapped in ``{"result": ...}`` unless it is an object)."""
    output = None
    if tool.result_schema:
        result = dict(tool.result_schema)
        output = (
            {"type": "object", "properties": {"result": result}, "required": ["result"]}
            if _wraps(result)
            else result
        )
    description = tool.description or f"The {tool.action} action of the Ether agent {tool.agent}."
    return types.Tool(
        name=name,
        title=f"{tool.agent}: {tool.action}",
        description=description,
        input_schema=_object_schema(tool.params_schema),
        output_schema=output,
        annotations=types.ToolAnnotations(idempotent_hint=tool.idempotent),
    )


def render_text(data: Any) -> str:
    """The text rendering of a result for clients that read only ``content``: a string as is,
    anything else as indented JSON."""
    if isinstance(data, str):
        return data
    return json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False)


def result_of(tool: ActionTool, outcome: ToolOutcome) -> types.CallToolResult:
    """A call's outcome as MCP's CallToolResult: data as ``structuredContent`` (an object: data
    that is not one is wrapped as ``{"result": data}``) plus its text rendering; an error as
    ``isError`` with the Ether error's message."""
    meta: dict[str, Any] = {META_STATUS: outcome.status}
    if outcome.task_id:
        meta[META_TASK] = outcome.task_id
    if outcome.status == ERROR:
        meta[META_CODE] = outcome.error_code
        text = outcome.error_message or outcome.error_code or "the task failed"
        return types.CallToolResult(
            content=[types.TextContent(text=text)], is_error=True, _meta=meta
        )
    data = outcome.data
    wrap = not isinstance(data, dict) or (bool(tool.result_schema) and _wraps(tool.result_schema))
    structured = {"result": data} if wrap else data
    return types.CallToolResult(
        content=[types.TextContent(text=render_text(data))],
        structured_content=structured,
        _meta=meta,
    )


def progress_of(payload: Mapping[str, Any]) -> tuple[float, float | None, str | None]:
    """A task's progress report (progress, total, message) as ``notifications/progress``
    fields; a total of 0 means none was given."""
    total = float(payload.get("total") or 0)
    message = str(payload.get("message") or "") or None
    return float(payload.get("progress") or 0), total or None, message
