"""An agent whose every process answers every task `shutting_down`, as a draining agent does:
the host never gets a task run by it, however often it tries again."""

from __future__ import annotations

from typing import Any

from ether_agent import Agent, AgentError

agent = Agent("refuser", version="1.0.0", description="Test agent that refuses every task.")


@agent.action(description="Answer shutting_down, whatever the process and the attempt.")
def serve() -> dict[str, Any]:
    raise AgentError("shutting_down", "this agent is shutting down", retryable=True)
