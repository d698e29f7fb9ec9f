"""What a handler sees of its task: ids, deadline, config, progress, logs, cost, host calls."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from ._errors import CANCELLED, AgentError
from ._tracecontext import current_span_context, task_trace_context

_LAZY_LOCK = threading.Lock()
LEVELS = {"debug": 10, "info": 20, "warning": 30, "warn": 30, "error": 40, "critical": 50}


def int64(value: Any, default: int = 0) -> int:
    """An int64 field of a frame: proto3 JSON writes int64 as a decimal string, and readers
    accept numbers too."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return default
    return default


class Link(Protocol):
    """The runtime side of a context: the frame writer and the host-call machinery."""

    loop: asyncio.AbstractEventLoop

    def send(self, frame: dict[str, Any]) -> bool: ...

    def log_enabled(self, level: str) -> bool: ...

    async def host_call(
        self,
        task_id: str,
        method: str,
        params: dict[str, Any],
        deadline_ms: int,
        trace: tuple[str, str | None] | None = None,
    ) -> Any: ...


def _jsonable(fields: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(fields, default=repr))
    return out


class Logger:
    """Structured logs as ``log`` frames (stderr before the runtime runs or when it is gone).

    ``log.info("fetched", url=u, bytes=n)`` writes
    ``{"type":"log","level":"info","msg":"fetched","fields":{"url":...,"bytes":...}}``.
    """

    def __init__(self, link: Callable[[], Link | None], task_id: str = "", name: str = "") -> None:
        self._link = link
        self._task_id = task_id
        self._name = name

    def log(self, level: str, msg: str, **fields: Any) -> None:
        """Write one record at ``level`` (debug, info, warning, error)."""
        link = self._link()
        if link is None:
            extra = f" {_jsonable(fields)}" if fields else ""
            os.write(2, f"[{level.upper()}] {msg}{extra}\n".encode(errors="backslashreplace"))
            return
        if not link.log_enabled(level):
            return
        frame: dict[str, Any] = {"type": "log", "level": level, "msg": str(msg)}
        if fields:
            frame["fields"] = _jsonable(fields)
        if self._task_id:
            frame["task_id"] = self._task_id
        if self._name:
            frame["logger"] = self._name
        link.send(frame)

    def debug(self, msg: str, **fields: Any) -> None:
        self.log("debug", msg, **fields)

    def info(self, msg: str, **fields: Any) -> None:
        self.log("info", msg, **fields)

    def warning(self, msg: str, **fields: Any) -> None:
        self.log("warning", msg, **fields)

    def error(self, msg: str, **fields: Any) -> None:
        self.log("error", msg, **fields)


