"""Ether agents as MCP tools: one mapping (``mapping``) and one MCP server over a ``ToolSource``
(``server``), shared by ``ether mcp`` (stdio, a gRPC client of a host) and the HTTP listener's
``/mcp`` (Streamable HTTP, over the core). Imports nothing of the host, so the CLI can use it."""

from ether_host.mcp_tools.mapping import ActionTool, ToolOutcome, name_tools, render_text
from ether_host.mcp_tools.server import ProgressSink, ToolServer, ToolSource

__all__ = [
    "ActionTool",
    "ProgressSink",
    "ToolOutcome",
    "ToolServer",
    "ToolSource",
    "name_tools",
    "render_text",
]
