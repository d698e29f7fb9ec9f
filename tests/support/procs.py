"""Processes the test does not parent: waiting for them to end, on events (pidfds), not by
polling, and reading their threads' CPU policies."""

from __future__ import annotations

import contextlib
import os
import select
import time


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
