"""A Python SDK agent whose every execution of a task leaves a file named after the task and
its host in a folder the test shares with it, then waits until the test opens a gate (a file in
the same folder): a test can kill a host while tasks run there, and count how often each ran."""

from __future__ import annotations

import asyncio
import os
import secrets
from pathlib import Path
from typing import Any

from ether_agent import Agent, TaskContext

# Deployed under a name starting "narrow", it runs two tasks at once (a test fills it up).
NARROW = os.environ.get("ETHER_AGENT_NAME", "").startswith("narrow")
agent = Agent(
    "tally",
    version="1.0.0",
    description="Counts its executions in files.",
    max_concurrency=2 if NARROW else 64,
)


async def _tally(folder: str, gate: str, ctx: TaskContext) -> dict[str, Any]:
    where = Path(folder)
    # The pid of the host that runs this agent: its spawn ids are "<host pid>-<n>".
    host = os.environ.get("ETHER_SPAWN_ID", "").partition("-")[0]
    ran = where / f"{ctx.task_id}.{host}.{secrets.token_hex(4)}.ran"
    await asyncio.to_thread(ran.write_text, f"{host}\n")
    while True:  # until the test opens the gate with a file
        if not gate or (where / gate).exists():
            return {"task_id": ctx.task_id, "host_pid": host}
        await asyncio.sleep(0.05)


@agent.action(description="Leave a file, wait for the gate; safe to run again.", idempotent=True)
async def mark(folder: str, ctx: TaskContext, gate: str = "", n: int = 0) -> dict[str, Any]:
    del n  # only makes one task's params differ from another's
    return await _tally(folder, gate, ctx)


@agent.action(description="Leave a file, wait for the gate; not safe to run twice.")
async def spend(folder: str, ctx: TaskContext, gate: str = "", n: int = 0) -> dict[str, Any]:
    del n
    return await _tally(folder, gate, ctx)
