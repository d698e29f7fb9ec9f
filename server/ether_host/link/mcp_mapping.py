"""MCP's tools and results in Ether's terms (docs/interop.md, "MCP servers as agents").

A tool is an action: ``inputSchema`` is its params schema, ``outputSchema`` its result
schema, ``annotations.idempotentHint`` (or ``readOnlyHint``) makes it idempotent. A tool whose
``inputSchema`` is not a valid JSON Schema stays listed, marked unusable with the reason.

A ``tools/call`` result is a result frame as the link's agents answer it: ``structuredContent``
is ``data`` as it is; without it ``data`` is ``{"content": [...], "text": "..."}``: every
content block as MCP sends it (``text``, ``image``, ``audio``, ``resource_link``,
``resource``) and the text blocks joined by newlines. ``isError`` is status ERROR with code
``tool_error``, the text as message and the blocks in ``details.content``. The result is
checked as the SDK's client checks it: the JSON-RPC ``result`` is mapped as received (no model
per message), a text block checked by hand, any other block by the SDK's content model, and
``structuredContent`` against the tool's ``outputSchema``; what fails is ``mcp_invalid_result``.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from pydantic import TypeAdapter, ValidationError

TOOL_ERROR = "tool_error"  # isError: the tool ran and failed
MCP_ERROR = "mcp_error"  # a JSON-RPC error answer to tools/call
INVALID_RESULT = "mcp_invalid_result"  # not a conformant CallToolResult (its message says why)
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


class InvalidResult(ValueError):
    """A tools/call answer that is not an MCP ``CallToolResult``; the message says why."""


_BLOCK_TYPES = frozenset({"text", "image", "audio", "resource_link", "resource"})
_content_block_adapter: TypeAdapter[Any] = TypeAdapter(types.ContentBlock)


def checked_blocks(content: Any) -> list[dict[str, Any]]:
    """A result's ``content`` as MCP sends it, checked: a text block by hand (the hot path),
    any other block by the SDK's model."""
    if not isinstance(content, list):
        raise InvalidResult("its content is not a list")
    for index, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            continue
        if kind not in _BLOCK_TYPES:
            raise InvalidResult(f"content[{index}] is not an MCP content block")
        try:
            _content_block_adapter.validate_python(block)
        except ValidationError as error:
            raise InvalidResult(f"content[{index}]: {error}") from None
    return content


def joined_text(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")


def result_frame(
    frame_id: str, tool: str, result: Any, output: Validator | None = None
) -> dict[str, Any]:
    """A ``tools/call`` result (the JSON-RPC ``result`` as received) as a result frame
    (``status``, ``result``, ``error``). ``output`` checks ``structuredContent`` against the
    tool's ``outputSchema``, as the SDK's client does. Raises InvalidResult."""
    if not isinstance(result, dict):
        raise InvalidResult("the result is not an object")
    blocks = checked_blocks(result.get("content"))
    is_error = result.get("isError", False)
    if not isinstance(is_error, bool):
        raise InvalidResult("its isError is not a boolean")
    if is_error:
        text = joined_text(blocks) or "the tool reported an error and no text"
        return {
            "id": frame_id,
            "status": "error",
            "error": {"code": TOOL_ERROR, "message": text, "data": {"content": blocks}},
        }
    structured = result.get("structuredContent")
    if structured is not None and not isinstance(structured, dict):
        raise InvalidResult("its structuredContent is not an object")
    if output is not None:
        if structured is None:
            raise InvalidResult(
                f"tool {tool} has an output schema but did not return structured content"
            )
        mismatch = best_match(output.iter_errors(structured))
        if mismatch is not None:
            where = "/".join(str(p) for p in mismatch.absolute_path)
            raise InvalidResult(
                f"invalid structured content returned by tool {tool}: {mismatch.message}"
                + (f" (at {where})" if where else "")
            )
    if structured is not None:
        data: Any = structured
    else:
        data = {"content": blocks, "text": joined_text(blocks)}
    return {"id": frame_id, "status": "ok", "result": data}


def output_validator(schema: dict[str, Any] | None) -> Validator | None:
    """The compiled check of a tool's ``outputSchema`` (compiling costs many validations)."""
    if not schema:
        return None
    validator_class = validator_for(schema)
    validator_class.check_schema(schema)
    validator: Validator = validator_class(schema)
    return validator


def error_frame(frame_id: str, code: str, message: str, **data: Any) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data:
        error["data"] = data
    return {"id": frame_id, "status": "error", "error": error}
