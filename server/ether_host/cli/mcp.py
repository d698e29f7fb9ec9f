"""``ether mcp``: the host's agents as MCP tools over stdio, for an MCP client to spawn.

A gRPC client of a host like every other command (``--address``, ``--token``, TLS): the tools
are the actions ListAgents shows, each call is an ExecuteStream (its progress events become
``notifications/progress``; cancelling the call cancels the task; ``--timeout`` gives its task a
``budget.max_time``: a stream has no default deadline), and WatchEvents says when
to send ``notifications/tools/list_changed``. The MCP side is ``mcp_tools.ToolServer``, the one
``/mcp`` on the HTTP listener serves too. stdout carries MCP only; diagnostics go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ether_host.cli.client import EXIT_OK, Metadata, add_connection_arguments, connect

_PAGE = 1000
# After WatchEvents fails (the host restarted, the network dropped), wait this long before
# following it again; the tools are listed afresh on every tools/list anyway.
_WATCH_RETRY = 1.0
_STATUS = {1: "SUCCESS", 2: "ERROR", 3: "PARTIAL"}  # ether.v1.TaskStatus numbers


def add_parser(commands: Any) -> None:
    """Register ``mcp`` on the ``ether`` command's subparsers."""
    mcp = commands.add_parser(
        "mcp",
        help="serve the host's agents as MCP tools over stdio (for an MCP client to spawn)",
        description="An MCP server on stdin/stdout: every agent action is a tool named "
        "AGENT__ACTION. Connects to the host given by --address (or $ETHER_ADDRESS).",
    )
    mcp.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=None,
        help="end each tool call after SECONDS (the task's budget.max_time; a tool error "
        "DEADLINE_EXCEEDED). Default: none, a call runs until it ends or the client cancels it",
    )
    mcp.set_defaults(command_parser=mcp)
    add_connection_arguments(mcp)


def _positive_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < 10**9:  # a Duration's range, and a deadline that can pass
        raise argparse.ArgumentTypeError(f"expected seconds greater than 0, got {text!r}")
    return seconds


def run(args: argparse.Namespace) -> int:
    """Entry point of ``ether mcp``: serves until the client closes stdin."""
    import anyio

    anyio.run(_serve, args)
    return EXIT_OK


async def _serve(args: argparse.Namespace) -> None:
    from importlib.metadata import version

    from ether_host.mcp_tools import ToolServer

    channel, metadata = connect(args, aio=True)
    async with channel:
        source = _HostTools(channel, metadata, args.address, args.timeout)
        await ToolServer(source, version=version("ether-host")).serve_stdio()


