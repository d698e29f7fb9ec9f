"""The official MCP Python SDK's client, connected to either of Ether's MCP fronts: ``ether mcp``
spawned over stdio (stdio_client), or ``/mcp`` on the HTTP listener (streamable_http_client)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from mcp.client import ClientSession
from mcp.client.session import MessageHandlerFnT
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.support.host import ETHER, HostProcess

SURFACES = ("stdio", "http")


@asynccontextmanager
async def mcp_session(
    surface: str,
    host: HostProcess,
    *,
    token: str = "",
    message_handler: MessageHandlerFnT | None = None,
    flags: Sequence[str] = (),
) -> AsyncIterator[ClientSession]:
    """An initialized client session with ``host``'s agents as tools, through ``surface``
    (``flags``: more of ``ether mcp``'s, over stdio)."""
    extra: dict[str, Any] = {"message_handler": message_handler} if message_handler else {}
    if surface == "stdio":
        server = StdioServerParameters(
            command=str(ETHER),
            args=["mcp", "--address", host.address, *flags],
            env={"ETHER_TOKEN": token} if token else None,
        )
        async with stdio_client(server) as (read, write), ClientSession(read, write, **extra) as s:
            await s.initialize()
            yield s
        return
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with (
        create_mcp_http_client(headers=headers) as client,
        streamable_http_client(f"{host.http_address}/mcp", http_client=client) as (read, write),
        ClientSession(read, write, **extra) as session,
    ):
        await session.initialize()
        yield session
