"""Ether agent SDK and runtime for Python (standard library only).

Declare an agent and its actions, then serve it on the host's stdio link::

    from ether_agent import Agent, TaskContext

    agent = Agent("echo", version="1.0", description="Echoes text.")

    @agent.action(description="Return the text.")
    async def echo(text: str, ctx: TaskContext) -> dict:
        ctx.progress(1, 1)
        return {"text": text}

Run it with ``python -m ether_agent --module echo`` (or ``agent.run()``). A module of plain
callbacks needs no SDK import: ``python -m ether_agent --module seeds --function run``.
The wire protocol is described in docs/protocol.md.
"""

from ._agent import ActionSpec, Agent, NextAction, Output, Partial
from ._context import Logger, TaskContext
from ._errors import AgentError, FatalError
from ._runtime import serve

__all__ = [
    "ActionSpec",
    "Agent",
    "AgentError",
    "FatalError",
    "Logger",
    "NextAction",
    "Output",
    "Partial",
    "TaskContext",
    "serve",
]

__version__ = "0.1.0"
