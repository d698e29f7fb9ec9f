"""Pipe's flow control, for every front that streams tasks in and answers out (gRPC's Pipe
today; the web and MCP/A2A listeners reuse it rather than copy it).

A stream runs at most ``in_flight_limit`` tasks at once, the limit asked for by its first
input. Holding the next read until a slot frees is the flow control: unread inputs back up in
the transport's windows (HTTP/2's), not in host memory. A slot is held until the task's answer
is written, so a slow reader slows the stream too. Answers are written one at a time, in the
order the tasks finish (not the order of the inputs), and the stream ends once every input
read has been answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import TypeVar

In = TypeVar("In")  # an input of the stream, in the front's own terms
Out = TypeVar("Out")  # an answer, likewise

DEFAULT_IN_FLIGHT = 64
MAX_IN_FLIGHT = 1024


def in_flight_limit(requested: int) -> int:
    """The tasks a stream may run at once: 0 asks for the default; 1 to MAX_IN_FLIGHT."""
    return max(1, min(requested or DEFAULT_IN_FLIGHT, MAX_IN_FLIGHT))


async def run_pipe(
    inputs: AsyncIterable[In],
    run: Callable[[In], Awaitable[Out]],
    write: Callable[[Out], Awaitable[object]],
    requested_in_flight: Callable[[In], int],
) -> None:
    """Run ``run`` on each of ``inputs`` and ``write`` each answer, with the flow control above.

    ``run`` answers every input, a failure included (an exception from it ends the stream);
    ``requested_in_flight`` reads the limit a stream's first input asks for.
    """
    # asyncio's TaskGroup, Queue and Semaphore rather than anyio's: this is the host's
    # hottest loop, and anyio's per-task bookkeeping was a quarter of its CPU per message
    # (bench/RESULTS.md). The structure is the same: every task ends with the stream.
    finished: asyncio.Queue[Out | None] = asyncio.Queue()
    slots = asyncio.Semaphore(DEFAULT_IN_FLIGHT)
    unwritten = 0  # tasks started whose answer is not written yet
    reading = True

    async def run_one(item: In) -> None:
        finished.put_nowait(await run(item))

    async def read_inputs(tg: asyncio.TaskGroup) -> None:
        nonlocal slots, unwritten, reading
        first = True
        async for item in inputs:
            if first:
                first = False
                slots = asyncio.Semaphore(in_flight_limit(requested_in_flight(item)))
            await slots.acquire()
            unwritten += 1
            tg.create_task(run_one(item), name="pipe task")
        reading = False
        if not unwritten:
            finished.put_nowait(None)

    async with asyncio.TaskGroup() as tg:
        tg.create_task(read_inputs(tg), name="pipe reader")
        while (answer := await finished.get()) is not None:
            await write(answer)
            unwritten -= 1
            slots.release()
            if not reading and not unwritten:
                break
