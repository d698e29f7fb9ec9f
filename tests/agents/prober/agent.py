"""A Python SDK agent that tries what a sandbox must refuse, and reports what happened."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from ether_agent import Agent, TaskContext
from ether_agent.gateway import NET_CALLS, fetch
from ether_agent.terminal import TERMINAL_CALLS, run

agent = Agent(
    "prober",
    version="1.0.0",
    description="Probes its sandbox.",
    calls=[*NET_CALLS, *TERMINAL_CALLS],
)


def _outcome(error: BaseException | None = None, **found: Any) -> dict[str, Any]:
    return {"ok": error is None, "error": "" if error is None else type(error).__name__, **found}


@agent.action(description="Open a TCP connection to host:port.")
def connect(host: str, port: int) -> dict[str, Any]:
    try:
        with socket.create_connection((host, port), timeout=5):
            return _outcome()
    except OSError as error:
        return _outcome(error)


@agent.action(description="Read a file, or list a directory.")
def read(path: str) -> dict[str, Any]:
    try:
        target = Path(path)
        if target.is_dir():
            return _outcome(entries=sorted(os.listdir(target)))
        return _outcome(size=len(target.read_bytes()))
    except OSError as error:
        return _outcome(error)


@agent.action(description="Create a file at path.")
def write(path: str) -> dict[str, Any]:
    try:
        Path(path).write_text("written by the prober\n")
        return _outcome()
    except OSError as error:
        return _outcome(error)


@agent.action(description="The processes this agent can see, and its environment.")
def look() -> dict[str, Any]:
    commands = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                raw = Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue
            commands[name] = raw.replace(b"\0", b" ").decode(errors="replace").strip()
    keep = ("HOME", "TMPDIR", "ETHER_SCRATCH", "HOSTNAME")
    return {
        "processes": commands,
        "env": {k: os.environ.get(k, "") for k in keep} | {"HOSTNAME": socket.gethostname()},
        "cwd": os.getcwd(),
    }


@agent.action(description="GET a URL through the host's net.fetch.")
async def get(url: str, ctx: TaskContext) -> dict[str, Any]:
    response = await fetch(ctx, url)
    return {"status": response.status, "text": response.text}


@agent.action(description="Run a command in a terminal of this agent's and return its output.")
async def shell(command: str, ctx: TaskContext) -> dict[str, Any]:
    result = await run(ctx, command, timeout=60)
    output = result.head + result.tail if result.truncated else result.head
    return {"reason": result.reason, "output": output, "exit_code": result.exit_code}


if __name__ == "__main__":
    agent.run()
