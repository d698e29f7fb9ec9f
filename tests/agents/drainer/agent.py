"""A Python SDK agent for tests/agents/test_agents_edge_claims.py.

`work` sleeps (cancellable) and says on stderr how it ended; the `on_stop` hook says on stderr
how many `work` tasks were still running when it ran; `spin` burns CPU; `deaf` ignores cancel.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from ether_agent import Agent, TaskContext

agent = Agent("drainer", description="Test agent for stops and limits.", max_concurrency=8)
running = {"work": 0}


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@agent.action(description="Sleep ms milliseconds (cancellable); say on stderr how it ended.")
async def work(ms: int, ctx: TaskContext) -> dict[str, Any]:
    running["work"] += 1
    ctx.log.info("working", ms=ms)
    try:
        await asyncio.sleep(ms / 1000)
    except asyncio.CancelledError:
        say(f"work {ms} cancelled")
        raise
    finally:
        running["work"] -= 1
    say(f"work {ms} finished")
    return {"worked": ms}


@agent.on_stop
def stopping() -> None:
    say(f"on_stop: {running['work']} work tasks running")


@agent.action(description="Burn CPU for up to `seconds` of wall time.")
def spin(seconds: float) -> dict[str, Any]:
    end = time.monotonic() + seconds
    loops = 0
    while time.monotonic() < end:
        loops += 1
    return {"loops": loops}


@agent.action(description="Sleep for an hour, ignoring every cancel (a wedged handler).")
async def deaf(ctx: TaskContext) -> dict[str, Any]:
    ctx.log.info("deaf")
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            say("deaf: cancel ignored")
