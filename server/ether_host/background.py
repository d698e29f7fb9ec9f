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
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, TypeVarTuple

from anyio.abc import TaskGroup

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
