"""One agent process seen through its stdin/stdout: handshake, tasks, calls.

The connection owns the frame protocol only. Spawning, restarting and
stopping the process belong to the supervisor; deadlines, budgets and
routing of host calls belong to the agents layer, which passes callbacks in.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import orjson
import structlog
from anyio.abc import ByteSendStream, TaskGroup

from ether_host.link.lines import LineSplitter, Oversized
from ether_host.link.pending import (
    HandshakeError,
    LinkClosed,
    Pending,
    ProgressSink,
    ProtocolMismatch,
    TaskFailure,
)
from ether_host.link.writer import StdinWriter

log = structlog.get_logger("ether.link")

PROTOCOL_VERSIONS = (1,)
SHUTTING_DOWN = "shutting_down"  # the error code of a task refused because the agent drains
# The error code of a task sent in the seeds' envelope to an agent that then said hello: an
# agent drops every frame before its welcome, so it never ran the task (safe to send again).
NOT_RUN = "not_run"
DEFAULT_MAX_FRAME = 16 * 1024 * 1024
_ID_IN_HEAD = re.compile(rb'"id"\s*:\s*"([^"]{1,64})"')

CallHandler = Callable[["AgentConnection", dict[str, Any]], Awaitable[Any]]


class ChunkSource(Protocol):
    """An agent's stdout as the loop reads it (supervisor/pipes.py: StdoutPipe)."""

    async def deliver(self, on_chunk: Callable[[bytes], None]) -> None:
        """Call ``on_chunk`` with every chunk read, in order; return at EOF."""


@dataclass
class Counters:
    """What went wrong on this link, for ListProcesses and logs."""

    noise_lines: int = 0
    protocol_errors: int = 0
    noise_sample: str = ""


