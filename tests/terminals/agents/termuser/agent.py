"""A Python SDK agent for the terminal tests: runs commands and drives a REPL through term.*."""

from __future__ import annotations

from typing import Any

from ether_agent import Agent, AgentError, TaskContext
from ether_agent.terminal import TERMINAL_CALLS, Terminal, run

agent = Agent(
    "termuser",
    version="1.0.0",
    description="Uses terminals on the host.",
    max_concurrency=4,
    calls=list(TERMINAL_CALLS),
)


@agent.action(description="Run a command until it exits, prints a pattern or goes quiet.")
async def run_command(
    command: str,
    ctx: TaskContext,
    pattern: str = "",
    quiet: float = 0,
    wait: float = 30,
    limit: int = 4000,
) -> dict[str, Any]:
    result = await run(
        ctx, command, pattern=pattern or None, quiet=quiet or None, timeout=wait, limit=limit
    )
    return {
        "reason": result.reason,
        "head": result.head,
        "tail": result.tail,
        "output": result.output,
        "total_chars": result.total_chars,
        "truncated": result.truncated,
        "exit_code": result.exit_code,
        "running": result.running,
        "terminal_id": result.terminal_id,
        "groups": result.groups,
    }


@agent.action(
    description="Ask a Python REPL to evaluate an expression; return the answer and the screen."
)
async def python(expression: str, ctx: TaskContext) -> dict[str, Any]:
    async with await Terminal.open(
        ctx, argv=["python3", "-q"], env={"PYTHON_BASIC_REPL": "1"}
    ) as term:
        prompt = await term.wait_screen(r">>> $")
        if not prompt["matched"]:
            raise AgentError(
                "no_prompt", f"python showed no prompt: {prompt['screen']['lines'][:3]}"
            )
        found = await term.type_and_wait(expression + "\r", output=r"\n(.*)\n>>> ")
        screen = await term.screen()
        return {"answer": found["groups"][0], "lines": screen["lines"][:3]}


@agent.action(description="Open a shell with background grandchildren; leave it running.")
async def open_shell(ctx: TaskContext) -> dict[str, Any]:
    term = await Terminal.open(ctx, argv=["bash", "--norc", "--noprofile"], env={"PS1": "agent$ "})
    await term.wait_screen(r"agent\$")
    await term.write(
        "setsid -w sleep 3001 & nohup sleep 3002 >/dev/null 2>&1 & sleep 3003 & echo started\r"
    )
    found = await term.wait_output(r"^started", after=0)
    if not found["matched"]:
        raise AgentError("not_started", "the shell did not start its children")
    return {"terminal_id": term.id}


@agent.action(description="Close a terminal by id (the agent's own).")
async def close(terminal_id: str, ctx: TaskContext) -> dict[str, Any]:
    return await ctx.host_call("term.close", {"terminal_id": terminal_id})  # type: ignore[no-any-return]


@agent.action(description="Read another terminal by id (to prove ownership checks).")
async def peek(terminal_id: str, ctx: TaskContext) -> dict[str, Any]:
    return await ctx.host_call("term.read", {"terminal_id": terminal_id})  # type: ignore[no-any-return]


if __name__ == "__main__":
    agent.run()
