"""The MCP peer: the official MCP Python SDK's low-level ``Server`` with one tool, ``echo``, over stdio.

``echo(text: str)`` returns the text as one TextContent. The benchmark passes the same ~1 KB params
as the Ether runs, JSON-encoded into ``text`` (the cheapest shape for MCP).
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOL = types.Tool(
    name="echo",
    description="Return the text unchanged.",
    input_schema={
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
)


async def list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[TOOL])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    text = str((params.arguments or {}).get("text", ""))
    return types.CallToolResult(content=[types.TextContent(text=text)])


async def serve() -> None:
    server: Server[Any] = Server(
        "bench-echo", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool
    )
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(serve)
