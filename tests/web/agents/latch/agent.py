"""Holds a task until the test lets it go: a workflow run whose first stage is this waits, with
its page open in the browser, until the test writes to a named pipe (a FIFO) the task reads;
then every later stage runs while the page follows it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ether_agent import Agent, TaskContext

agent = Agent("latch", version="1.0.0", description="Holds a task until the test writes to a FIFO.")


@agent.action(description="Return the input once the test writes to the FIFO it made.")
async def wait(marker: str, input: Any = None) -> dict[str, Any]:
    # ``marker`` is a named pipe: reading it blocks until the test writes to it (no polling).
    await asyncio.to_thread(Path(marker).read_text)
    return {"passed": input}


@agent.action(description="Write `text` to the agent's log.", idempotent=True)
def say(text: str, ctx: TaskContext) -> dict[str, Any]:
    ctx.log.info(text)
    return {"said": text}


if __name__ == "__main__":
    agent.run()