class _HostTools:
    """A host's agents as an ``mcp_tools.ToolSource``, over gRPC."""

    def __init__(
        self, channel: Any, metadata: Metadata, address: str, timeout: float | None = None
    ) -> None:
        from ether.v1 import agent_io_pb2_grpc, supervisor_pb2_grpc

        self._agents = agent_io_pb2_grpc.AgentIOServiceStub(channel)
        self._supervisor = supervisor_pb2_grpc.SupervisorServiceStub(channel)
        self._metadata = metadata
        self._address = address
        self._timeout = timeout

    async def tools(self, caller: Any) -> list[Any]:
        """The tools; a host that cannot list them is an MCP error saying which and why."""
        import grpc
        import mcp_types
        from mcp.shared.exceptions import MCPError

        try:
            return await self._list_tools()
        except grpc.aio.AioRpcError as error:
            raise MCPError(
                mcp_types.INTERNAL_ERROR,
                f"the Ether host at {self._address} did not list its agents: "
                f"{error.code().name}: {error.details()} (ether mcp --address, or $ETHER_ADDRESS; "
                "--token or $ETHER_TOKEN)",
            ) from None

    async def _list_tools(self) -> list[Any]:
        from google.protobuf import json_format

        from ether.v1 import agent_io_pb2
        from ether_host.mcp_tools import ActionTool

        found: list[Any] = []
        token = ""
        while True:
            page = await self._agents.ListAgents(
                agent_io_pb2.ListAgentsRequest(page_size=_PAGE, page_token=token),
                metadata=self._metadata,
                timeout=30,
            )
            for agent in page.agents:
                found.extend(
                    ActionTool(
                        agent=agent.name,
                        action=action.name,
                        description=action.description,
                        params_schema=json_format.MessageToDict(action.params_schema),
                        result_schema=json_format.MessageToDict(action.result_schema),
                        idempotent=action.idempotent,
                        agent_description=agent.description,
                    )
                    for action in agent.actions
                    if not action.unusable  # calling it could only fail: not offered
                )
            token = page.next_page_token
            if not token:
                return found

    async def call(
        self, caller: Any, tool: Any, arguments: dict[str, Any], on_progress: Any
    ) -> Any:
        import grpc

        from ether.v1 import agent_io_pb2
        from ether_host.mcp_tools import ToolOutcome

        request = agent_io_pb2.ExecuteStreamRequest(
            input=agent_io_pb2.AgentInput(
                agent=tool.agent,
                action=tool.action,
                params_json=json.dumps(arguments).encode(),
                output_encoding=agent_io_pb2.DATA_ENCODING_JSON,
            )
        )
        if self._timeout is not None:
            # The task's own time limit rather than a gRPC deadline: the host ends the task
            # and says so in its own words (as /mcp's default_deadline does), where a client
            # deadline would race it with grpc's bare "Deadline Exceeded".
            request.input.context.budget.max_time.FromNanoseconds(round(self._timeout * 1e9))
        stream = self._agents.ExecuteStream(request, metadata=self._metadata)
        task_id = ""
        try:
            async for event in stream:
                task_id = event.task_id or task_id
                kind = event.WhichOneof("event")
                if kind == "progress":
                    on_progress(
                        {
                            "progress": event.progress.progress,
                            "total": event.progress.total,
                            "message": event.progress.message,
                        }
                    )
                elif kind == "output":
                    return _outcome(event.output)
        except grpc.aio.AioRpcError as error:
            # The host refused or ended the call: the message is Ether's, as a tool error.
            return ToolOutcome("ERROR", None, error.code().name, error.details() or "", task_id)
        finally:
            stream.cancel()  # a call cancelled here cancels the task on the host; else a no-op
        return ToolOutcome("ERROR", None, "UNAVAILABLE", "the stream ended without an output")

    async def changes(self) -> AsyncIterator[None]:
        import anyio
        import grpc

        from ether.v1 import supervisor_pb2

        seen = await self._signature()
        failing = False  # say once that the host cannot be followed, not every second
        while True:
            events = self._supervisor.WatchEvents(
                supervisor_pb2.WatchEventsRequest(after_sequence=-1), metadata=self._metadata
            )
            try:
                async for _ in events:
                    failing = False
                    now = await self._signature()
                    if now != seen:
                        seen = now
                        yield None
            except grpc.aio.AioRpcError as error:
                if not failing:
                    print(
                        f"ether mcp: cannot follow the agents of {self._address}: "
                        f"{error.code().name}: {error.details()}",
                        file=sys.stderr,
                    )
                failing = True
            finally:
                events.cancel()
            await anyio.sleep(_WATCH_RETRY)

    async def _signature(self) -> str:
        import grpc

        try:
            tools = await self._list_tools()
        except grpc.aio.AioRpcError:
            return ""
        return json.dumps(
            [(t.agent, t.action, t.description, t.params_schema, t.result_schema) for t in tools],
            sort_keys=True,
        )


def _outcome(output: Any) -> Any:
    from ether_host.mcp_tools import ToolOutcome

    data = json.loads(output.data_json) if output.data_json else None
    error: Mapping[str, str] = (
        {"code": output.error.code, "message": output.error.message}
        if output.HasField("error")
        else {}
    )
    return ToolOutcome(
        _STATUS.get(output.status, "ERROR"),
        data,
        error.get("code", ""),
        error.get("message", ""),
        output.task_id,
    )
