"""An MCP stdio server written with the official Python SDK (MCPServer), for the MCP agent tests.

Its tools cover what the host maps: a tool without an output schema (``echo``), one with
(``add``), progress (``count``), a slow tool that notes on stderr when it is cancelled
(``sleep``), a tool error (``fail``), a log notification (``shout``), a tool list that changes
(``grow`` adds ``extra``), a crash mid-call (``crash``), garbage and a response to an unknown
id on stdout (``garbage``, ``stray_answer``), requests to the client (``ask_client``: a ping
and a roots/list the host does not offer), a JSON-RPC error answer (``reject``), and ``broken``,
whose inputSchema is not a valid JSON Schema.
"""

from __future__ import annotations

import json
import os
import sys

import anyio
from mcp.server import stdio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

server = MCPServer("py-tools", instructions="Test tools written with the Python MCP SDK.")


class Sum(BaseModel):
    total: int
    terms: list[int]


@server.tool(description="Echo the text back.", structured_output=False)
def echo(text: str) -> str:
    return text


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> Sum:
    return Sum(total=a + b, terms=[a, b])


@server.tool(description="Count to n, reporting progress at each step.", structured_output=False)
async def count(n: int, ctx: Context) -> str:
    for step in range(1, n + 1):
        await ctx.report_progress(step, n, f"step {step}")
    return f"counted to {n}"


@server.tool(description="Sleep; says so on stderr when cancelled.", structured_output=False)
async def sleep(seconds: float, ctx: Context) -> str:
    await ctx.report_progress(0, seconds, "sleeping")  # the call has reached the handler
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        print(f"sleep of {seconds}s cancelled", file=sys.stderr, flush=True)
        raise
    return "slept"


@server.tool(description="Fail with the message.", structured_output=False)
def fail(message: str) -> str:
    raise ToolError(message)


@server.tool(
    description="Log the text as a notifications/message, then answer.", structured_output=False
)
async def shout(text: str, ctx: Context) -> str:
    await ctx.warning(f"shouting {text}")
    return text.upper()


@server.tool(
    description="Add the tool 'extra' and announce the new tool list.", structured_output=False
)
async def grow(ctx: Context) -> str:
    server.add_tool(
        lambda: "extra here", name="extra", description="Added by grow.", structured_output=False
    )
    # notifications/tools/list_changed on this session (ctx.notify_tools_changed publishes to
    # the 2026 subscriptions/listen streams only).
    await ctx.request_context.session.send_tool_list_changed()
    return "grown"


@server.tool(description="Exit the process in the middle of the call.", structured_output=False)
def crash() -> str:
    print("crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


def _write_to_the_wire(line: bytes) -> None:
    """Write around the SDK: while it serves, it points fd 1 at stderr (so that a stray print
    cannot corrupt the protocol) and keeps the real stdout as a private descriptor. A server
    that misbehaves on purpose writes there."""
    claim = stdio._claims.get(1)
    os.write(claim.private_fd if claim and claim.private_fd is not None else 1, line)


@server.tool(description="Write a line of garbage to stdout, then answer.", structured_output=False)
def garbage() -> str:
    _write_to_the_wire(b"this line is not JSON-RPC\n")
    return "still here"


@server.tool(
    description="Write a response to a request id nobody sent, then answer.",
    structured_output=False,
)
def stray_answer() -> str:
    _write_to_the_wire(b'{"jsonrpc": "2.0", "id": 987654, "result": {}}\n')
    return "answered"


@server.tool(
    description="Ping the client and ask it for roots, then say what came back.",
    structured_output=False,
)
async def ask_client(ctx: Context) -> str:
    session = ctx.request_context.session
    await session.send_ping()
    try:
        await session.list_roots()
    except MCPError as refused:
        return f"ping answered; roots/list refused: {refused.error.code} {refused.error.message}"
    return "ping answered; roots/list answered"


@server.tool(
    description="Answer this call with a JSON-RPC error (then the SDK answers too).",
    structured_output=False,
)
def reject(ctx: Context) -> str:
    error = {"code": -32000, "message": "rejected by the server"}
    answer = {"jsonrpc": "2.0", "id": int(ctx.request_id), "error": error}
    _write_to_the_wire(json.dumps(answer).encode() + b"\n")
    return "too late"


@server.tool(description="A tool whose inputSchema is broken.", structured_output=False)
def broken(x: int) -> str:
    return str(x)


@server.tool(description="Answer structured content its advertised outputSchema refuses.")
def liar(a: int) -> Sum:
    return Sum(total=a, terms=[a])


# Advertised: a string total; answered: an integer. The client must refuse the result.
server._tool_manager._tools["liar"].fn_metadata.output_schema = {
    "type": "object",
    "properties": {"total": {"type": "string"}},
    "required": ["total"],
}

# A schema no JSON Schema validator accepts ("type" must name a type): listed, never callable.
server._tool_manager._tools["broken"].parameters = {
    "type": "object",
    "properties": {"x": {"type": "integral"}},
}

if __name__ == "__main__":
    server.run("stdio")
