"""The runtime's task deadlines: one timer for every task in flight."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from ether_agent._deadlines import Deadlines


@dataclass(eq=False)
class Task:
    name: str
    deadline: float
    finished: bool = False
    expired_at: list[float] = field(default_factory=list)


def _deadlines(expired: list[Task], all_expired: asyncio.Event, count: int) -> Deadlines[Task]:
    def expire(task: Task) -> None:
        task.expired_at.append(time.monotonic())
        expired.append(task)
        if len(expired) == count:
            all_expired.set()

    return Deadlines(asyncio.get_running_loop(), lambda t: not t.finished, expire)


def test_tasks_time_out_in_deadline_order_and_never_early() -> None:
    asyncio.run(_tasks_time_out_in_deadline_order_and_never_early())


async def _tasks_time_out_in_deadline_order_and_never_early() -> None:
    expired: list[Task] = []
    done = asyncio.Event()
    deadlines = _deadlines(expired, done, 2)
    now = time.monotonic()
    late, early, middle = (
        Task("late", now + 3600),
        Task("early", now + 0.02),
        Task("mid", now + 0.1),
    )
    # The far deadline first: unless the timer moves earlier, the other two wait an hour.
    for task in (late, early, middle):
        deadlines.add(task.deadline, task)
    await asyncio.wait_for(done.wait(), 10)
    assert [t.name for t in expired] == ["early", "mid"]
    assert all(t.expired_at == [t.expired_at[0]] and t.expired_at[0] >= t.deadline for t in expired)
    assert not late.expired_at


def test_a_task_that_finished_in_time_is_not_timed_out() -> None:
    asyncio.run(_a_task_that_finished_in_time_is_not_timed_out())


async def _a_task_that_finished_in_time_is_not_timed_out() -> None:
    expired: list[Task] = []
    done = asyncio.Event()
    deadlines = _deadlines(expired, done, 1)
    now = time.monotonic()
    finished, running = Task("finished", now + 0.02), Task("running", now + 0.05)
    deadlines.add(finished.deadline, finished)
    deadlines.add(running.deadline, running)
    finished.finished = True
    await asyncio.wait_for(done.wait(), 10)
    await asyncio.sleep(0)  # let the timer run once more, as it would for the finished task
    assert expired == [running]
    assert not finished.expired_at


def test_finished_tasks_with_long_deadlines_do_not_pile_up() -> None:
    asyncio.run(_finished_tasks_with_long_deadlines_do_not_pile_up())


async def _finished_tasks_with_long_deadlines_do_not_pile_up() -> None:
    deadlines = _deadlines([], asyncio.Event(), 1)
    far = time.monotonic() + 3600
    for n in range(20_000):
        task = Task(str(n), far)
        deadlines.add(far, task)
        task.finished = True  # answered long before its deadline, as nearly every task is
    assert len(deadlines) <= 2048
