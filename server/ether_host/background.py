"""Start work that outlives a request in a context of its own.

asyncio copies the caller's ``contextvars.Context`` into every task and loop callback it
creates. Work started from within an RPC that outlives it (an agent's run, a replica added by
ScaleAgent, a cancel watcher, a workflow run, a terminal's readers, a gateway session or
mailbox) would otherwise carry that call's structlog fields (``method``, ``peer``, bound by the
per-RPC wrapper in transport/rpc_logging.py) and its caller's identity for as long as it
lives: a line an agent's replica logged while stopping at host shutdown named a DeployAgent
call that had ended long before.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar, TypeVarTuple

import anyio
import structlog
from anyio.abc import TaskGroup

log = structlog.get_logger(__name__)

Args = TypeVarTuple("Args")
Result = TypeVar("Result")


def start_detached(
    tg: TaskGroup,
    function: Callable[[*Args], Coroutine[Any, Any, Any]],
    *args: *Args,
    name: object = None,
) -> None:
    """``tg.start_soon(function, *args)``, the task starting from an empty context."""
    contextvars.Context().run(lambda: tg.start_soon(function, *args, name=name))


def run_detached(function: Callable[[*Args], Result], *args: *Args) -> Result:
    """Call ``function(*args)`` in an empty context: the loop callbacks it registers (readers,
    timers) and the tasks they start run in that context, not the caller's."""
    return contextvars.Context().run(function, *args)


class Abandoned(RuntimeError):
    """Work run by run_to_the_end ended with its task group (the host stopping), unfinished."""


async def run_to_the_end(
    tg: TaskGroup | None, function: Callable[[*Args], Awaitable[Result]], *args: *Args
) -> Result:
    """``await function(*args)``, run as a task of ``tg`` so that it goes on to its end when
    the caller is cancelled, and the caller's cancellation ends only its own wait. An RPC's
    work that must not stop half-way needs this, not an anyio shield: grpc.aio cancels a call
    whose client went (or whose deadline passed) with its asyncio task's own ``cancel()``,
    which anyio's shielded scopes do not hold off (tests/agents/test_concurrent_lifecycle.py).
    Its error is the caller's (a log line when the caller has gone); Abandoned when ``tg``
    ended first. Without ``tg``, awaited here."""
    if tg is None:
        return await function(*args)
    done = anyio.Event()
    value: list[Result] = []
    error: list[Exception] = []
    waited = [True]  # the caller still waits for it

    async def run() -> None:
        try:
            value.append(await function(*args))
        except Exception as raised:
            error.append(raised)
            if not waited[0]:  # no one is left to answer with it: the log is its only trace
                log.warning(
                    "work its caller left failed at its end",
                    work=getattr(function, "__qualname__", repr(function)),
                    error_type=type(raised).__name__,
                    error=str(getattr(raised, "message", raised)),
                )
        finally:
            done.set()

    tg.start_soon(run)
    try:
        await done.wait()
    finally:
        waited[0] = False
    if error:
        raise error[0]
    if not value:
        raise Abandoned("ended before it finished")
    return value[0]
