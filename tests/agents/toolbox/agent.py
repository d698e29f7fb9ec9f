"""Host calls on demand: net.fetch, msg.send/publish/receive/subscribe.

With TOOLBOX_ON_MESSAGE=1 in its environment the agent also has an on_message handler that
republishes every message it receives on the topic "<name>.received".
"""

from __future__ import annotations

import os
from typing import Any

from ether_agent import Agent, TaskContext
from ether_agent.gateway import MSG_CALLS, NET_CALLS, Message, fetch, messages, on_message

agent = Agent(
    "toolbox",
    version="1.0.0",
    description="Test host calls.",
    max_concurrency=8,
    calls=[*MSG_CALLS, *NET_CALLS],
)


@agent.action(description="Fetch a URL through the host.")
async def get(
    url: str,
    ctx: TaskContext,
    method: str = "GET",
    body: str = "",
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    response = await fetch(ctx, url, method=method, body=body or None, headers=headers)
    return {
        "status": response.status,
        "text": response.text,
        "url": response.url,
        "redirects": response.redirects,
        "audit_ids": list(response.audit_ids),
    }


@agent.action(description="Send a message to an agent.")
async def send(to: str, type: str, ctx: TaskContext, data: Any = None) -> dict[str, Any]:
    message = await messages(ctx).send(to, type, data)
    return {"id": message.id, "sender": message.sender}


@agent.action(description="Publish on a topic.")
async def publish(topic: str, type: str, ctx: TaskContext, data: Any = None) -> dict[str, Any]:
    message = await messages(ctx).publish(topic, type, data)
    return {"id": message.id, "sender": message.sender, "sequence": message.sequence}


@agent.action(description="Take messages from this agent's mailbox.")
async def receive(
    ctx: TaskContext, max_messages: int = 100, wait_ms: int = 0
) -> list[dict[str, Any]]:
    got = await messages(ctx).receive(max_messages, wait_ms / 1000)
    return [
        {"id": m.id, "sender": m.sender, "type": m.type, "data": m.data, "topic": m.topic}
        for m in got
    ]


@agent.action(description="Copy a topic's messages into this agent's mailbox.")
async def subscribe(topic: str, ctx: TaskContext) -> list[str]:
    return await messages(ctx).subscribe(topic)


if os.environ.get("TOOLBOX_ON_MESSAGE") == "1":

    @on_message(agent)
    async def handle(message: Message, ctx: TaskContext) -> None:
        await messages(ctx).publish(
            f"{ctx.agent_name}.received",
            "received",
            {
                "id": message.id,
                "sender": message.sender,
                "type": message.type,
                "data": message.data,
            },
        )


if __name__ == "__main__":
    agent.run()
