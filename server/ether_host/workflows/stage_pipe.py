"""A stage's tasks through the core's batched pipe (``agents.run_pipe``, what a batched
``AgentIOService.Pipe`` stream runs on), with the run store as the stage's slow reader.

The stage's concurrency is the pipe's window; tasks are fed ``FEED`` at a time (a Pipe
request's most inputs) until the run halts; the tasks that finished since the last batch are
handed back together. Before their slots are freed, the stage waits while the store's writer is
more than ``MAX_BACKLOG`` rows behind: rows and events not written yet stay bounded, as a slow
client bounds a Pipe stream's answers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import anyio

from ether_host.agents import run_pipe
from ether_host.workflows.model import TaskRecord
from ether_host.workflows.store import RunStore
from ether_host.workflows.writes import PendingWrites

FEED = 1000  # tasks handed to the pipe at a time
MAX_STAGE_CONCURRENCY = 10_000  # spec.py's bound on max_concurrency
MAX_BACKLOG = 10_000  # rows the store's writer may be behind by before the stage waits
BACKLOG_POLL = 0.005  # seconds between looks at the backlog meanwhile


async def run_stage_tasks(
    todo: list[TaskRecord],
    concurrency: int,
    run_one: Callable[[TaskRecord], Awaitable[TaskRecord]],
    finished: Callable[[TaskRecord], None],
    halted: Callable[[], bool],
    store: RunStore,
    writes: PendingWrites,
) -> None:
    """Run ``run_one`` on each of ``todo``, at most ``concurrency`` at once, and ``finished`` on
    each once it returned, in the order they end. Once ``halted()``, no more are fed; those fed
    already run (``run_one`` returns at once for them)."""

    async def feed() -> AsyncIterator[list[TaskRecord]]:
        for start in range(0, len(todo), FEED):
            if halted():
                return
            yield todo[start : start + FEED]

    async def done(tasks: list[TaskRecord]) -> None:
        for task in tasks:
            finished(task)
        while store.backlog() > MAX_BACKLOG:
            writes.flush()
            await anyio.sleep(BACKLOG_POLL)

    await run_pipe(
        feed(),
        run_one,
        done,
        lambda _: concurrency,
        lambda batch: batch,
        lambda _: True,
        most_in_flight=MAX_STAGE_CONCURRENCY,
    )