class TaskContext:
    """The context of one task, passed to a handler that declares a ``ctx: TaskContext`` param.

    Async handlers are cancelled as asyncio tasks (cancel frame, deadline, shutdown); sync
    handlers run in a thread pool and should poll ``ctx.cancelled`` (a ``threading.Event``).
    """

    def __init__(
        self,
        link: Link,
        frame: dict[str, Any],
        action: str,
        config: dict[str, Any],
        agent_name: str,
    ) -> None:
        self._link = link
        self.id: str = frame["id"]
        """The host's id of this task request (``h-<n>``); results and calls refer to it."""
        self.task_id: str = str(frame.get("task_id") or self.id)
        """The public task id the client sees."""
        self.action = action
        attempt = frame.get("attempt")
        self.attempt = attempt if isinstance(attempt, int) and attempt > 0 else 1
        trace = frame.get("trace")
        self.trace: dict[str, Any] = trace if isinstance(trace, dict) else {}
        self.trace_parent: str | None
        """The W3C ``traceparent`` of the host's span for this task, or None when the task is
        not traced (or the host sent a malformed one)."""
        self.trace_state: str | None
        """The W3C ``tracestate`` that came with ``trace_parent``, or None."""
        self.trace_parent, self.trace_state = task_trace_context(frame)
        self.session_id: str = str(frame.get("session_id") or "")
        budget = frame.get("budget")
        self.budget: dict[str, Any] = budget if isinstance(budget, dict) else {}
        self.config = config
        self.agent_name = agent_name
        deadline_ms = int64(frame.get("deadline_ms"))
        self.deadline: float | None = (
            time.monotonic() + float(deadline_ms) / 1000.0 if deadline_ms > 0 else None
        )
        """``time.monotonic()`` value of the deadline, or None when the task has none."""
        # Made when first used: most handlers never look, and a threading.Event (a Condition
        # and two locks) or a Logger per task are a measurable share of a small task's CPU.
        self._cancelled: threading.Event | None = None
        self._cancel_requested = False
        self._log: Logger | None = None
        self._cost = 0.0
        self._cost_set = False
        self._model = ""
        self._extra: dict[str, Any] = {}

    @property
    def cancelled(self) -> threading.Event:
        """Set when the task is cancelled, timed out or the agent shuts down."""
        event = self._cancelled
        if event is None:
            with _LAZY_LOCK:  # a handler thread and the loop may both get here first
                if self._cancelled is None:
                    self._cancelled = threading.Event()
                    if self._cancel_requested:
                        self._cancelled.set()
                event = self._cancelled
        return event

    def _cancel(self) -> None:
        """Set ``cancelled`` (the runtime calls this on the loop)."""
        with _LAZY_LOCK:
            self._cancel_requested = True
            event = self._cancelled
        if event is not None:
            event.set()

    @property
    def log(self) -> Logger:
        """This task's logger: ``ctx.log.info("fetched", url=u)`` (a ``log`` frame)."""
        if self._log is None:
            link = self._link
            self._log = Logger(lambda: link, task_id=self.id)
        return self._log

    # --- reporting ---------------------------------------------------------------------------

    def remaining(self) -> float | None:
        """Seconds left until the deadline (never negative), or None without a deadline."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def progress(self, done: float, total: float = 0, message: str = "") -> None:
        """Report progress; it extends no deadline. Safe from any thread."""
        frame: dict[str, Any] = {"type": "progress", "id": self.id, "progress": done}
        if total:
            frame["total"] = total
        if message:
            frame["message"] = message
        self._link.send(frame)

    def cost(self, value: float, model: str | None = None, **extra: Any) -> None:
        """Add ``value`` to the task's reported cost; name the model; record other facts."""
        self._cost += float(value)
        self._cost_set = True
        if model:
            self._model = model
        self._extra.update(extra)

    def metadata(self) -> dict[str, Any]:
        """The result metadata reported so far (empty when nothing was reported)."""
        meta: dict[str, Any] = {}
        if self._cost_set:
            meta["cost"] = self._cost
        if self._model:
            meta["model"] = self._model
        if self._extra:
            meta["extra"] = _jsonable(self._extra)
        return meta

    # --- host calls --------------------------------------------------------------------------

    async def host_call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        deadline_ms: int = 0,
        trace_parent: str | None = None,
        trace_state: str | None = None,
    ) -> Any:
        """Ask the host for a service (``agent.call``, ``ctx.*``, ``term.*``, ``msg.*``,
        ``net.fetch``) and return the reply's result; raise ``AgentError`` on an error reply.

        The method must be listed in ``Agent(calls=...)``. ``deadline_ms`` bounds the wait
        (0: the task's own deadline); past it the call is cancelled and ``AgentError("timeout")``
        raised. The call frame carries a ``traceparent`` the host parents the call's span on:
        ``trace_parent`` (with ``trace_state``) when given, else the current OpenTelemetry
        span's when the agent uses OpenTelemetry and one is open, else the task's own.
        """
        trace = self._call_trace(trace_parent, trace_state)
        return await self._link.host_call(self.id, method, params or {}, deadline_ms, trace)

    async def call_agent(
        self,
        agent: str,
        action: str,
        params: dict[str, Any] | None = None,
        *,
        deadline_ms: int = 0,
        trace_parent: str | None = None,
        trace_state: str | None = None,
        force_refresh: bool = False,
    ) -> dict[str, Any]:
        """Run ``action`` of another agent through the host; return its AgentOutput as a dict
        (``status``, ``data``, ``error``, ``metadata``...). ``force_refresh`` runs it even when
        the host's result cache holds an answer (``metadata.cached``), and keeps the new one."""
        reply = await self.host_call(
            "agent.call",
            _agent_call(agent, action, params, force_refresh),
            deadline_ms=deadline_ms,
            trace_parent=trace_parent,
            trace_state=trace_state,
        )
        return reply if isinstance(reply, dict) else {"data": reply}

    def host_call_sync(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        deadline_ms: int = 0,
        trace_parent: str | None = None,
        trace_state: str | None = None,
    ) -> Any:
        """``host_call`` for sync handlers (they run in worker threads)."""
        # The current span is this thread's, not the loop's: resolve it here.
        trace = self._call_trace(trace_parent, trace_state)
        return self._from_thread(
            self._link.host_call(self.id, method, params or {}, deadline_ms, trace)
        )

    def call_agent_sync(
        self,
        agent: str,
        action: str,
        params: dict[str, Any] | None = None,
        *,
        deadline_ms: int = 0,
        trace_parent: str | None = None,
        trace_state: str | None = None,
        force_refresh: bool = False,
    ) -> dict[str, Any]:
        """``call_agent`` for sync handlers (they run in worker threads)."""
        reply = self.host_call_sync(
            "agent.call",
            _agent_call(agent, action, params, force_refresh),
            deadline_ms=deadline_ms,
            trace_parent=trace_parent,
            trace_state=trace_state,
        )
        return reply if isinstance(reply, dict) else {"data": reply}

    def _call_trace(
        self, trace_parent: str | None, trace_state: str | None
    ) -> tuple[str, str | None] | None:
        """The trace context a call made now carries (see ``host_call``)."""
        if trace_parent:  # "" names none, as in the Go and TypeScript SDKs
            return trace_parent, trace_state
        current = current_span_context()
        if current is not None:
            return current
        if self.trace_parent is not None:
            return self.trace_parent, self.trace_state
        return None

    def _from_thread(self, coro: Any) -> Any:
        loop = self._link.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            coro.close()
            raise RuntimeError("in async handlers use `await ctx.host_call(...)`")
        fut = asyncio.run_coroutine_threadsafe(coro, loop)
        while True:
            try:
                return fut.result(timeout=0.2)
            except concurrent.futures.TimeoutError:
                if self.cancelled.is_set():
                    fut.cancel()
                    raise AgentError(CANCELLED, "the task was cancelled") from None


def _agent_call(
    agent: str, action: str, params: dict[str, Any] | None, force_refresh: bool
) -> dict[str, Any]:
    call: dict[str, Any] = {"agent": agent, "action": action, "params": params or {}}
    if force_refresh:
        call["force_refresh"] = True
    return call
