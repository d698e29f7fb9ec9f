"""Host calls on demand: net.fetch, msg.send/publish/receive/subscribe.

With TOOLBOX_ON_MESSAGE=1 in its environment the agent also has an on_message handler that
republishes every message it receives on the topic "<name>.received". A message of type
"host_calls" whose data is a list of [method, params] pairs has the handler make those host
calls first (ctx.*, msg.*: for the session the message is about, if any) and add their
"outcomes" to what it publishes: {"result": ...} or {"code": ..., "message": ...} for each.

`send` and `publish` with `nest` N > 0 send, in place of `data`, a list N lists deep.
"""

from __future__ import annotations

import os
from typing import Any

from ether_agent import Agent, AgentError, TaskContext
from ether_agent.gateway import (
    CTX_CALLS,
    MSG_CALLS,
    NET_CALLS,
    Message,
    fetch,
    messages,
    on_message,
)

agent = Agent(
    "toolbox",
    version="1.0.0",
    description="Test host calls.",
    max_concurrency=8,
    calls=[*MSG_CALLS, *NET_CALLS, *CTX_CALLS],
)


def _nested(levels: int) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


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
async def send(
    to: str, type: str, ctx: TaskContext, data: Any = None, nest: int = 0
) -> dict[str, Any]:
    message = await messages(ctx).send(to, type, _nested(nest) if nest > 0 else data)
    return {"id": message.id, "sender": message.sender}


@agent.action(description="Publish on a topic.")
async def publish(
    topic: str, type: str, ctx: TaskContext, data: Any = None, nest: int = 0
) -> dict[str, Any]:
    message = await messages(ctx).publish(topic, type, _nested(nest) if nest > 0 else data)
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
        report: dict[str, Any] = {
            "id": message.id,
            "sender": message.sender,
            "type": message.type,
            "data": message.data,
        }
        if message.type == "host_calls":
            outcomes = []
            for method, params in message.data:
                try:
                    outcomes.append({"result": await ctx.host_call(method, params)})
                except AgentError as error:
                    outcomes.append({"code": error.code, "message": error.message})
            report["outcomes"] = outcomes
        await messages(ctx).publish(f"{ctx.agent_name}.received", "received", report)


if __name__ == "__main__":
    agent.run()
