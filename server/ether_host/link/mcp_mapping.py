"""MCP's tools and results in Ether's terms (docs/interop.md, "MCP servers as agents").

A tool is an action: ``inputSchema`` is its params schema, ``outputSchema`` its result
schema, ``annotations.idempotentHint`` (or ``readOnlyHint``) makes it idempotent. A tool whose
``inputSchema`` is not a valid JSON Schema stays listed, marked unusable with the reason.

A ``tools/call`` result is a result frame as the link's agents answer it: ``structuredContent``
is ``data`` as it is; without it ``data`` is ``{"content": [...], "text": "..."}``: every
content block as MCP sends it (``text``, ``image``, ``audio``, ``resource_link``,
``resource``) and the text blocks joined by newlines. ``isError`` is status ERROR with code
``tool_error``, the text as message and the blocks in ``details.content``.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

TOOL_ERROR = "tool_error"  # isError: the tool ran and failed
MCP_ERROR = "mcp_error"  # a JSON-RPC error answer to tools/call
INVALID_RESULT = "mcp_invalid_result"  # an answer the MCP SDK refused (its message says why)
# MCP log levels (RFC 5424) as the levels of Ether's agent log.
LOG_LEVELS = {
    "debug": "debug",
    "info": "info",
    "notice": "info",
    "warning": "warning",
    "error": "error",
    "critical": "error",
    "alert": "error",
    "emergency": "error",
}


def unusable_reason(schema: dict[str, Any]) -> str:
    """Why ``schema`` cannot check a tool's arguments, or empty when it can."""
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        where = "/".join(str(p) for p in error.absolute_path)
        return f"its inputSchema is not a valid JSON Schema: {error.message}" + (
            f" (at {where})" if where else ""
        )
    if schema.get("type") not in (None, "object"):
        return f"its inputSchema has type {schema.get('type')!r}; MCP tools take an object"
    return ""


def tool_action(tool: types.Tool) -> dict[str, Any]:
    """One tool as an action of the hello the connection makes up for the agent."""
    annotations = tool.annotations
    idempotent = bool(annotations and (annotations.idempotent_hint or annotations.read_only_hint))
    return {
        "name": tool.name,
        "description": tool.description or tool.title or "",
        "params_schema": dict(tool.input_schema),
        "result_schema": dict(tool.output_schema or {}),
        "idempotent": idempotent,
        "unusable": unusable_reason(tool.input_schema),
    }


def content_blocks(content: list[Any]) -> list[dict[str, Any]]:
    return [block.model_dump(by_alias=True, mode="json", exclude_none=True) for block in content]


def joined_text(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")


def result_frame(frame_id: str, result: types.CallToolResult) -> dict[str, Any]:
    """A tools/call result as a result frame (``status``, ``result``, ``error``)."""
    blocks = content_blocks(list(result.content))
    if result.is_error:
        text = joined_text(blocks) or "the tool reported an error and no text"
        return {
            "id": frame_id,
            "status": "error",
            "error": {"code": TOOL_ERROR, "message": text, "data": {"content": blocks}},
        }
    if result.structured_content is not None:
        data: Any = result.structured_content
    else:
        data = {"content": blocks, "text": joined_text(blocks)}
    return {"id": frame_id, "status": "ok", "result": data}


def error_frame(frame_id: str, code: str, message: str, **data: Any) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data:
        error["data"] = data
    return {"id": frame_id, "status": "error", "error": error}
