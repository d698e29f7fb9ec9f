"""``/mcp``: Ether's agents as MCP tools over Streamable HTTP, on the HTTP listener.

The MCP server is ``mcp_tools.ToolServer`` (the same as ``ether mcp``'s), over ``CoreTools``: a
``ToolSource`` that calls the core directly, the functions the AgentIO servicer calls (the
supervisor's directory, the dispatcher's execute), never the gRPC port. The caller is the
identity ``HttpGuard`` named; it sees and calls the tools of the agents it holds
``agent.execute`` for. The SDK's session manager serves the transport and binds each MCP
session to the identity that opened it.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
from anyio.abc import TaskStatus
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ether_host import rights
from ether_host.agents import ERROR, Dispatcher, TaskEvent, TaskInput
from ether_host.auth import Identity
from ether_host.errors import EtherError, Unavailable
from ether_host.http.guard import request_identity, send_error
from ether_host.lifecycle import Lifecycle
from ether_host.mcp_tools import ActionTool, ProgressSink, ToolOutcome, ToolServer
from ether_host.reasons import Reason
from ether_host.supervisor import Supervisor

MCP_PATH = "/mcp"
_PAGE = 1000


class CoreTools:
    """The host's agents as a ``ToolSource``, through the core's faces."""

    def __init__(
        self,
        supervisor: Supervisor,
        dispatcher: Dispatcher,
        lifecycle: Lifecycle,
        default_deadline: float,
    ) -> None:
        self._supervisor = supervisor
        self._dispatcher = dispatcher
        self._lifecycle = lifecycle
        self._default_deadline = default_deadline

    def _all_tools(self) -> list[ActionTool]:
        found: list[ActionTool] = []
        token = ""
        while True:
            page = self._supervisor.list_agents(_PAGE, token)
            for agent in page.items:
                found.extend(
                    ActionTool(
                        agent=agent.name,
                        action=action.name,
                        description=action.description,
                        params_schema=action.params_schema,
                        result_schema=action.result_schema or {},
                        idempotent=action.idempotent,
                        agent_description=agent.description,
                    )
                    for action in agent.actions
                    if not action.unusable  # calling it could only fail: not offered
                )
            token = page.next_page_token
            if not token:
                return found

    async def tools(self, caller: Identity) -> list[ActionTool]:
        return [t for t in self._all_tools() if caller.may(rights.AGENT_EXECUTE, t.agent)]

    async def call(
        self,
        caller: Identity,
        tool: ActionTool,
        arguments: dict[str, Any],
        on_progress: ProgressSink,
    ) -> ToolOutcome:
        rights.require(caller, rights.AGENT_EXECUTE, tool.agent)
        # As a gRPC call without a deadline of its own gets default_deadline (interceptors.py).
        deadline = time.monotonic() + self._default_deadline if self._default_deadline else None
        task = TaskInput(agent=tool.agent, action=tool.action, params=arguments, deadline=deadline)

        def on_event(event: TaskEvent) -> None:
            if event.kind == "progress":
                on_progress(event.payload)

        try:
            result = await self._dispatcher.execute(task, on_event=on_event)
        except EtherError as error:  # refused or ended by the host: an error result, not a fault
            return ToolOutcome(ERROR, None, error.code.value, error.message, task.task_id)
        error_info = result.error
        return ToolOutcome(
            result.status,
            result.data,
            error_info.code if error_info else "",
            error_info.message if error_info else "",
            result.task_id,
        )

    def _signature(self) -> str:
        return json.dumps(
            [(t.agent, t.action, t.description, t.params_schema, t.result_schema)
             for t in self._all_tools()],
            sort_keys=True,
            default=str,
        )  # fmt: skip

    async def changes(self) -> AsyncIterator[None]:
        history = self._supervisor.events
        seen = self._signature()
        async for _ in history.follow(
            history.last_sequence, until=lambda: self._lifecycle.is_stopping
        ):
            now = self._signature()
            if now != seen:
                seen = now
                yield None


class _AsCaller:
    """The session manager's ASGI app, with HttpGuard's identity as the SDK's user (so an MCP
    session answers only the identity that opened it) and a count of the requests in flight
    other than the long-lived GET streams (the drain waits for those)."""

    def __init__(self, app: StreamableHTTPASGIApp, lifecycle: Lifecycle) -> None:
        self._app = app
        self._lifecycle = lifecycle
        self.in_flight = 0
        self.idle = anyio.Event()
        self.idle.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._lifecycle.is_stopping:
            # The session manager ends once the calls in flight have: a request that comes in
            # while the listener drains is refused as gRPC refuses a new call then.
            await send_error(send, Unavailable("the host is stopping", reason=Reason.HOST_STOPPING))
            return
        identity = request_identity(scope)
        token = AccessToken(token="", client_id=identity.name, scopes=sorted(identity.rights))
        scope["user"] = AuthenticatedUser(token)
        if scope.get("method") == "GET":  # the standalone stream: open until the session ends
            await self._app(scope, receive, send)
            return
        self.in_flight += 1
        self.idle = anyio.Event() if self.in_flight == 1 else self.idle
        try:
            await self._app(scope, receive, send)
        finally:
            self.in_flight -= 1
            if not self.in_flight:
                self.idle.set()


class McpSurface:
    """``/mcp`` on the HTTP listener: its route, and ``run`` for the session manager's life
    (started in the host's task group; at stop it waits for the calls in flight, within
    ``grace``, then ends every session so their streams close and the listener drains)."""

    def __init__(
        self, source: CoreTools, *, version: str, lifecycle: Lifecycle, auth: bool, grace: float
    ) -> None:
        self._tools = ToolServer(source, version=version, caller_of=_caller)
        # Without auth any web page could drive a loopback server through DNS rebinding:
        # then only loopback Host and Origin headers are let in (the SDK's check).
        loopback = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
        security = (
            None
            if auth
            else TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=loopback,
                allowed_origins=[f"http://{host}" for host in loopback]
                + [f"https://{host}" for host in loopback],
            )
        )
        self._manager = StreamableHTTPSessionManager(
            app=self._tools.server, security_settings=security
        )
        self._endpoint = _AsCaller(StreamableHTTPASGIApp(self._manager), lifecycle)
        self._lifecycle = lifecycle
        self._grace = grace
        self.route = Route(MCP_PATH, endpoint=self._endpoint)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with self._manager.run(), anyio.create_task_group() as tg:
            tg.start_soon(self._tools.announce_changes)
            task_status.started()
            await self._lifecycle.stopping.wait()
            self._tools.end_subscriptions()
            with anyio.move_on_after(self._grace):
                await self._endpoint.idle.wait()
            tg.cancel_scope.cancel()


def _caller(ctx: ServerRequestContext[Any, Any]) -> Identity:
    request = ctx.request
    assert request is not None, "an MCP request over HTTP carries its HTTP request"
    return request_identity(request.scope)
