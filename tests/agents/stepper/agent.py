"""Pipeline steps for the gateway tests: note what ran, meet a peer, or fail."""

from __future__ import annotations

import asyncio
from typing import Any

from ether_agent import Agent, AgentError, TaskContext
from ether_agent.gateway import CTX_CALLS, session

agent = Agent(
    "stepper",
    version="1.0.0",
    description="Test pipeline steps.",
    max_concurrency=8,
    calls=list(CTX_CALLS),
)
_arrived: dict[str, set[str]] = {}
_changed = asyncio.Condition()


@agent.action(
    description="Return what this step saw; with `meet`, wait until `peers` steps arrived."
)
async def note(
    label: str,
    message: dict[str, Any],
    turn: int,
    ctx: TaskContext,
    steps: dict[str, Any] | None = None,
    meet: str = "",
    peers: int = 0,
    write: bool = False,
) -> dict[str, Any]:
    if meet:
        # Steps of one parallel group meet here: run one after the other, the first would
        # wait for a peer that never comes and fail on its deadline instead.
        async with _changed:
            _arrived.setdefault(f"{meet}/{turn}", set()).add(label)
            _changed.notify_all()
            await _changed.wait_for(lambda: len(_arrived[f"{meet}/{turn}"]) >= peers)
    if write:
        await session(ctx).put(f"seen_{label}", turn)
    return {"label": label, "turn": turn, "text": message.get("text"), "saw": sorted(steps or {})}


@agent.action(description="Fail with code step_broke.")
async def broken(message: dict[str, Any]) -> None:
    raise AgentError("step_broke", f"broken on purpose ({message.get('text')})")


if __name__ == "__main__":
    agent.run()
