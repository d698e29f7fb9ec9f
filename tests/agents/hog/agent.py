"""A Python SDK agent that runs into its resource limits: memory, processes, open files."""

from __future__ import annotations

import os
import subprocess
from typing import Any

from ether_agent import Agent

agent = Agent("hog", version="1.0.0", description="Runs into its limits for the limits tests.")


@agent.action(description="Hold mib MiB of memory, every page written; return how much.")
def allocate(mib: int) -> dict[str, Any]:
    held = [b"\x01" * (1 << 20) for _ in range(mib)]  # bytes * n writes every page
    return {"held_mib": len(held)}


# What ``hold`` keeps for the life of the process.
_kept: list[bytes] = []


@agent.action(description="Keep mib MiB more of memory, every page written, for good.")
def hold(mib: int) -> dict[str, Any]:
    _kept.extend(b"\x01" * (1 << 20) for _ in range(mib))
    return {"held_mib": len(_kept)}


@agent.action(description="Start a shell fork bomb whose processes all carry marker; return.")
def bomb(marker: str) -> dict[str, Any]:
    # $0 is the marker in every subshell's command line: the test finds what is left by it.
    subprocess.Popen(
        ["sh", "-c", "b() { b | b & }; b", marker],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return {"started": True}


@agent.action(description="Open /dev/null up to count times; return how many opened.")
def open_files(count: int) -> dict[str, Any]:
    opened: list[int] = []
    error = ""
    try:
        while len(opened) < count:
            opened.append(os.open(os.devnull, os.O_RDONLY))
    except OSError as failure:
        error = failure.strerror or str(failure)
    finally:
        for fd in opened:
            os.close(fd)
    return {"opened": len(opened), "error": error}


@agent.action(description="This process's memory and process-count control groups.")
def groups() -> dict[str, Any]:
    found = {}
    with open("/proc/self/cgroup") as lines:
        for line in lines:
            _, names, path = line.rstrip("\n").split(":", 2)
            for name in names.split(","):
                found[name] = path
    return {"memory": found.get("memory", ""), "pids": found.get("pids", "")}
