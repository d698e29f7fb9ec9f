"""A Python SDK agent that proposes follow-ups for two agents: ``flow.echo`` and its own
``note``, so a test can see which of them a stage's ``allowed_agents`` lets run."""

from __future__ import annotations

from typing import Any

from ether_agent import Agent, NextAction, Output

agent = Agent("suggester", version="1.0.0", description="Proposes next actions.")


@agent.action(description="Propose flow.echo and suggester.note, both tagged with `tag`.")
def suggest(tag: str) -> Output:
    return Output(
        {"suggested": tag},
        next_actions=[
            NextAction("flow", "echo", {"tag": tag, "by": "flow"}, reason="echo it"),
            NextAction("suggester", "note", {"tag": tag}, reason="note it"),
        ],
    )


@agent.action(description="Return the tag it was given.")
def note(tag: str) -> dict[str, Any]:
    return {"noted": tag}
