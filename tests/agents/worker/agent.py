"""A Python SDK agent whose actions exercise the task contract."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ether_agent import Agent, AgentError, Output, TaskContext

agent = Agent(
    "worker",
    version="2.0.0",
    description="Test agent for the task contract.",
    max_concurrency=4,
    calls=["agent.call"],
)


@agent.action(description="Return the params.", idempotent=True)
async def echo(params: dict[str, Any]) -> dict[str, Any]:
    return params


@agent.action(description="Sleep for ms milliseconds; cancellable.")
async def nap(ms: int, ctx: TaskContext) -> dict[str, Any]:
    ctx.log.info("napping", ms=ms)
    for step in range(10):
        ctx.progress(step, 10, "napping")
        await asyncio.sleep(ms / 10000)
    return {"slept": ms}


@agent.action(description="Block a worker thread, ignoring cancellation.")
def stubborn(ms: int) -> dict[str, Any]:
    time.sleep(ms / 1000)
    return {"done": True}


@agent.action(description="Add two integers.")
def add(a: int, b: int) -> dict[str, Any]:
    return {"sum": a + b}


@agent.action(description="Report a cost and a model.")
def costly(cost: float) -> Output:
    return Output({"charged": cost}, cost=cost, model="test-model-1")


@agent.action(description="Fail with a code.")
def broken(message: str = "it broke") -> None:
    raise AgentError("broken", message)


@agent.action(description="Raise an uncaught exception.")
def explode() -> None:
    raise ZeroDivisionError("division by zero in explode")


@agent.action(description="Call another agent's action through the host.")
async def relay(
    agent: str, action: str, ctx: TaskContext, params: dict[str, Any] | None = None
) -> Any:
    return await ctx.call_agent(agent, action, params or {})


@agent.action(description="Call itself recursively `depth` more times.")
async def recurse(depth: int, ctx: TaskContext) -> Any:
    if depth <= 0:
        return {"bottom": True}
    return await ctx.call_agent("worker", "recurse", {"depth": depth - 1})


@agent.action(description="Start a grandchild that ignores SIGTERM and SIGHUP; return its pid.")
def grandchild() -> dict[str, Any]:
    import subprocess

    child = subprocess.Popen(
        ["sh", "-c", "trap '' TERM HUP; while true; do sleep 1; done"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return {"pid": child.pid}


@agent.action(description="Return this process's spawn id (ETHER_SPAWN_ID).")
def whoami() -> dict[str, Any]:
    import os

    return {"spawn": os.environ.get("ETHER_SPAWN_ID", "")}


@agent.action(description="Answer shutting_down, as a draining agent does, in the process `spawn`.")
def refuse_in(spawn: str) -> dict[str, Any]:
    import os

    if os.environ.get("ETHER_SPAWN_ID", "") == spawn:
        raise AgentError("shutting_down", "this agent is shutting down", retryable=True)
    return {"served": True}
