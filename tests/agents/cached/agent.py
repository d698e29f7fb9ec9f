"""Actions with a result cache: each run answers with a fresh nonce, so a caller can tell a
result the agent made now from one the host kept."""

from __future__ import annotations

import secrets
from typing import Any

from ether_agent import Agent, AgentError, TaskContext

agent = Agent("cached", version="1.0.0", calls=["agent.call"])


def _fresh(**fields: Any) -> dict[str, Any]:
    return {**fields, "nonce": secrets.token_hex(8)}


@agent.action(description="A fresh nonce for the topic; kept an hour.", cache_ttl=3600)
def draw(topic: str, fail: bool = False) -> dict[str, Any]:
    if fail:
        raise AgentError("asked_to_fail", f"asked to fail for {topic}")
    return _fresh(topic=topic)


@agent.action(description="A fresh nonce; kept one second.", cache_ttl=1)
def brief(topic: str) -> dict[str, Any]:
    return _fresh(topic=topic)


@agent.action(description="size bytes of padding and a nonce; kept an hour.", cache_ttl=3600)
def bulk(topic: str, size: int) -> dict[str, Any]:
    return _fresh(topic=topic, padding="x" * size)


@agent.action(description="A fresh nonce, never cached.")
def plain(topic: str) -> dict[str, Any]:
    return _fresh(topic=topic)


@agent.action(description="draw through agent.call, as an agent calls another.")
async def relay(topic: str, refresh: bool, ctx: TaskContext) -> dict[str, Any]:
    return await ctx.call_agent("cached", "draw", {"topic": topic}, force_refresh=refresh)
