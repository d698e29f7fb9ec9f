"""An agent whose actions the MCP tool tests call: a plain result, progress, a slow action that
says when it is cancelled, a failure and a result that is not an object."""

from __future__ import annotations

import asyncio
from typing import Any

from ether_agent import Agent, AgentError, TaskContext

agent = Agent("calculator", version="1.0.0", description="Adds, counts and waits.")


@agent.action(description="Add two integers.", idempotent=True)
def add(a: int, b: int) -> dict[str, Any]:
    return {"sum": a + b}


@agent.action(description="Count to n, reporting each step as progress.")
async def count(n: int, ctx: TaskContext) -> dict[str, Any]:
    for step in range(1, n + 1):
        ctx.progress(step, n, f"step {step} of {n}")
        # Work between steps, as a real tool has: the TypeScript SDK client drops progress that
        # reaches it in the same read as the result, which steps sent back to back often did on
        # a loaded machine (test_mcp_tools_ts saw none once in three fresh clones).
        await asyncio.sleep(0.05)
    return {"counted": n}


@agent.action(description="Report progress, then wait until cancelled (or an hour).")
async def wait(ctx: TaskContext, label: str = "") -> dict[str, Any]:
    ctx.progress(0, 1, "waiting")
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        ctx.log.info(f"wait {label} was cancelled")
        raise
    return {"waited": True}


@agent.action(description="Report progress, then answer after ms milliseconds.")
async def linger(ms: int, ctx: TaskContext) -> dict[str, Any]:
    ctx.progress(0, 1, "lingering")
    await asyncio.sleep(ms / 1000)
    return {"lingered": ms}


@agent.action(description="Fail with the given message.")
def refuse(message: str) -> None:
    raise AgentError("refused", message)


@agent.action(description="Greet someone (the result is a string).")
def greet(name: str) -> str:
    return f"Hello, {name}!"


if __name__ == "__main__":
    agent.run()
