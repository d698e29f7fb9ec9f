"""A Python SDK agent whose actions exercise workflow runs.

Every action that waits does so until it is cancelled (never for a fixed
time), and says so in its log, so a test can see that the cancel frame
reached the agent.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from ether_agent import Agent, AgentError, NextAction, Output, TaskContext

agent = Agent(
    "flow", version="1.0.0", description="Test agent for workflow runs.", max_concurrency=64
)
_failures: dict[str, int] = {}


@agent.action(description="Return the params.", idempotent=True)
def echo(params: dict[str, Any]) -> dict[str, Any]:
    return params


@agent.action(
    description="A list holding a list ... `levels` lists in all: as the data, in the "
    "metadata's extra (`where: extra`), in an error's details (`where: details`), or in the "
    "fields of a log line (`where: log`).",
    idempotent=True,
)
def nest(levels: int, ctx: TaskContext, where: str = "data") -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    if where == "extra":
        ctx.cost(0.0, deep=value)
        return {"nested": levels}
    if where == "details":
        raise AgentError("nested", f"{levels} lists", {"deep": value})
    if where == "log":  # a JSON line on stderr: the host reads its keys as the record's fields
        print(
            json.dumps({"level": "info", "msg": f"nested {levels}", "deep": value}), file=sys.stderr
        )
        return {"nested": levels}
    return value


@agent.action(description="Double a number.", idempotent=True)
def double(input: float) -> dict[str, Any]:
    return {"value": input * 2}


@agent.action(description="Sum a list of numbers, or of {value} objects.", idempotent=True)
def total(input: list[Any]) -> dict[str, Any]:
    values = [item["value"] if isinstance(item, dict) else item for item in input]
    return {"total": sum(values), "count": len(values)}


@agent.action(description="List the numbers 1..n.", idempotent=True)
def numbers(n: int) -> dict[str, Any]:
    return {"items": list(range(1, n + 1))}


@agent.action(description="Return data and report a cost.", idempotent=True)
def charge(cost: float, input: Any = None) -> Output:
    return Output({"charged": cost, "input": input}, cost=cost, model="flow-model")


@agent.action(description="Fail with a code; retryable when asked.", idempotent=True)
def fail(
    code: str = "broken", message: str = "it broke", retryable: bool = False, input: Any = None
) -> None:
    raise AgentError(code, f"{message} (input {input!r})", retryable=retryable)


@agent.action(description="Raise an uncaught exception (its traceback lands in the report).")
def explode(input: Any = None) -> None:
    raise ZeroDivisionError(f"division by zero while handling {input!r}")


@agent.action(
    description="Fail the first `failures` attempts for `key`, then succeed.", idempotent=True
)
def flaky(key: str, failures: int) -> dict[str, Any]:
    seen = _failures.get(key, 0)
    if seen < failures:
        _failures[key] = seen + 1
        raise AgentError("flaky", f"attempt {seen + 1} of {key} fails", retryable=True)
    return {"key": key, "attempts": seen + 1}


_holding: set[str] = set()  # tags of the holds running now
_holds_changed = asyncio.Condition()


@agent.action(
    description="Wait until cancelled; log 'holding' at start and 'saw cancel' when the cancel comes.",
    idempotent=True,
)
async def hold(tag: str, ctx: TaskContext, input: Any = None) -> dict[str, Any]:
    async with _holds_changed:
        _holding.add(tag)
        _holds_changed.notify_all()
    ctx.log.info("holding", tag=tag)
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        ctx.log.info("saw cancel", tag=tag, run_task=ctx.task_id, input=input)
        raise
    finally:
        _holding.discard(tag)
    return {}


async def _holds_running(count: int) -> None:
    async with _holds_changed:
        await _holds_changed.wait_for(lambda: len(_holding) >= count)


def _claim(path: Path) -> bool:
    """True for the first caller: it creates the marker file."""
    try:
        with path.open("x") as handle:
            handle.write("waiting\n")
    except FileExistsError:
        return False
    return True


@agent.action(
    description="Wait until cancelled, unless the marker file exists (then return at once).",
    idempotent=True,
)
async def gate(
    marker: str, ctx: TaskContext, suffix: str = "", input: Any = None
) -> dict[str, Any]:
    if not await asyncio.to_thread(_claim, Path(marker + suffix)):
        return {"passed": input}
    ctx.log.info("gate waiting", tag=marker + suffix)
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        ctx.log.info("saw cancel", tag="gate", run_task=ctx.task_id, input=input)
        raise
    return {}


@agent.action(description="Like gate, but not idempotent.")
async def gate_once(
    marker: str, ctx: TaskContext, suffix: str = "", input: Any = None
) -> dict[str, Any]:
    return await gate(marker, ctx, suffix, input)


@agent.action(
    description="Propose `count` echo next actions, each proposing one more while depth allows."
)
def propose(count: int, depth: int = 1, tag: str = "") -> Output:
    proposals = [
        NextAction(
            "flow",
            "propose",
            {"count": 1 if depth > 1 else 0, "depth": depth - 1, "tag": f"{tag}/{i}"},
            reason="follow up",
        )
        for i in range(count)
    ]
    return Output({"proposed": count, "depth": depth}, next_actions=proposals)


@agent.action(
    description="One step of a mixed stage: {hold: tag} waits until cancelled, {cost: x} reports a "
    "cost, {after_holds: n} first waits until n holds run; anything else is returned.",
    idempotent=True,
)
async def step(input: Any, ctx: TaskContext) -> Any:
    if isinstance(input, dict) and "hold" in input:
        return await hold(str(input["hold"]), ctx, input)
    if isinstance(input, dict) and "after_holds" in input:
        await _holds_running(int(input["after_holds"]))  # so a test knows those holds are running
    if isinstance(input, dict) and "cost" in input:
        return Output({"spent": input["cost"]}, cost=float(input["cost"]))
    return {"input": input}


@agent.action(
    description="Report what the task was given: its budget and whether it has a deadline."
)
def context(ctx: TaskContext) -> dict[str, Any]:
    return {"budget": ctx.budget, "has_deadline": ctx.deadline is not None, "task_id": ctx.task_id}
