"""One MCP server for Ether's agents, over any ``ToolSource``: the lowlevel server of the
official ``mcp`` SDK with the tools of ``mapping``. ``ether mcp`` runs it over stdio with a
source that is a gRPC client of a host; the HTTP listener's ``/mcp`` runs it over Streamable
HTTP with a source that calls the core. Both get the same names, schemas, results, progress,
cancellation and ``tools/list_changed``."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError

from ether_host.mcp_tools.mapping import (
    ActionTool,
    ToolOutcome,
    name_tools,
    progress_of,
    result_of,
    tool_of,
)

ProgressSink = Callable[[Mapping[str, Any]], None]
# Progress reports waiting for a slow client: past this many the newest are dropped (a report
# is superseded by the next one anyway), so a client that does not read never holds the task.
PROGRESS_BUFFER = 64


class ToolSource(Protocol):
    """Where the tools come from and where calls go: the host, seen by one front."""

    async def tools(self, caller: Any) -> list[ActionTool]:
        """Every action ``caller`` may run."""
        ...

    async def call(
        self, caller: Any, tool: ActionTool, arguments: dict[str, Any], on_progress: ProgressSink
    ) -> ToolOutcome:
        """Run one action to its end (cancelled with the calling task), reporting progress."""
        ...

    def changes(self) -> AsyncIterator[None]:
        """One item each time the set of agents or their actions changes."""
        ...


# How long one client may take to accept a list_changed: a client that does not read its stream
# loses the notification rather than holding up the others' (it can still call tools/list).
NOTIFY_TIMEOUT = 5.0


async def _tell_list_changed(connection: Connection) -> None:
    with anyio.move_on_after(NOTIFY_TIMEOUT):
        await connection.send_tool_list_changed()  # best effort: never raises


class _ListChangedServer(Server[Any]):
    """The lowlevel server, advertising ``tools.listChanged`` to every client: the HTTP session
    manager builds its initialize answer from the defaults."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


class ToolServer:
    """The MCP server of one front. ``caller_of`` names the caller of a request (the HTTP
    front's identity; the stdio front has one caller, whoever its token is)."""

    def __init__(
        self,
        source: ToolSource,
        *,
        version: str,
        caller_of: Callable[[ServerRequestContext[Any, Any]], Any] = lambda ctx: None,
    ) -> None:
        self._source = source
        self._caller_of = caller_of
        # The connections to tell of a changed tool list: each client's, for as long as it is
        # open (the SDK drops a connection when its session ends; so does this set).
        self._connections: weakref.WeakSet[Connection] = weakref.WeakSet()
        # Each caller's tools by name, as last listed: a call finds its tool without listing
        # them all again (for ether mcp, a ListAgents per call). Emptied on every change.
        self._named: dict[Any, dict[str, ActionTool]] = {}
        # 2026-07-28 clients hear of changes on subscriptions/listen streams instead.
        self._changes = InMemorySubscriptionBus()
        self._listen = ListenHandler(self._changes)
        self.server = _ListChangedServer(
            "ether",
            version=version,
            instructions=(
                "Each tool is an action of an agent on an Ether host, named AGENT__ACTION; its "
                "input schema is the action's params schema."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self._listen,
        )
        self.server.middleware.append(self._remember_connection)

    async def _remember_connection(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        # The SDK hands handlers a per-request session wrapping the connection; the connection
        # is what carries notifications after the request (its standalone stream).
        self._connections.add(ctx.session._connection)
        return await call_next(ctx)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        named = await self._tools_of(self._caller_of(ctx), fresh=True)
        return types.ListToolsResult(tools=[tool_of(name, tool) for name, tool in named.items()])

    async def _tools_of(self, caller: Any, *, fresh: bool) -> dict[str, ActionTool]:
        named = None if fresh else self._named.get(caller)
        if named is None:
            named = self._named[caller] = name_tools(await self._source.tools(caller))
        return named

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        caller = self._caller_of(ctx)
        tool = (await self._tools_of(caller, fresh=False)).get(params.name)
        if tool is None:  # perhaps new since the caller's last listing
            tool = (await self._tools_of(caller, fresh=True)).get(params.name)
        if tool is None:
            # A tool the caller may not run is as unknown to it as one that does not exist.
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        wants_progress = bool(ctx.meta and ctx.meta.get("progress_token") is not None)
        send, receive = anyio.create_memory_object_stream[Mapping[str, Any]](PROGRESS_BUFFER)

        def on_progress(payload: Mapping[str, Any]) -> None:
            if wants_progress:
                with contextlib.suppress(anyio.WouldBlock):
                    send.send_nowait(payload)

        async def forward_progress() -> None:
            async with receive:
                async for payload in receive:
                    await ctx.session.report_progress(*progress_of(payload))

        # A notifications/cancelled for this request cancels this handler (the SDK's
        # dispatcher does), and with it the source's call: the Ether task is cancelled.
        async with anyio.create_task_group() as tg:
            tg.start_soon(forward_progress)
            with send:
                outcome = await self._source.call(
                    caller, tool, dict(params.arguments or {}), on_progress
                )
        return result_of(tool, outcome)

    async def announce_changes(self) -> None:
        """Send ``notifications/tools/list_changed`` to every open connection (and to every
        subscriptions/listen stream) each time the source's tools change; runs until
        cancelled."""
        async for _ in self._source.changes():
            self._named.clear()
            await self._changes.publish(ToolsListChanged())
            async with anyio.create_task_group() as tg:
                for connection in list(self._connections):
                    tg.start_soon(_tell_list_changed, connection)

    def end_subscriptions(self) -> None:
        """End every subscriptions/listen stream (they are open requests: a drain would wait
        for them)."""
        self._listen.close()

    async def serve_stdio(self) -> None:
        """Serve one client over this process's stdin and stdout until it closes them."""
        from mcp.server.stdio import stdio_server

        async with anyio.create_task_group() as tg:
            tg.start_soon(self.announce_changes)
            async with stdio_server() as (read, write):
                await self.server.run(read, write, self.server.create_initialization_options())
            tg.cancel_scope.cancel()
