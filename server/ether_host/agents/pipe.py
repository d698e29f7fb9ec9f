"""Pipe's flow control, for every front that streams tasks in and answers out (gRPC's Pipe
today; the web and MCP/A2A listeners reuse it rather than copy it).

A stream runs at most ``in_flight_limit`` tasks at once, the limit asked for by its first
input. Holding the next read until a slot frees is the flow control: unread inputs back up in
the transport's windows (HTTP/2's), not in host memory. A slot is held until the task's answer
is written, so a slow reader slows the stream too. Answers are written one at a time, in the
order the tasks finish (not the order of the inputs), and the stream ends once every input
read has been answered.

A message may carry many tasks (a batch, ``tasks_of``): each takes a slot of its own, so the
limit counts tasks, not messages, and the next message is read once the last task of this one
has a slot. A front that can run many tasks in one go (``run_batch``: the dispatcher's batch
path) gets every task of a message that has a slot together, answering each through a callback.
A batched stream (``batched``, read from its first message) is answered in batches
too: each write carries every answer finished since the previous write, in the order they
finished, so the answers of a fast batch share a message instead of taking one each.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable
from typing import Generic, TypeVar

In = TypeVar("In")  # a message of the stream, in the front's own terms
Task = TypeVar("Task")  # one task a message carries
Out = TypeVar("Out")  # an answer, likewise

DEFAULT_IN_FLIGHT = 64
MAX_IN_FLIGHT = 1024
MAX_ANSWERS_PER_WRITE = 1000  # a batched write carries at most this many answers


def in_flight_limit(requested: int, most: int = MAX_IN_FLIGHT) -> int:
    """The tasks a stream may run at once: 0 asks for the default; 1 to ``most``."""
    return max(1, min(requested or DEFAULT_IN_FLIGHT, most))


async def run_pipe(
    inputs: AsyncIterable[In],
    run: Callable[[Task], Awaitable[Out]] | None,
    write: Callable[[list[Out]], Awaitable[object]],
    requested_in_flight: Callable[[In], int],
    tasks_of: Callable[[In], Iterable[Task]],
    batched: Callable[[In], bool] = lambda _: False,
    most_in_flight: int = MAX_IN_FLIGHT,
    *,
    run_batch: Callable[
        [list[Task], Callable[[Out], None], asyncio.TaskGroup], Awaitable[None] | None
    ]
    | None = None,
) -> None:
    """Run ``run`` on each task of each of ``inputs`` and ``write`` the answers, with the flow
    control above.

    ``tasks_of`` lists the tasks a message carries (it may raise to end the stream: a message
    that is wrong as a whole). ``run`` answers every task, a failure included (an exception
    from it ends the stream). ``requested_in_flight`` and ``batched`` read what the stream's
    first message asks for (at most ``most_in_flight`` at once: a workflow stage may ask for
    more than a client's stream). ``write`` gets one answer at a time, or in a batched stream
    every answer finished since its previous call (at most MAX_ANSWERS_PER_WRITE). With
    ``run_batch``, ``run`` is not used: ``run_batch(tasks, answer, group)`` starts the tasks of a
    message that have a slot (all of them, unless the stream's limit is reached midway) without
    waiting for them, running what must wait as tasks of ``group``, and calls ``answer`` once
    for each, in any order, before the stream ends; what it returns, when not None, is awaited
    before the next message is read (the agent's stdin draining).
    """
    # asyncio's TaskGroup rather than anyio's, and a count of slots and a deque of answers
    # rather than a Semaphore and a Queue: this is the host's hottest loop, and anyio's per-task
    # bookkeeping was a quarter of its CPU per message (bench/RESULTS.md); taking a free slot or
    # an answer waiting is then a plain step, not a coroutine. The structure is the same: every
    # task ends with the stream.
    loop = asyncio.get_running_loop()
    slots = _Slots(DEFAULT_IN_FLIGHT, loop)
    finished = _Answers[Out](loop)
    unwritten = 0  # tasks started whose answer is not written yet
    reading = True
    together = False  # answers written in batches (the first message asked for it)

    async def run_one(task: Task) -> None:
        assert run is not None  # given when run_batch is not
        finished.put(await run(task))

    async def read_inputs(tg: asyncio.TaskGroup) -> None:
        nonlocal slots, unwritten, reading, together
        first = True
        async for message in inputs:
            if first:
                first = False
                limit = in_flight_limit(requested_in_flight(message), most_in_flight)
                slots = _Slots(limit, loop)
                together = batched(message)
            if run_batch is None:
                for task in tasks_of(message):
                    if not slots.free:
                        await slots.freed()
                    slots.free -= 1
                    unwritten += 1
                    tg.create_task(run_one(task), name="pipe task")
                continue
            group: list[Task] = []
            for task in tasks_of(message):
                if not slots.free:
                    if group:  # the next slot needs a wait: start these first
                        draining = run_batch(group, finished.put, tg)
                        if draining is not None:
                            await draining
                        group = []
                    await slots.freed()
                slots.free -= 1
                unwritten += 1
                group.append(task)
            if group:
                draining = run_batch(group, finished.put, tg)
                if draining is not None:
                    await draining
        reading = False
        finished.wake()  # the writer ends the stream once every answer was written

    async with asyncio.TaskGroup() as tg:
        tg.create_task(read_inputs(tg), name="pipe reader")
        ready = finished.ready
        while reading or unwritten:
            if not ready:
                await finished.arrival()
                continue
            # Everything already finished goes in the same write, in a batched stream.
            if together and len(ready) > 1:
                count = min(len(ready), MAX_ANSWERS_PER_WRITE)
                answers = [ready.popleft() for _ in range(count)]
            else:
                answers = [ready.popleft()]
            await write(answers)
            unwritten -= len(answers)
            slots.give(len(answers))


class _Slots:
    """A stream's free in-flight slots, and the reader's wait for one (one reader only)."""

    __slots__ = ("_loop", "_room", "free")

    def __init__(self, free: int, loop: asyncio.AbstractEventLoop) -> None:
        self.free = free
        self._loop = loop
        self._room: asyncio.Future[None] | None = None

    async def freed(self) -> None:
        """Return once a slot is free (the caller then takes it: ``free -= 1``)."""
        while not self.free:
            self._room = self._loop.create_future()
            try:
                await self._room
            finally:
                self._room = None

    def give(self, count: int) -> None:
        self.free += count
        room = self._room
        if room is not None and not room.done():
            room.set_result(None)


class _Answers(Generic[Out]):
    """The answers finished and not written yet, in the order they finished, and the
    writer's wait for the next (one writer only)."""

    __slots__ = ("_arrived", "_loop", "ready")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.ready: deque[Out] = deque()
        self._loop = loop
        self._arrived: asyncio.Future[None] | None = None

    def put(self, answer: Out) -> None:
        self.ready.append(answer)
        self.wake()

    def wake(self) -> None:
        """Wake the writer: an answer came, or the reading ended."""
        arrived = self._arrived
        if arrived is not None and not arrived.done():
            arrived.set_result(None)

    async def arrival(self) -> None:
        """Return once woken (an answer may have come)."""
        self._arrived = self._loop.create_future()
        try:
            await self._arrived
        finally:
            self._arrived = None
