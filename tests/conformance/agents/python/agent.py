"""The Python conformance agent: the contract in tests/conformance/README.md, with the SDK."""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any

from ether_agent import Agent, AgentError, TaskContext
from ether_agent.gateway import CTX_CALLS, MSG_CALLS, NET_CALLS
from ether_agent.terminal import TERMINAL_CALLS

# A banner through the normal print at import time: it must land on stderr, not in the frames.
print("conformance agent (python): loading")

agent = Agent(
    "conformance",
    version="1.0.0",
    description="Implements the cross-language conformance contract.",
    max_concurrency=128,
    max_frame=64 * 1024 * 1024,
    calls=["agent.call"],
)


@agent.action(description="Return the params unchanged.")
async def echo(params: dict[str, Any]) -> dict[str, Any]:
    return params


@agent.action(description="Sleep ms milliseconds (cancellable); return {slept: ms}.")
async def sleep(ms: int) -> dict[str, Any]:
    await asyncio.sleep(ms / 1000)
    return {"slept": ms}


@agent.action(description="Send `steps` progress frames, then return {steps}.")
async def progress(steps: int, ctx: TaskContext) -> dict[str, Any]:
    for i in range(1, steps + 1):
        ctx.progress(i, steps, f"step {i} of {steps}")
        await asyncio.sleep(0)
    return {"steps": steps}


@agent.action(description="Fail with the given error code and message.")
async def fail(code: str, message: str) -> None:
    raise AgentError(code, message)


@agent.action(description="Return {data: 'x' * bytes}.")
async def big(bytes: int) -> dict[str, Any]:
    return {"data": "x" * bytes}


@agent.action(name="print", description="print() the text to stdout; return {printed: true}.")
def print_text(text: str) -> dict[str, Any]:
    print(text)
    return {"printed": True}


@agent.action(description="Run `action` of `agent` through the host (agent.call).")
async def call(
    agent: str, action: str, ctx: TaskContext, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    return await ctx.call_agent(agent, action, params or {})


@agent.action(description="Start a child process `sleep 300` without waiting; return {pid}.")
def spawn() -> dict[str, Any]:
    child = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
    return {"pid": child.pid}


# The params schema of `checked`: one property per case of tests/conformance/params_rule.json (the
# same JSON text in the Go and TypeScript agents; vectors/params_rule.json checks the hello).
CHECKED_SCHEMA = json.loads(
    """{"type": "object", "properties": {
  "type": {"type": "integer"},
  "required": {"type": "object", "required": ["id"]},
  "properties": {"type": "object", "properties": {"id": {"type": "string"}}},
  "items": {"type": "array", "items": {"type": "integer"}},
  "additionalProperties": {"type": "object", "additionalProperties": {"type": "string"}},
  "closed": {"type": "object", "properties": {"a": {}}, "additionalProperties": false},
  "enum": {"enum": ["red", "green", 1]},
  "const": {"const": {"a": 1, "b": [1, 2]}},
  "minimum": {"type": "number", "minimum": 0},
  "maximum": {"type": "number", "maximum": 10},
  "exclusiveMinimum": {"type": "number", "exclusiveMinimum": 0},
  "exclusiveMaximum": {"type": "number", "exclusiveMaximum": 10},
  "multipleOf": {"type": "number", "multipleOf": 5},
  "minLength": {"type": "string", "minLength": 2},
  "maxLength": {"type": "string", "maxLength": 3},
  "pattern": {"type": "string", "pattern": "^[a-z]+$"},
  "minItems": {"type": "array", "minItems": 1},
  "maxItems": {"type": "array", "maxItems": 2},
  "uniqueItems": {"type": "array", "uniqueItems": true},
  "contains": {"type": "array", "contains": {"type": "string"}},
  "minProperties": {"type": "object", "minProperties": 1},
  "dependentRequired": {"type": "object", "dependentRequired": {"a": ["b"]}},
  "anyOf": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
  "oneOf": {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 5}]},
  "allOf": {"allOf": [{"minimum": 0}, {"maximum": 10}]},
  "not": {"not": {"type": "string"}}
}}"""
)


@agent.action(
    description="Return the params unchanged (params_rule.json's keywords).", schema=CHECKED_SCHEMA
)
async def checked(params: dict[str, Any]) -> dict[str, Any]:
    return params


@agent.action(description="Every host call the SDK knows (its call lists), sorted.")
async def host_calls() -> dict[str, Any]:
    known = {"agent.call", *CTX_CALLS, *MSG_CALLS, *NET_CALLS, *TERMINAL_CALLS}
    return {"calls": sorted(known)}