class AgentConnection:
    """Speaks the frame protocol to one process over its stdin/stdout."""

    def __init__(
        self,
        stdin: ByteSendStream,
        stdout: ChunkSource,
        *,
        agent: str,
        max_frame: int = DEFAULT_MAX_FRAME,
        on_call: CallHandler | None = None,
        on_log: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.agent = agent
        self.max_frame = max_frame
        # stdout's line splitter (run_reader), told the link's max frame once hello lowers it.
        self._splitter: LineSplitter | None = None
        self.hello: dict[str, Any] | None = None
        self.legacy = False
        self.fatal: dict[str, Any] | None = None
        self.counters = Counters()
        self.closed = anyio.Event()
        # Set by the first task the agent answers `shutting_down` (protocol rule 9): the link
        # says nothing else when the agent drains (after an outside SIGTERM, say), and from then
        # on it refuses every task, so nothing more may be sent to it.
        self.draining = anyio.Event()
        self._writer = StdinWriter(stdin, agent)
        self._stdout = stdout
        self._on_call = on_call
        self._on_log = on_log
        self._ids = itertools.count(1)
        self._pending: dict[str, Pending] = {}
        self._hello_seen = anyio.Event()
        # Set when the seeds' fallback is taken (handshake): how to answer a hello that comes
        # after it, and whom to tell (the replica) once it is answered.
        self._late_welcome: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        self._upgraded: Callable[[dict[str, Any]], None] | None = None
        self._pongs: dict[str, anyio.Event] = {}
        self._own_calls: dict[str, anyio.CancelScope] = {}
        self._calls_group: TaskGroup | None = None

    # -- reading -------------------------------------------------------------------------

    async def run_reader(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Read stdout to EOF, dispatching frames. Ends when the stream ends."""
        splitter = self._splitter = LineSplitter(self.max_frame)

        def on_chunk(chunk: bytes) -> None:
            # Runs in the loop's read callback: nothing may escape it. A frame that fails to
            # be handled is counted and logged, and never passes for the end of stdout.
            try:
                lines = splitter.feed(chunk)
            except Exception:
                self.counters.protocol_errors += 1
                log.exception("splitting stdout failed", agent=self.agent)
                return
            for line in lines:
                self._dispatch_guarded(line)

        try:
            async with anyio.create_task_group() as calls:
                self._calls_group = calls
                task_status.started()
                await self._stdout.deliver(on_chunk)
                for line in splitter.finish():
                    self._dispatch_guarded(line)
                self._fail_all(LinkClosed(f"agent {self.agent}: stdout closed"))
                calls.cancel_scope.cancel()
        finally:
            self._calls_group = None
            self._fail_all(LinkClosed(f"agent {self.agent}: stdout closed"))
            self._hello_seen.set()
            self.closed.set()

    def _dispatch_guarded(self, line: bytes | Oversized) -> None:
        try:
            self._dispatch_line(line)
        except Exception:  # a bug in handling one frame must not end the link
            self.counters.protocol_errors += 1
            log.exception("frame handling failed", agent=self.agent)

    def _dispatch_line(self, line: bytes | Oversized) -> None:
        if isinstance(line, Oversized):
            self._oversized(line)
            return
        if line[:1] == b"{":
            try:
                frame = orjson.loads(line)  # the fast path: one well-formed frame
            except orjson.JSONDecodeError:
                pass
            else:
                if isinstance(frame, dict):
                    self._dispatch(frame)
                    return
        if not line.strip():
            return
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            text = line.decode("utf-8", errors="replace")
            self._violation("invalid UTF-8 on stdout (decoded with replacement)", text)
        if not text.lstrip().startswith("{"):
            self.counters.noise_lines += 1
            if not self.counters.noise_sample:
                self.counters.noise_sample = text[:200]
            log.info(
                "stdout noise",
                agent=self.agent,
                line=text[:200],
                noise_lines=self.counters.noise_lines,
            )
            return
        try:
            frame = json.loads(text)
        except ValueError as error:
            self._violation(f"unparsable JSON frame: {error}", text)
            return
        if not isinstance(frame, dict):
            self._violation("frame is not a JSON object", text)
            return
        self._dispatch(frame)

    def _violation(self, what: str, text: str) -> None:
        self.counters.protocol_errors += 1
        log.warning("protocol violation", agent=self.agent, problem=what, line=text[:200])

    def _oversized(self, line: Oversized) -> None:
        self.counters.protocol_errors += 1
        match = _ID_IN_HEAD.search(line.head)
        frame_id = match.group(1).decode("utf-8", errors="replace") if match else None
        log.warning(
            "frame too large",
            agent=self.agent,
            bytes=line.length,
            limit=self.max_frame,
            id=frame_id,
        )
        pending = self._pending.get(frame_id or "")
        if pending is not None:
            pending.finish(
                failure=TaskFailure(
                    "frame_too_large",
                    f"agent {self.agent} sent a result of {line.length} bytes; the limit is {self.max_frame} bytes",
                )
            )

    def _dispatch(self, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind is None and "status" in frame:
            kind = "result"
        if kind == "result":
            self._on_result(frame)
        elif kind == "progress" or kind == "log":
            self._on_task_event(kind, frame)
        elif kind == "hello":
            if self.hello is None and self.legacy:
                self._upgrade(frame)
            elif self.hello is None:
                self.hello = frame
                self._hello_seen.set()
            else:
                self._violation("second hello", json.dumps(frame)[:200])
        elif kind == "call":
            self._start_call(frame)
        elif kind == "cancel":
            self._cancel_own_call(str(frame.get("id", "")))
        elif kind == "pong":
            waiter = self._pongs.pop(str(frame.get("id", "")), None)
            if waiter is not None:
                waiter.set()
        elif kind == "ping":
            self._spawn(self.send({"type": "pong", "id": frame.get("id", "")}))
        elif kind == "fatal":
            self.fatal = frame
            log.error(
                "agent fatal",
                agent=self.agent,
                code=frame.get("code"),
                message=frame.get("message"),
            )
            self._hello_seen.set()
        else:
            self._violation(f"unknown frame type {kind!r}", json.dumps(frame)[:200])

    def _on_result(self, frame: dict[str, Any]) -> None:
        frame_id = frame.get("id")
        pending = self._pending.get(frame_id) if isinstance(frame_id, str) else None
        if pending is None or pending.finished:
            log.warning(
                "result for unknown or finished task dropped", agent=self.agent, id=frame_id
            )
            return
        error = frame.get("error")
        if isinstance(error, dict) and error.get("code") == SHUTTING_DOWN:
            if not self.draining.is_set():
                log.info("agent is shutting down; no more tasks to it", agent=self.agent)
            self.draining.set()
        pending.finish(result=frame)

    def _on_task_event(self, kind: str, frame: dict[str, Any]) -> None:
        task_id = frame.get("id") if kind == "progress" else frame.get("task_id")
        pending = self._pending.get(task_id) if isinstance(task_id, str) else None
        if kind == "log" and self._on_log is not None:
            self._on_log(frame)
        sink = (
            None
            if pending is None
            else (pending.on_progress if kind == "progress" else pending.on_log)
        )
        if sink is not None:
            try:
                sink(frame)
            except Exception as error:  # the caller's stream is closing or full: drop the event
                log.debug("task event dropped", agent=self.agent, kind=kind, error=repr(error))

    # -- host calls ----------------------------------------------------------------------

    def _spawn(self, coroutine: Awaitable[Any]) -> None:
        async def run() -> None:
            await coroutine

        if self._calls_group is not None:
            self._calls_group.start_soon(run)

    def _start_call(self, frame: dict[str, Any]) -> None:
        call_id = str(frame.get("id", ""))
        pending = self._pending.get(str(frame.get("task_id", "")))
        scope = anyio.CancelScope()
        self._own_calls[call_id] = scope
        if pending is not None:
            if pending.calls is None:
                pending.calls = set()
            pending.calls.add(scope)

        async def serve() -> None:
            reply: dict[str, Any]
            try:
                with scope:
                    if self._on_call is None:
                        raise TaskFailure("permission_denied", "this host serves no calls")
                    result = await self._on_call(self, frame)
                    reply = {"type": "reply", "id": call_id, "status": "ok", "result": result}
                if scope.cancelled_caught:
                    reply = _error_reply(call_id, "cancelled", "the task that made this call ended")
            except TaskFailure as failure:
                reply = _error_reply(call_id, failure.code, failure.message)
            except Exception as error:
                log.exception("host call crashed", agent=self.agent, method=frame.get("method"))
                reply = _error_reply(
                    call_id, "internal", f"host call failed: {type(error).__name__}"
                )
            finally:
                self._own_calls.pop(call_id, None)
                if pending is not None and pending.calls is not None:
                    pending.calls.discard(scope)
            with contextlib.suppress(LinkClosed):
                await self.send(reply)

        self._spawn(serve())

    def _cancel_own_call(self, call_id: str) -> None:
        scope = self._own_calls.get(call_id)
        if scope is not None:
            scope.cancel()

    # -- writing -------------------------------------------------------------------------

    async def send(self, frame: dict[str, Any], pending: Pending | None = None) -> None:
        """Write one frame as one line.

        The whole line is queued before the first await that can be cancelled
        (the drain): a cancelled sender never leaves half a frame behind, and
        ``pending.sent`` tells whether it went.
        """
        data = orjson.dumps(frame, option=orjson.OPT_APPEND_NEWLINE)
        if len(data) > self.max_frame:
            raise TaskFailure(
                "frame_too_large",
                f"frame of {len(data)} bytes exceeds the limit of {self.max_frame}",
            )
        await self._writer.write_line(data, pending)

    async def close_stdin(self) -> None:
        await self._writer.close()

    # -- handshake -----------------------------------------------------------------------

    async def handshake(
        self,
        *,
        hello_timeout: float,
        legacy_after: float | None,
        welcome: Callable[[dict[str, Any]], dict[str, Any]],
        upgraded: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any] | None:
        """Wait for hello and answer welcome. Returns the hello, or None in legacy mode.

        With ``legacy_after`` set, an agent silent for that long is taken as a seeds-style
        agent that answers bare task envelopes. A hello that still comes later is welcomed
        then (a slow start: heavy imports on a loaded machine), the tasks sent meanwhile in
        the seeds' envelope end ``not_run`` (an agent drops frames before its welcome), and
        ``upgraded`` is told the hello, so the agent's actions and concurrency become its own.
        """
        wait_for = legacy_after if legacy_after is not None else hello_timeout
        with anyio.move_on_after(wait_for):
            await self._hello_seen.wait()
        if self.fatal is not None:
            raise HandshakeError(f"agent sent fatal before hello: {self.fatal.get('message', '')}")
        if self.hello is None:
            if self.closed.is_set():
                raise HandshakeError("the process exited before saying hello")
            if legacy_after is None:
                raise HandshakeError(f"no hello within {hello_timeout:g}s")
            self.legacy = True
            self._late_welcome, self._upgraded = welcome, upgraded
            return None
        answer, accepted = self._welcome_for(self.hello, welcome)
        await self.send(answer)
        if not accepted:
            await self.close_stdin()
            raise ProtocolMismatch(_mismatch(self.hello))
        return self.hello

    def _welcome_for(
        self, hello: dict[str, Any], welcome: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> tuple[dict[str, Any], bool]:
        """The welcome answering ``hello`` (the frame limit agreed), and whether it accepts
        it: a hello choosing a protocol this host does not speak gets a refusing one."""
        protocol = hello.get("protocol")
        if protocol not in PROTOCOL_VERSIONS:
            supported = list(PROTOCOL_VERSIONS)
            refusal = {
                "code": "protocol_version_unsupported",
                "message": f"protocol {protocol!r} is not supported; this host speaks {supported}",
                "data": {"supported": supported},
            }
            return {"type": "welcome", "protocol": 0, "error": refusal}, False
        capabilities = hello.get("capabilities") or {}
        agent_max = int(capabilities.get("max_frame") or DEFAULT_MAX_FRAME)
        self.max_frame = min(self.max_frame, agent_max)
        if self._splitter is not None:  # the agent's lines are held to it too (protocol.md 10)
            self._splitter.max_line = self.max_frame
        answer = welcome(hello) | {
            "type": "welcome",
            "protocol": protocol,
            "max_frame": self.max_frame,
        }
        return answer, True

    def _upgrade(self, hello: dict[str, Any]) -> None:
        """A hello after the seeds' fallback (see handshake): welcome it before any other frame
        goes out, end the tasks it was sent in the seeds' envelope ``not_run``, tell the
        replica. Refused (a protocol this host does not speak), the agent's stdin is closed:
        it exits, and its restart policy decides what follows."""
        welcome = self._late_welcome
        assert welcome is not None  # set with ``legacy`` when the fallback is taken
        answer, accepted = self._welcome_for(hello, welcome)
        dropped = [pending for pending in self._pending.values() if not pending.finished]
        log.info(
            "agent said hello after the seeds' fallback",
            agent=self.agent,
            accepted=accepted,
            tasks_not_run=len(dropped),
        )
        if not accepted:
            log.warning("agent refused", agent=self.agent, problem=_mismatch(hello))
        self.hello, self.legacy = hello, False
        for pending in dropped:
            error = {"code": NOT_RUN, "message": "sent before the agent's welcome"}
            pending.finish(
                result={"type": "result", "id": pending.frame_id, "status": "error", "error": error}
            )
        data = orjson.dumps(answer, option=orjson.OPT_APPEND_NEWLINE)
        if self._writer.queues_nowait:  # queued now: no task frame can go out before it
            with contextlib.suppress(LinkClosed):
                self._writer.queue_line(data)
        else:
            self._spawn(self.send(answer))
        if not accepted:
            self._spawn(self.close_stdin())
        elif self._upgraded is not None:
            self._upgraded(hello)

    # -- tasks ---------------------------------------------------------------------------

    def next_id(self) -> str:
        return f"h-{next(self._ids)}"

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def tasks_in_flight(self) -> list[Pending]:
        """The tasks sent and not yet answered, oldest first (whom a stderr line is about)."""
        return [pending for pending in self._pending.values() if not pending.finished]

    def pending(self, frame_id: str) -> Pending | None:
        return self._pending.get(frame_id)

    def register(
        self,
        frame_id: str,
        *,
        on_progress: ProgressSink | None = None,
        on_log: ProgressSink | None = None,
    ) -> Pending:
        """Expect a result for ``frame_id`` (from next_id); send the task with send_task."""
        pending = Pending(frame_id, on_progress, on_log)
        self._pending[frame_id] = pending
        return pending

    async def send_task(self, pending: Pending, frame: dict[str, Any]) -> None:
        """Send a registered task. If this raises before the frame went out, the task is
        forgotten; after (``pending.sent``), the caller owns cancelling it."""
        if self.legacy and self.hello is None:
            frame = {"id": frame["id"], "type": "task", "payload": frame.get("params") or {}}
        try:
            await self.send(frame, pending)
        except BaseException:
            if not pending.sent:
                self._pending.pop(pending.frame_id, None)
            raise

    @property
    def sends_nowait(self) -> bool:
        """True when send_task_nowait works: this kind sends tasks as frames on stdin (not a kind
        with a send_task of its own, such as MCP's) and stdin is asyncio's."""
        return type(self).send_task is AgentConnection.send_task and self._writer.queues_nowait

    def send_task_nowait(self, pending: Pending, frame: dict[str, Any]) -> bool:
        """Queue a registered task's frame without waiting (the dispatcher's batch path: frames
        queued in one turn of the loop go out in one write); only when ``sends_nowait``. True
        when the caller should ``drain`` before queueing more. Raises TaskFailure (frame too
        large) or LinkClosed with nothing sent; the task is forgotten then."""
        if self.legacy and self.hello is None:
            frame = {"id": frame["id"], "type": "task", "payload": frame.get("params") or {}}
        try:
            data = orjson.dumps(frame, option=orjson.OPT_APPEND_NEWLINE)
            if len(data) > self.max_frame:
                raise TaskFailure(
                    "frame_too_large",
                    f"frame of {len(data)} bytes exceeds the limit of {self.max_frame}",
                )
            return self._writer.queue_line(data, pending)
        except BaseException:
            self._pending.pop(pending.frame_id, None)
            raise

    def send_queued(self) -> None:
        """Write the frames ``send_task_nowait`` queued in this turn now, not at its end."""
        self._writer.flush()

    async def drain(self) -> None:
        """Wait for the agent's stdin to take what is queued past its high-water mark."""
        await self._writer.drain()

    def forget(self, frame_id: str) -> None:
        """Stop waiting for a task; a late result is then logged and dropped."""
        pending = self._pending.pop(frame_id, None)
        if pending is not None and not pending.finished:  # answered: no failure to make
            pending.finish(
                failure=TaskFailure("abandoned", "the host stopped waiting for this task")
            )

    async def cancel(self, frame_id: str, reason: str) -> None:
        if frame_id in self._pending and (self.hello is None or self._declares("cancel", True)):
            with contextlib.suppress(LinkClosed):
                await self.send({"type": "cancel", "id": frame_id, "reason": reason})

    def _declares(self, capability: str, default: bool = False) -> bool:
        capabilities = (self.hello or {}).get("capabilities") or {}
        return bool(capabilities.get(capability, default))

    async def ping(self, within: float) -> bool:
        """True when the agent answered a ping in time (or does not do pings)."""
        if not self._declares("ping"):
            return True
        ping_id = f"h-ping-{next(self._ids)}"
        waiter = anyio.Event()
        self._pongs[ping_id] = waiter
        try:
            await self.send({"type": "ping", "id": ping_id})
            with anyio.move_on_after(within):
                await waiter.wait()
            return waiter.is_set()
        except LinkClosed:
            return False
        finally:
            self._pongs.pop(ping_id, None)

    async def shutdown(self, grace: float, reason: str) -> None:
        """Send the shutdown frame (if the agent speaks the protocol) and close stdin."""
        if self.hello is not None:
            with contextlib.suppress(LinkClosed, TaskFailure):
                await self.send(
                    {"type": "shutdown", "grace_ms": int(grace * 1000), "reason": reason}
                )
        await self.close_stdin()

    def _fail_all(self, error: Exception) -> None:
        for pending in list(self._pending.values()):
            pending.finish(failure=error)

    def fail_all(self, error: Exception) -> None:
        """Fail every task in flight (the process died or is being replaced)."""
        self._fail_all(error)


def _mismatch(hello: dict[str, Any]) -> str:
    return f"agent chose protocol {hello.get('protocol')!r}; this host speaks {list(PROTOCOL_VERSIONS)}"


def _error_reply(call_id: str, code: str, message: str) -> dict[str, Any]:
    return {
        "type": "reply",
        "id": call_id,
        "status": "error",
        "error": {"code": code, "message": message},
    }
