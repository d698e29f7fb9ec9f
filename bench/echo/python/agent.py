"""The benchmark's Python echo agent, written with the Ether SDK: echo returns its params
unchanged; hold returns them after params["ms"] milliseconds (bench/scale.py keeps thousands
of tasks in flight with it)."""

from __future__ import annotations

import asyncio
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


@agent.action(description="Return the params after params.ms milliseconds.", idempotent=True)
async def hold(params: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(float(params.get("ms", 0)) / 1000)
    return params
