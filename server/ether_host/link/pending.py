"""A task in flight on the link, and the ways the link fails one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

ProgressSink = Callable[[dict[str, Any]], None]


class LinkClosed(Exception):
    """The process's stdout ended or the process died with the task in flight."""


class HandshakeError(Exception):
    """The agent did not complete the handshake; the message says how."""


class ProtocolMismatch(HandshakeError):
    """The agent chose a protocol version this host does not speak: no restart can help."""


@dataclass
class TaskFailure(Exception):
    """The host failed a task itself (frame too large, bad frame)."""

    code: str
    message: str


@dataclass(eq=False, slots=True)
class Pending:
    """A task sent to the agent and not yet answered."""

    frame_id: str
    on_progress: ProgressSink | None
    on_log: ProgressSink | None
    finished: bool = False
    result: dict[str, Any] | None = None
    failure: Exception | None = None
    calls: set[anyio.CancelScope] = field(default_factory=set)
    # True once the frame was handed to the pipe whole: from then on the agent
    # runs the task even if the sender is cancelled, so it must be cancelled too.
    sent: bool = False
    # Whom the agent's log lines written meanwhile are about (link/stderr.py, task_fields): the
    # public task id, and its trace id when the task is traced.
    task_id: str = ""
    trace_id: str = ""
    # Bare asyncio futures, not an Event and asyncio.timeout: this is once per task on the
    # hottest path, and an Event plus a timeout context cost several times a future and a timer.
    _waiters: list[asyncio.Future[None]] = field(default_factory=list)
    # Called once, by finish(), when nobody awaits the task (the dispatcher's batch path,
    # agents/batch.py): a callback instead of a waiting coroutine per task.
    on_finish: Callable[[Pending], None] | None = None

    def finish(
        self, result: dict[str, Any] | None = None, failure: Exception | None = None
    ) -> None:
        if self.finished:
            return
        self.finished = True
        self.result, self.failure = result, failure
        for scope in self.calls:
            scope.cancel()
        for waiter in self._waiters:
            _wake(waiter)
        if self.on_finish is not None:
            self.on_finish(self)

    async def wait(self, deadline: float | None = None) -> bool:
        """Wait for the answer; False when ``deadline`` (time.monotonic()) passed first.

        uvloop's timers have millisecond resolution and may fire a little early: the deadline
        counts as passed only once time.monotonic() says so, as callers (workflow budgets) check.
        """
        loop = asyncio.get_running_loop()
        while not self.finished:
            waiter: asyncio.Future[None] = loop.create_future()
            timer = None
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                timer = loop.call_later(left, _wake, waiter)
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                self._waiters.remove(waiter)
                if timer is not None:
                    timer.cancel()
        return True


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
