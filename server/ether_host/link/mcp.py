"""An MCP stdio server seen as an agent: the second kind of link, behind the same contract.

Design (docs/interop.md, "MCP servers as agents"): the host speaks MCP to the server itself,
through the official ``mcp`` SDK's ``ClientSession``, over the pipes the supervisor opened.
There is no translating process in between: that would cost every call a second stdio hop
and a second JSON encoding (the benchmark measures exactly this path), and it would put a
process between the supervisor and the server it owns. So the supervisor still spawns the
server (install phase, process group, sandbox, cgroup limits), restarts it by policy, stops
it in three phases (stdin closed as MCP's stdio transport asks, then SIGTERM, then SIGKILL)
and keeps its stderr as the agent's log, exactly as for agents that speak Ether's frames.

``McpConnection`` is an ``AgentConnection`` to the dispatcher and the replica: tasks are
registered as ``Pending`` and answered through them, so replicas, queues, deadlines, budgets,
retries, ``agent.call``, Pipe and workflow stages need nothing of their own. Underneath:

- stdout lines go to the session's read stream as ``SessionMessage``; a line that is not
  JSON-RPC is logged and counted (the server keeps working), as is a response to an id
  the host never asked (then dropped: the SDK would drop it silently);
- what the session writes goes to stdin, one JSON line each, through the link's writer;
- ``initialize`` offers the SDK's newest handshake version and accepts any the SDK speaks;
  another answer is a ``ProtocolMismatch`` naming both (FATAL, no restart can help);
- ``tools/list`` (every page) becomes a hello the agent layer already understands;
  ``notifications/tools/list_changed`` lists again and reports the new hello;
- a task is a ``tools/call`` with a progress callback; cancelling its scope makes the SDK send
  ``notifications/cancelled`` for it;
- ``notifications/message`` goes to the agent's log (StreamLogs).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
import orjson
import structlog
from anyio.abc import ByteSendStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import ValidationError

from ether_host import __version__
from ether_host.link import mcp_mapping
from ether_host.link.connection import AgentConnection, ChunkSource
from ether_host.link.lines import LineSplitter, Oversized
from ether_host.link.pending import (
    HandshakeError,
    LinkClosed,
    Pending,
    ProtocolMismatch,
    TaskFailure,
)

log = structlog.get_logger("ether.link.mcp")

MCP_VERSIONS = HANDSHAKE_PROTOCOL_VERSIONS
MAX_TOOL_PAGES = 1000  # a server whose nextCursor never ends is cut off here
HelloSink = Callable[[dict[str, Any]], None]


class McpConnection(AgentConnection):
    """Speaks MCP to one server process over its stdin/stdout."""

    def __init__(
        self,
        stdin: ByteSendStream,
        stdout: ChunkSource,
        *,
        agent: str,
        max_frame: int,
        max_concurrency: int,
        on_log: Callable[[dict[str, Any]], None] | None = None,
        on_tools_changed: HelloSink | None = None,
    ) -> None:
        super().__init__(stdin, stdout, agent=agent, max_frame=max_frame, on_log=on_log)
        self.max_concurrency = max_concurrency
        self.protocol_version = ""
        self._on_tools_changed = on_tools_changed
        self._calls: dict[str, anyio.CancelScope] = {}
        self._asked: set[Any] = set()  # ids of the requests the session sent, not yet answered
        self._eof = False
        self._session: ClientSession | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._refresh_ids = itertools.count(1)
        to_session: tuple[
            MemoryObjectSendStream[SessionMessage | Exception],
            MemoryObjectReceiveStream[SessionMessage | Exception],
        ] = anyio.create_memory_object_stream(math.inf)
        from_session: tuple[
            MemoryObjectSendStream[SessionMessage], MemoryObjectReceiveStream[SessionMessage]
        ] = anyio.create_memory_object_stream(math.inf)
        self._to_session, self._session_reads = to_session
        self._session_writes, self._from_session = from_session

    # -- the pipes -----------------------------------------------------------------------

    async def run_reader(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run the session over the pipes until stdout ends."""
        splitter = LineSplitter(self.max_frame)

        def on_chunk(chunk: bytes) -> None:
            try:
                lines = splitter.feed(chunk)
            except Exception:
                self.counters.protocol_errors += 1
                log.exception("splitting stdout failed", agent=self.agent)
                return
            for line in lines:
                self._from_server_guarded(line)

        session = ClientSession(
            self._session_reads,
            self._session_writes,
            logging_callback=self._server_log,
            message_handler=self._server_notification,
            client_info=types.Implementation(name="ether", version=__version__),
        )
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self._write_stdin)
                async with session:
                    self._session = session
                    task_status.started()
                    await self._stdout.deliver(on_chunk)
                    for line in splitter.finish():
                        self._from_server_guarded(line)
                    self._eof = True
                    self._fail_all(LinkClosed(f"agent {self.agent}: stdout closed"))
                    tg.cancel_scope.cancel()
        finally:
            self._eof = True
            self._tg = None
            self._fail_all(LinkClosed(f"agent {self.agent}: stdout closed"))
            self._to_session.close()
            self._session_writes.close()
            self._hello_seen.set()
            self.closed.set()

    def _from_server_guarded(self, line: bytes | Oversized) -> None:
        # Runs in the loop's read callback: nothing may escape it.
        try:
            self._from_server(line)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the session ended (the process is going): nobody reads what is left
        except Exception:  # a bug in handling one line must not end the link
            self.counters.protocol_errors += 1
            log.exception("stdout line handling failed", agent=self.agent)

    def _from_server(self, line: bytes | Oversized) -> None:
        """One stdout line to the session, or to the log when it is not JSON-RPC."""
        if isinstance(line, Oversized):
            self._trouble(f"a message of {line.length} bytes over the limit of {self.max_frame}")
            return
        if not line.strip():
            return
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except (ValidationError, ValueError):
            self.counters.noise_lines += 1
            text = line.decode("utf-8", errors="replace")[:200]
            if not self.counters.noise_sample:
                self.counters.noise_sample = text
            self._trouble("stdout line that is not JSON-RPC ignored", line=text)
            return
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            if message.id not in self._asked:
                self._trouble("response to an unknown request id dropped", id=message.id)
                return
            self._asked.discard(message.id)
        self._to_session.send_nowait(SessionMessage(message))

    async def _write_stdin(self) -> None:
        async for item in self._from_session:
            message = item.message
            if isinstance(message, types.JSONRPCRequest):
                self._asked.add(message.id)
            data = message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
            try:
                await self._writer.write_line(data)
            except LinkClosed:
                return

    def _trouble(self, what: str, **fields: Any) -> None:
        """A protocol problem: counted, logged by the host and in the agent's log."""
        self.counters.protocol_errors += 1
        log.warning(what, agent=self.agent, **fields)
        if self._on_log is not None:
            self._on_log({"level": "warning", "msg": f"mcp: {what}", "fields": fields})

    # -- what the server says on its own -------------------------------------------------

    async def _server_log(self, params: types.LoggingMessageNotificationParams) -> None:
        if self._on_log is None:
            return
        data = params.data
        message = data if isinstance(data, str) else orjson.dumps(data).decode()
        fields = {"logger": params.logger} if params.logger else {}
        level = mcp_mapping.LOG_LEVELS.get(str(params.level), "info")
        self._on_log({"level": level, "msg": message, "fields": fields})

    async def _server_notification(self, message: Any) -> None:
        listed = self.hello is not None and self._tg is not None
        if isinstance(message, types.ToolListChangedNotification) and listed:
            assert self._tg is not None
            self._tg.start_soon(self._refresh_tools)

    async def _refresh_tools(self) -> None:
        try:
            hello = await self._list_tools()
        except Exception as error:  # the server's answer, or its end: keep the old list
            self._trouble("tools/list after tools/list_changed failed", error=str(error)[:500])
            return
        self.hello = hello
        if self._on_tools_changed is not None:
            self._on_tools_changed(hello)

    # -- handshake -----------------------------------------------------------------------

    async def handshake(
        self,
        *,
        hello_timeout: float,
        legacy_after: float | None,
        welcome: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> dict[str, Any] | None:
        """initialize, initialized, tools/list (every page): the agent's hello, made up."""
        del legacy_after, welcome  # an MCP server has neither
        session = self._session
        assert session is not None, "run_reader starts the session first"
        with anyio.move_on_after(hello_timeout) as waited:
            try:
                result = await session.send_request(
                    types.InitializeRequest(
                        params=types.InitializeRequestParams(
                            protocol_version=LATEST_HANDSHAKE_VERSION,
                            capabilities=types.ClientCapabilities(),
                            client_info=types.Implementation(name="ether", version=__version__),
                        )
                    ),
                    types.InitializeResult,
                )
            except MCPError as error:
                if self._eof:
                    raise HandshakeError("the process exited before answering initialize") from None
                raise HandshakeError(f"initialize failed: {error.error.message}") from None
            except ValidationError as error:
                raise HandshakeError(
                    f"initialize answered with an invalid result: {error}"
                ) from None
            if result.protocol_version not in MCP_VERSIONS:
                raise ProtocolMismatch(
                    f"the MCP server answered initialize with protocol version "
                    f"{result.protocol_version!r}; the host offered {LATEST_HANDSHAKE_VERSION!r} "
                    f"and speaks {', '.join(MCP_VERSIONS)}"
                )
            session.adopt(result)
            self.protocol_version = result.protocol_version
            await session.send_notification(types.InitializedNotification())
            hello = await self._list_tools(result)
        if waited.cancelled_caught:
            raise HandshakeError(
                f"no answer to MCP initialize and tools/list within {hello_timeout:g}s (start_timeout)"
            )
        self.hello = hello
        self._hello_seen.set()
        return hello

    async def _list_tools(
        self, initialized: types.InitializeResult | None = None
    ) -> dict[str, Any]:
        session = self._session
        assert session is not None
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_TOOL_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                break
        info = initialized or session.initialize_result
        server = info.server_info if info is not None else None
        return {
            "type": "hello",
            "protocol": f"mcp/{self.protocol_version}",
            "agent": {
                "name": server.name if server else "",
                "version": server.version if server else "",
                "description": (info.instructions or "") if info is not None else "",
            },
            "actions": [mcp_mapping.tool_action(tool) for tool in tools],
            "capabilities": {"max_concurrency": self.max_concurrency, "cancel": True},
        }

    # -- tasks ---------------------------------------------------------------------------

    async def send_task(self, pending: Pending, frame: dict[str, Any]) -> None:
        """Start the tools/call of a registered task; its answer finishes ``pending``."""
        if self._tg is None or self._eof or self._session is None:
            self._pending.pop(pending.frame_id, None)
            raise LinkClosed(f"agent {self.agent}: the MCP session is closed")
        scope = anyio.CancelScope()
        self._calls[pending.frame_id] = scope
        pending.sent = True  # from here the server may run it: a cancel must follow
        self._tg.start_soon(self._call, pending, frame, scope)

    async def _call(
        self, pending: Pending, frame: dict[str, Any], scope: anyio.CancelScope
    ) -> None:
        session = self._session
        assert session is not None
        frame_id = pending.frame_id

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            sink = pending.on_progress
            if sink is None:
                return
            event: dict[str, Any] = {"type": "progress", "id": frame_id, "progress": progress}
            if total is not None:
                event["total"] = total
            if message:
                event["message"] = message
            try:
                sink(event)
            except Exception as error:  # the caller's stream is closing or full: drop it
                log.debug("progress dropped", agent=self.agent, error=repr(error))

        answer: dict[str, Any] | None = None
        failure: Exception | None = None
        try:
            with scope:
                result = await session.call_tool(
                    str(frame.get("action")),
                    frame.get("params") or {},
                    progress_callback=on_progress,
                )
                answer = mcp_mapping.result_frame(frame_id, result)
            if scope.cancelled_caught:
                failure = TaskFailure("cancelled", "the task was cancelled")
        except MCPError as error:
            if self._eof:
                failure = LinkClosed(f"agent {self.agent}: stdout closed")
            else:
                answer = mcp_mapping.error_frame(
                    frame_id,
                    mcp_mapping.MCP_ERROR,
                    error.error.message,
                    jsonrpc_code=error.error.code,
                )
        except (ValidationError, RuntimeError, ValueError) as error:
            answer = mcp_mapping.error_frame(
                frame_id,
                mcp_mapping.INVALID_RESULT,
                f"the MCP server's answer to tools/call was refused: {error}"[:2000],
            )
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            failure = LinkClosed(f"agent {self.agent}: the MCP session closed")
        except Exception as error:  # a bug here fails this task, never the link or the host
            log.exception("tools/call failed", agent=self.agent, tool=frame.get("action"))
            answer = mcp_mapping.error_frame(
                frame_id, "internal", f"the host failed this tools/call: {type(error).__name__}"
            )
        finally:
            self._calls.pop(frame_id, None)
        pending.finish(result=answer, failure=failure)

    async def cancel(self, frame_id: str, reason: str) -> None:
        """Cancel the task's tools/call: the SDK sends notifications/cancelled for it."""
        scope = self._calls.get(frame_id)
        if scope is not None:
            log.info("cancelling tools/call", agent=self.agent, id=frame_id, reason=reason)
            scope.cancel()

    def forget(self, frame_id: str) -> None:
        scope = self._calls.pop(frame_id, None)
        if scope is not None:  # nobody waits for it any more: the server may stop too
            scope.cancel()
        super().forget(frame_id)

    async def shutdown(self, grace: float, reason: str) -> None:
        """MCP's stdio shutdown: close the server's stdin (then the supervisor signals it)."""
        del grace, reason
        for scope in list(self._calls.values()):
            scope.cancel()
        await self.close_stdin()
