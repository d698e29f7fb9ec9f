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
from collections.abc import AsyncIterable, Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

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
    run_batch: Callable[[list[Task], Callable[[Out], None]], Coroutine[Any, Any, None]]
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
    ``run_batch``, ``run`` is not used: ``run_batch(tasks, answer)`` runs the tasks of a message
    that have a slot (all of them, unless the stream's limit is reached midway) and calls
    ``answer`` once for each, in any order, before it returns.
    """
    # asyncio's TaskGroup, Queue and Semaphore rather than anyio's: this is the host's
    # hottest loop, and anyio's per-task bookkeeping was a quarter of its CPU per message
    # (bench/RESULTS.md). The structure is the same: every task ends with the stream.
    finished: asyncio.Queue[Out | None] = asyncio.Queue()
    slots = asyncio.Semaphore(DEFAULT_IN_FLIGHT)
    unwritten = 0  # tasks started whose answer is not written yet
    reading = True
    together = False  # answers written in batches (the first message asked for it)

    async def run_one(task: Task) -> None:
        assert run is not None  # given when run_batch is not
        finished.put_nowait(await run(task))

    async def read_inputs(tg: asyncio.TaskGroup) -> None:
        nonlocal slots, unwritten, reading, together
        first = True
        async for message in inputs:
            if first:
                first = False
                limit = in_flight_limit(requested_in_flight(message), most_in_flight)
                slots = asyncio.Semaphore(limit)
                together = batched(message)
            if run_batch is None:
                for task in tasks_of(message):
                    await slots.acquire()
                    unwritten += 1
                    tg.create_task(run_one(task), name="pipe task")
                continue
            group: list[Task] = []
            for task in tasks_of(message):
                if group and slots.locked():  # the next slot needs a wait: start these first
                    tg.create_task(run_batch(group, finished.put_nowait), name="pipe batch")
                    group = []
                await slots.acquire()
                unwritten += 1
                group.append(task)
            if group:
                tg.create_task(run_batch(group, finished.put_nowait), name="pipe batch")
        reading = False
        if not unwritten:
            finished.put_nowait(None)

    async with asyncio.TaskGroup() as tg:
        tg.create_task(read_inputs(tg), name="pipe reader")
        while (answer := await finished.get()) is not None:
            answers = [answer]
            # Everything already finished goes in the same write. The None that ends the
            # stream is queued only once every answer was written, so none is here.
            while together and len(answers) < MAX_ANSWERS_PER_WRITE and not finished.empty():
                more = finished.get_nowait()
                if more is not None:
                    answers.append(more)
            await write(answers)
            unwritten -= len(answers)
            for _ in answers:
                slots.release()
            if not reading and not unwritten:
                break
