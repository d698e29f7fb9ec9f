"""Logs as fast as it can when asked: the producer the slow-client tests need."""

from __future__ import annotations

import sys
from typing import Any

from ether_agent import Agent

agent = Agent("noisy", version="1.0.0", description="Test agent that floods its log.")


@agent.action(description="Write `lines` lines of `size` characters to stderr (log lines).")
def shout(lines: int, size: int = 1000) -> dict[str, Any]:
    text = "x" * size
    for number in range(lines):
        sys.stderr.write(f"INFO: line {number} {text}\n")
    sys.stderr.flush()
    return {"lines": lines}


@agent.action(description="Return the params.", idempotent=True)
def echo(params: dict[str, Any]) -> dict[str, Any]:
    return params


if __name__ == "__main__":
    agent.run()
