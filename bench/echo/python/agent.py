"""The benchmark's Python echo agent, written with the Ether SDK."""

from __future__ import annotations

from typing import Any

from ether_agent import Agent

# 128 > the 64 calls the benchmark keeps in flight, so nothing queues in the host.
agent = Agent(
    "echo-py",
    version="1.0.0",
    description="Benchmark echo agent (Python SDK).",
    max_concurrency=128,
)


@agent.action(description="Return the params unchanged.", idempotent=True)
async def echo(params: dict[str, Any]) -> dict[str, Any]:
    return params
