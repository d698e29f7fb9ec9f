"""A cached action that finishes or stops halfway (a PARTIAL result: what was done, and what
stopped it); each run answers with a fresh nonce, so a caller can tell a result the agent made
now from one the host kept."""

from __future__ import annotations

import secrets
from typing import Any

from ether_agent import Agent, AgentError, Output, Partial

agent = Agent("halfway", version="1.0.0")


@agent.action(
    description="A fresh nonce for the topic, PARTIAL unless complete; kept an hour.",
    cache_ttl=3600,
)
def gather(topic: str, complete: bool) -> dict[str, Any] | Output:
    done = {"topic": topic, "nonce": secrets.token_hex(8)}
    if complete:
        return done
    return Partial(done, AgentError("stopped_halfway", f"stopped halfway on {topic}"))
