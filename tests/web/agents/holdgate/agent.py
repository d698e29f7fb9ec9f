"""A gateway agent that echoes each message and holds the turn "hold" for as long as it runs:
the reconnect test stops the host under such a turn, and the restarted host ends it with
`host_restarted`, which the console's chat must show once it has resumed the conversation."""

from __future__ import annotations

import asyncio
from typing import Any

from ether_agent import Agent

agent = Agent(
    "holdgate",
    version="1.0.0",
    description="Echoes each message; holds the turn 'hold' until the host stops.",
    kind="io_gateway",
)


@agent.action(description="Answer one user message: its text echoed (or never, for 'hold').")
async def respond(message: dict[str, Any]) -> dict[str, Any]:
    text = str(message.get("text") or "")
    if text == "hold":
        await asyncio.Event().wait()  # until the host stops the agent
    return {"text": f"echo: {text}"}


if __name__ == "__main__":
    agent.run()
