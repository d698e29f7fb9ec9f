"""An MCP stdio server seen as an agent: the second kind of link, behind the same contract.

Design (docs/interop.md, "MCP servers as agents"): the host speaks MCP to the server itself,
over the pipes the supervisor opened. There is no translating process in between: that would
cost every call a second stdio hop and a second JSON encoding, and it would put a process
between the supervisor and the server it owns. So the supervisor still spawns the server
(install phase, process group, sandbox, cgroup limits), restarts it by policy, stops it in
three phases (stdin closed as MCP's stdio transport asks, then SIGTERM, then SIGKILL) and keeps
its stderr as the agent's log, exactly as for agents that speak Ether's frames.

The client is this module's own JSON-RPC 2.0 over orjson, not the SDK's ``ClientSession``: the
session's pydantic model of every message both ways, its memory streams and its task per
request cost the host about 900 µs of CPU per call against 440 µs for the direct SDK client,
about 360 µs with this client, most of it gRPC (bench/RESULTS.md, "MCP"); a tool call needs
none of what the session adds. The SDK still defines the handshake: its versions, its
``InitializeResult`` and ``ListToolsResult`` models check those answers (off the hot path), and
its content-block models check any block that is not text.

``McpConnection`` is an ``AgentConnection`` to the dispatcher and the replica: tasks are
registered as ``Pending`` and answered through them, so replicas, queues, deadlines, budgets,
retries, ``agent.call``, Pipe and workflow stages need nothing of their own. Underneath:

- a task is a ``tools/call`` request (its JSON-RPC id is the progress token); its response
  finishes the ``Pending`` in the read callback: no task, future or cancel scope per call;
- a stdout line that is not JSON-RPC is logged and counted (the server keeps working), as is
  a response to an id the host never asked (then dropped);
- ``initialize`` offers the SDK's newest handshake version and accepts any the SDK speaks;
  another answer is a ``ProtocolMismatch`` naming both (FATAL, no restart can help);
- ``tools/list`` (every page) becomes a hello the agent layer already understands;
  ``notifications/tools/list_changed`` lists again and reports the new hello;
- ``notifications/progress`` go to the task's progress; cancelling a task sends
  ``notifications/cancelled`` for its request and fails it as cancelled;
- ``notifications/message`` goes to the agent's log (StreamLogs);
- the server's ``ping`` is answered; any other request of the server is answered with
  JSON-RPC error -32601 (this client offers no capabilities).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
import orjson
import structlog
from anyio.abc import ByteSendStream
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
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
METHOD_NOT_FOUND = -32601
MAX_CANCELLED_REMEMBERED = 4096
HelloSink = Callable[[dict[str, Any]], None]
_NEWLINE = orjson.OPT_APPEND_NEWLINE


class McpRequestError(Exception):
    """The server answered a request of the host with a JSON-RPC error."""

    def __init__(self, code: Any, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass(slots=True)
class _ToolCall:
    """A task's ``tools/call`` in flight."""

    rpc_id: int
    tool: str
    pending: Pending


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
        self._rpc_ids = itertools.count(1)
        self._calls: dict[str, _ToolCall] = {}  # by task frame id
        self._by_rpc: dict[int, _ToolCall] = {}  # the same, by JSON-RPC id
        self._requests: dict[int, asyncio.Future[dict[str, Any]]] = {}  # the host's own
        self._cancelled: set[Any] = set()  # ids cancelled: a late answer is dropped quietly
        self._outputs: dict[str, Validator | None] = {}  # outputSchema checks, by tool
        self._output_schemas: dict[str, dict[str, Any] | None] = {}
        self._initialized: types.InitializeResult | None = None
        self._eof = False
        self._tg: anyio.abc.TaskGroup | None = None

    # -- the pipes -----------------------------------------------------------------------

    async def run_reader(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Read stdout to EOF, answering what the server says."""
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

        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                task_status.started()
                await self._stdout.deliver(on_chunk)
                for line in splitter.finish():
                    self._from_server_guarded(line)
                self._closed_now()
                tg.cancel_scope.cancel()
        finally:
            self._tg = None
            self._closed_now()
            self._hello_seen.set()
            self.closed.set()

    def _closed_now(self) -> None:
        self._eof = True
        closed = LinkClosed(f"agent {self.agent}: stdout closed")
        self._fail_all(closed)
        self._calls.clear()
        self._by_rpc.clear()
        for waiter in self._requests.values():
            if not waiter.done():
                waiter.set_exception(closed)

    def _from_server_guarded(self, line: bytes | Oversized) -> None:
        # Runs in the loop's read callback: nothing may escape it.
        try:
            self._from_server(line)
        except Exception:  # a bug in handling one line must not end the link
            self.counters.protocol_errors += 1
            log.exception("stdout line handling failed", agent=self.agent)

    def _from_server(self, line: bytes | Oversized) -> None:
        """One stdout line: a response, a notification, a request, or noise for the log."""
        if isinstance(line, Oversized):
            self._trouble(f"a message of {line.length} bytes over the limit of {self.max_frame}")
            return
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            if line.strip():
                self._noise(line)
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self._noise(line)
            return
        method = message.get("method")
        rpc_id = message.get("id")
        if isinstance(method, str):
            if rpc_id is None:
                self._notification(method, message.get("params"))
            elif isinstance(rpc_id, int | str):
                self._spawn_send(self._answer_request(method, rpc_id))
            else:
                self._noise(line)
        elif isinstance(rpc_id, int | str) and ("result" in message or "error" in message):
            if isinstance(rpc_id, bool):  # an id of true must not pass for request 1
                self._noise(line)
                return
            self._response(rpc_id, message)
        else:
            self._noise(line)

    def _noise(self, line: bytes) -> None:
        self.counters.noise_lines += 1
        text = line.decode("utf-8", errors="replace")[:200]
        if not self.counters.noise_sample:
            self.counters.noise_sample = text
        self._trouble("stdout line that is not JSON-RPC ignored", line=text)

    def _trouble(self, what: str, **fields: Any) -> None:
        """A protocol problem: counted, logged by the host and in the agent's log."""
        self.counters.protocol_errors += 1
        log.warning(what, agent=self.agent, **fields)
        if self._on_log is not None:
            self._on_log({"level": "warning", "msg": f"mcp: {what}", "fields": fields})

    async def _send(self, message: dict[str, Any], pending: Pending | None = None) -> None:
        data = orjson.dumps(message, option=_NEWLINE)
        if len(data) > self.max_frame:
            raise TaskFailure(
                "frame_too_large",
                f"a message of {len(data)} bytes exceeds the limit of {self.max_frame}",
            )
        await self._writer.write_line(data, pending)

    def _spawn_send(self, message: dict[str, Any]) -> None:
        """Send from the read callback or a sync method: in the link's task group."""

        async def send() -> None:
            with contextlib.suppress(LinkClosed, TaskFailure):
                await self._send(message)

        if self._tg is not None and not self._eof:
            self._tg.start_soon(send)

    # -- what the server says ------------------------------------------------------------

    def _response(self, rpc_id: int | str, message: dict[str, Any]) -> None:
        call = self._by_rpc.pop(rpc_id, None) if isinstance(rpc_id, int) else None
        if call is not None:
            self._calls.pop(call.pending.frame_id, None)
            call.pending.finish(result=self._answer(call, message))
            return
        waiter = self._requests.pop(rpc_id, None) if isinstance(rpc_id, int) else None
        if waiter is not None:
            if not waiter.done():
                waiter.set_result(message)
            return
        if rpc_id in self._cancelled:
            self._cancelled.discard(rpc_id)  # the server answered before it saw the cancel
            return
        self._trouble("response to an unknown request id dropped", id=rpc_id)

    def _answer(self, call: _ToolCall, message: dict[str, Any]) -> dict[str, Any]:
        """A tools/call response as the task's result frame."""
        frame_id = call.pending.frame_id
        error = message.get("error")
        if error is not None:
            code, text = (
                (error.get("code"), error.get("message"))
                if isinstance(error, dict)
                else (None, None)
            )
            return mcp_mapping.error_frame(
                frame_id, mcp_mapping.MCP_ERROR, str(text or error), jsonrpc_code=code
            )
        try:
            return mcp_mapping.result_frame(
                frame_id, call.tool, message.get("result"), self._output_check(call.tool)
            )
        except (mcp_mapping.InvalidResult, SchemaError) as refused:
            return mcp_mapping.error_frame(
                frame_id,
                mcp_mapping.INVALID_RESULT,
                f"the MCP server's answer to tools/call of {call.tool} was refused: {refused}"[
                    :2000
                ],
            )

    def _output_check(self, tool: str) -> Validator | None:
        if tool not in self._outputs:
            self._outputs[tool] = mcp_mapping.output_validator(self._output_schemas.get(tool))
        return self._outputs[tool]

    def _notification(self, method: str, params: Any) -> None:
        params = params if isinstance(params, dict) else {}
        if method == "notifications/progress":
            self._progress(params)
        elif method == "notifications/message":
            self._server_log(params)
        elif method == "notifications/tools/list_changed" and self.hello and self._tg:
            self._tg.start_soon(self._refresh_tools)
        # notifications/cancelled (of a request the host never makes) and the rest: nothing to do

    def _progress(self, params: dict[str, Any]) -> None:
        token, progress = params.get("progressToken"), params.get("progress")
        call = self._by_rpc.get(token) if isinstance(token, int) else None
        if call is None or call.pending.on_progress is None:
            return
        if not isinstance(progress, int | float):
            return
        event: dict[str, Any] = {
            "type": "progress",
            "id": call.pending.frame_id,
            "progress": float(progress),
        }
        total, text = params.get("total"), params.get("message")
        if isinstance(total, int | float):
            event["total"] = float(total)
        if text and isinstance(text, str):
            event["message"] = text
        try:
            call.pending.on_progress(event)
        except Exception as error:  # the caller's stream is closing or full: drop it
            log.debug("progress dropped", agent=self.agent, error=repr(error))

    def _server_log(self, params: dict[str, Any]) -> None:
        if self._on_log is None or "data" not in params:
            return
        data, logger = params["data"], params.get("logger")
        message = data if isinstance(data, str) else orjson.dumps(data).decode()
        fields = {"logger": logger} if logger else {}
        level = mcp_mapping.LOG_LEVELS.get(str(params.get("level")), "info")
        self._on_log({"level": level, "msg": message, "fields": fields})

    @staticmethod
    def _answer_request(method: str, rpc_id: int | str) -> dict[str, Any]:
        if method == "ping":
            return {"jsonrpc": "2.0", "id": rpc_id, "result": {}}
        return {
            "jsonrpc": "2.0",
            "id": rpc_id,
            "error": {"code": METHOD_NOT_FOUND, "message": f"Method not found: {method}"},
        }

    async def _refresh_tools(self) -> None:
        try:
            hello = await self._list_tools()
        except Exception as error:  # the server's answer, or its end: keep the old list
            self._trouble("tools/list after tools/list_changed failed", error=str(error)[:500])
            return
        self.hello = hello
        if self._on_tools_changed is not None:
            self._on_tools_changed(hello)

    # -- the host's own requests ---------------------------------------------------------

    async def _request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """One request and its result; McpRequestError for an error answer, LinkClosed at EOF."""
        if self._eof:
            raise LinkClosed(f"agent {self.agent}: stdout closed")
        rpc_id = next(self._rpc_ids)
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._requests[rpc_id] = waiter
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rpc_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self._send(message)
            answer = await waiter
        finally:
            self._requests.pop(rpc_id, None)
        error = answer.get("error")
        if error is not None:
            if isinstance(error, dict):
                raise McpRequestError(error.get("code"), str(error.get("message")))
            raise McpRequestError(None, str(error))
        result = answer.get("result")
        if not isinstance(result, dict):
            raise McpRequestError(None, f"the result of {method} is not an object")
        return result

    # -- handshake -----------------------------------------------------------------------

    async def handshake(
        self,
        *,
        hello_timeout: float,
        legacy_after: float | None,
        welcome: Callable[[dict[str, Any]], dict[str, Any]],
        upgraded: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any] | None:
        """initialize, initialized, tools/list (every page): the agent's hello, made up."""
        del legacy_after, welcome, upgraded  # an MCP server has none of them
        with anyio.move_on_after(hello_timeout) as waited:
            try:
                answer = await self._request(
                    "initialize",
                    {
                        "protocolVersion": LATEST_HANDSHAKE_VERSION,
                        "capabilities": {},
                        "clientInfo": {"name": "ether", "version": __version__},
                    },
                )
                initialized = types.InitializeResult.model_validate(answer)
            except LinkClosed:
                raise HandshakeError("the process exited before answering initialize") from None
            except McpRequestError as error:
                raise HandshakeError(f"initialize failed: {error.message}") from None
            except ValidationError as error:
                raise HandshakeError(
                    f"initialize answered with an invalid result: {error}"
                ) from None
            if initialized.protocol_version not in MCP_VERSIONS:
                raise ProtocolMismatch(
                    f"the MCP server answered initialize with protocol version "
                    f"{initialized.protocol_version!r}; the host offered "
                    f"{LATEST_HANDSHAKE_VERSION!r} and speaks {', '.join(MCP_VERSIONS)}"
                )
            self._initialized = initialized
            self.protocol_version = initialized.protocol_version
            await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            try:
                hello = await self._list_tools()
            except LinkClosed:
                raise HandshakeError("the process exited before answering tools/list") from None
            except McpRequestError as error:
                raise HandshakeError(f"tools/list failed: {error.message}") from None
        if waited.cancelled_caught:
            raise HandshakeError(
                f"no answer to MCP initialize and tools/list within {hello_timeout:g}s (start_timeout)"
            )
        self.hello = hello
        self._hello_seen.set()
        return hello

    async def _list_tools(self) -> dict[str, Any]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_TOOL_PAGES):
            page = types.ListToolsResult.model_validate(
                await self._request("tools/list", {"cursor": cursor} if cursor else None)
            )
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                break
        self._output_schemas = {tool.name: tool.output_schema for tool in tools}
        self._outputs = {}
        info = self._initialized
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
        """Send the tools/call of a registered task; its response finishes ``pending``."""
        frame_id = pending.frame_id
        if self._tg is None or self._eof:
            self._pending.pop(frame_id, None)
            raise LinkClosed(f"agent {self.agent}: the MCP session is closed")
        rpc_id = next(self._rpc_ids)
        call = _ToolCall(rpc_id, str(frame.get("action")), pending)
        params: dict[str, Any] = {"name": call.tool, "arguments": frame.get("params") or {}}
        if pending.on_progress is not None:
            params["_meta"] = {"progressToken": rpc_id}
        self._calls[frame_id] = call
        self._by_rpc[rpc_id] = call
        try:
            await self._send(
                {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": params},
                pending,
            )
        except BaseException:
            if not pending.sent:
                self._calls.pop(frame_id, None)
                self._by_rpc.pop(rpc_id, None)
                self._pending.pop(frame_id, None)
            raise

    def _drop_call(self, frame_id: str, reason: str) -> _ToolCall | None:
        """Stop waiting for a task's tools/call and tell the server: notifications/cancelled."""
        call = self._calls.pop(frame_id, None)
        if call is None:
            return None
        self._by_rpc.pop(call.rpc_id, None)
        if len(self._cancelled) >= MAX_CANCELLED_REMEMBERED:  # most are never answered
            self._cancelled.clear()
        self._cancelled.add(call.rpc_id)
        self._spawn_send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": call.rpc_id, "reason": reason},
            }
        )
        return call

    async def cancel(self, frame_id: str, reason: str) -> None:
        """Cancel the task's tools/call: notifications/cancelled, and the task fails cancelled
        (the server answers a cancelled request with nothing)."""
        call = self._drop_call(frame_id, reason)
        if call is not None:
            log.info("cancelling tools/call", agent=self.agent, id=frame_id, reason=reason)
            call.pending.finish(failure=TaskFailure("cancelled", "the task was cancelled"))

    def forget(self, frame_id: str) -> None:
        self._drop_call(frame_id, "the host stopped waiting")  # the server may stop too
        super().forget(frame_id)

    async def shutdown(self, grace: float, reason: str) -> None:
        """MCP's stdio shutdown: close the server's stdin (then the supervisor signals it)."""
        del grace
        for frame_id in list(self._calls):
            await self.cancel(frame_id, reason)
        await self.close_stdin()
