"""Processes the test does not parent: waiting for them to end, on events (pidfds), not by
polling, and reading their threads' CPU policies."""

from __future__ import annotations

import contextlib
import os
import select
import time
from pathlib import Path


def wait_gone(pids: list[int], within: float) -> list[int]:
    """Wait until every pid has exited (zombies count as exited); return those still running.

    A pidfd (Linux 5.3+) becomes readable when its process exits, also for a
    process that is not our child, so this blocks in poll(2) instead of
    looking at /proc in a loop.
    """
    poller = select.poll()
    fds: dict[int, int] = {}
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue  # already gone (and reaped)
        fds[fd] = pid
        poller.register(fd, select.POLLIN)
    deadline = time.monotonic() + within
    try:
        while fds:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for fd, _ in poller.poll(left * 1000):
                poller.unregister(fd)
                os.close(fd)
                fds.pop(fd, None)
        return sorted(fds.values())
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def thread_policies(pid: int) -> dict[int, int]:
    """The CPU scheduling policy (os.SCHED_*) of each thread of ``pid``, by thread id; a
    thread that ends while this reads is left out."""
    policies = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):
            policies[int(tid)] = os.sched_getscheduler(int(tid))
    return policies


def host_pid(pid: float, agent: int) -> int:
    """The pid in the host's view of the process that agent ``agent`` (a host pid) reports as
    ``pid``: where the host runs each agent in a PID namespace of its own (bubblewrap), the
    pids an agent sees are those of its namespace. Unchanged where it runs none. (``pid`` may
    come out of a JSON result as a float.)"""
    pid = int(pid)
    namespace = os.readlink(f"/proc/{agent}/ns/pid")
    if namespace == os.readlink("/proc/self/ns/pid"):
        return pid
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{name}/ns/pid") != namespace:
                continue
            with open(f"/proc/{name}/status") as status:
                for line in status:
                    if line.startswith("NSpid:") and int(line.split()[-1]) == pid:
                        return int(name)
    raise LookupError(f"no process {pid} in the namespace of agent {agent}")


def path_without(folder: Path, *programs: str) -> str:
    """A PATH with every program of this one but ``programs``: symlinks in ``folder``. A host
    started with it runs as on a machine where those are not installed."""
    folder.mkdir(parents=True, exist_ok=True)
    for directory in os.environ["PATH"].split(os.pathsep):
        if os.path.isdir(directory):
            for entry in os.scandir(directory):
                link = folder / entry.name
                if entry.name not in programs and not link.exists():
                    link.symlink_to(entry.path)
    return str(folder)
