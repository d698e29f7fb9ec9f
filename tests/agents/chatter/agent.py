"""A gateway agent whose behaviour the tests choose by the first word of a message.

remember KEY VALUE    ctx.put                   cas KEY VALUE VERSION   ctx.put with a version
emit TYPE             a custom event            chunks N                N reply chunks, then done
progress              two progress reports      hang                    wait until cancelled
crash                 exit the process          oversize                a context write over the limit
nest N                ctx.put of a list N lists deep under "deep"
emitdeep N            a custom event and a reply chunk whose data is a list N lists deep
anything else         "<agent> heard: <text>"
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from ether_agent import Agent, AgentError, TaskContext
from ether_agent.gateway import CTX_CALLS, VersionConflict, session

agent = Agent(
    "chatter",
    kind="io_gateway",
    version="1.0.0",
    description="Test gateway agent.",
    max_concurrency=8,
    calls=["agent.call", *CTX_CALLS],
)


@agent.action(description="Answer one user message.")
async def respond(
    message: dict[str, Any], turn: int, ctx: TaskContext, steps: dict[str, Any] | None = None
) -> dict[str, Any]:
    text = str(message.get("text") or "")
    words = text.split()
    command = words[0] if words else ""
    s = session(ctx)
    if command == "crash":
        os._exit(3)
    if command == "remember":
        version = await s.put(words[1], " ".join(words[2:]))
        return {"text": f"remembered {words[1]} at version {version}"}
    if command == "cas":
        try:
            version = await s.put(words[1], words[2], expected_version=int(words[3]))
        except VersionConflict as conflict:
            return {"text": f"conflict: {conflict.message}"}
        return {"text": f"written at version {version}"}
    if command == "emit":
        await s.emit(words[1], {"turn": turn})
        return {"text": f"emitted {words[1]}"}
    if command == "chunks":
        for index in range(int(words[1])):
            await s.reply_chunk(f"c{index} ")
        return {"text": "done"}
    if command == "progress":
        ctx.progress(1, 2, "thinking")
        ctx.progress(2, 2, "writing")
        return {"text": "progressed"}
    if command == "hang":
        await asyncio.Event().wait()
    if command == "nest":
        value: Any = []
        for _ in range(int(words[1]) - 1):
            value = [value]
        try:
            version = await s.put("deep", value)
        except AgentError as error:
            return {"text": f"refused: {error.code}: {error.message}"}
        return {"text": f"nested at version {version}"}
    if command == "emitdeep":
        value = []
        for _ in range(int(words[1]) - 1):
            value = [value]
        await s.emit("deep", value)
        await s.reply_chunk("deep ", value)
        return {"text": f"emitted {words[1]} deep"}
    if command == "oversize":
        try:
            await s.put("blob", "x" * (2 * 1024 * 1024))
        except AgentError as error:
            return {"text": f"refused: {error.code}"}
        return {"text": "stored?"}
    return {"text": f"{ctx.agent_name} heard: {text}", "turn": turn, "steps": sorted(steps or {})}


if __name__ == "__main__":
    agent.run()
