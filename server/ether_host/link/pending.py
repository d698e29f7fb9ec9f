"""A task in flight on the link, and the ways the link fails one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
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
    # The agent's host calls made for this task, cancelled when it ends. None until the first:
    # most tasks make none, and a set per task is an allocation on the hottest path.
    calls: set[anyio.CancelScope] | None = None
    # True once the frame was handed to the pipe whole: from then on the agent
    # runs the task even if the sender is cancelled, so it must be cancelled too.
    sent: bool = False
    # Whom the agent's log lines written meanwhile are about (link/stderr.py, task_fields): the
    # public task id, and its trace id when the task is traced.
    task_id: str = ""
    trace_id: str = ""
    # Bare asyncio futures, not an Event and asyncio.timeout: this is once per task on the
    # hottest path, and an Event plus a timeout context cost several times a future and a timer.
    # None until someone waits (the batch path never does).
    _waiters: list[asyncio.Future[None]] | None = None
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
        if self.calls:
            for scope in self.calls:
                scope.cancel()
        if self._waiters:
            for waiter in self._waiters:
                _wake(waiter)
        if self.on_finish is not None:
            self.on_finish(self)

    async def wait(
        self, deadline: float | None = None, loop: asyncio.AbstractEventLoop | None = None
    ) -> bool:
        """Wait for the answer; False when ``deadline`` (time.monotonic()) passed first.
        ``loop``: the running loop, when the caller knows it (asyncio's lookup of the running
        loop is a getpid(2) each time, on the hottest path).

        uvloop's timers have millisecond resolution and may fire a little early: the deadline
        counts as passed only once time.monotonic() says so, as callers (workflow budgets) check.
        """
        if loop is None:
            loop = asyncio.get_running_loop()
        if self._waiters is None:
            self._waiters = []
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
