"""The A2A tasks this host remembers: each one Ether task, its A2A view and its stream events.

Ether itself keeps no record of a task once its caller has the answer; A2A lets a client come
back for one (GetTask, ListTasks, SubscribeToTask), so this front keeps what it handed out, in
memory and bounded: a finished task is kept for ``FINISHED_TTL`` seconds and at most
``MAX_FINISHED`` finished tasks are kept (the oldest go first). Running tasks are never dropped;
their number is bounded by the agents' own slots and queues (a full queue refuses a task
before it is recorded). Each task's events are a ``bus.History`` of ``EVENT_HISTORY`` items: a
subscriber further behind than that starts from the task's snapshot, which is always current.
Nothing survives a host restart.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio
from a2a.types import a2a_pb2
from a2a.utils.errors import A2AError
from google.protobuf.timestamp_pb2 import Timestamp

from ether_host.bus import History

MAX_FINISHED = 10_000
FINISHED_TTL = 3600.0  # seconds
EVENT_HISTORY = 256

TERMINAL_STATES = frozenset(
    {
        a2a_pb2.TASK_STATE_COMPLETED,
        a2a_pb2.TASK_STATE_FAILED,
        a2a_pb2.TASK_STATE_CANCELED,
        a2a_pb2.TASK_STATE_REJECTED,
    }
)

Event = a2a_pb2.Task | a2a_pb2.TaskStatusUpdateEvent | a2a_pb2.TaskArtifactUpdateEvent


@dataclass(eq=False, slots=True)
class A2ATask:
    """One A2A task: the Task message clients see, kept current, and while it runs the events
    that made it. A finished task lets its events and its done event go (followers hold their
    own reference): thousands of finished tasks are kept, and each object they hold is one more
    for every garbage collection to walk -- with 10,000 kept, SendMessage at 64 in flight ran at
    a third of the rate it had with 100."""

    task: a2a_pb2.Task
    tenant: str  # the agent
    owner: str  # the identity that sent the message: only it sees the task
    number: int  # creation order, the ListTasks cursor
    events: History[Event] | None = field(default_factory=lambda: History(EVENT_HISTORY))
    done: anyio.Event | None = field(default_factory=anyio.Event)
    finished_at: float | None = None  # time.monotonic()
    on_finish: Callable[[A2ATask], None] | None = None
    admitted: bool = False  # the dispatcher took the task (set by the handler)
    refused: A2AError | None = None  # why the dispatcher would not take it

    @property
    def id(self) -> str:
        return self.task.id

    @property
    def finished(self) -> bool:
        return self.task.status.state in TERMINAL_STATES

    def snapshot(self) -> a2a_pb2.Task:
        copy = a2a_pb2.Task()
        copy.CopyFrom(self.task)
        return copy

    def set_status(
        self,
        state: int,
        message: a2a_pb2.Message | None = None,
        *,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Move to ``state`` and publish the status update (the last one for a final state)."""
        status = self.task.status
        status.state = state  # type: ignore[assignment] # an enum number
        status.ClearField("message")
        if message is not None:
            status.message.CopyFrom(message)
        status.timestamp.CopyFrom(now())
        event = a2a_pb2.TaskStatusUpdateEvent(
            task_id=self.task.id, context_id=self.task.context_id, status=status
        )
        if metadata:
            event.metadata.update({"ether": metadata})
        assert self.events is not None and self.done is not None, "the task has ended"
        self.events.append(event)
        if state in TERMINAL_STATES:
            self.finished_at = time.monotonic()
            self.events.close()
            self.done.set()
            self.events = self.done = None
            if self.on_finish is not None:
                self.on_finish(self)
                self.on_finish = None

    async def wait(self) -> None:
        """Until the task has ended."""
        done = self.done
        if done is not None:
            await done.wait()

    def add_artifact(self, artifact: a2a_pb2.Artifact) -> None:
        self.task.artifacts.append(artifact)
        assert self.events is not None, "the task has ended"
        self.events.append(
            a2a_pb2.TaskArtifactUpdateEvent(
                task_id=self.task.id,
                context_id=self.task.context_id,
                artifact=artifact,
                last_chunk=True,
            )
        )

    async def follow(self) -> AsyncIterator[Event]:
        """The task as it is now, then each event after it until the task ends: a finished task
        yields its final state and nothing else (A2A#1180, a2a-dotnet#341)."""
        events = self.events  # None once the task has ended
        after = events.last_sequence if events is not None else 0
        yield self.snapshot()
        if events is None:
            return
        # Followed even when the task ended while the caller held the yield: the history is
        # closed then, and its events after the snapshot come before the follow ends.
        while True:
            async with contextlib.aclosing(events.follow(after)) as held:
                async for sequence, event in held:
                    if sequence > after + 1:
                        # The caller fell further behind than EVENT_HISTORY: the events it
                        # missed are gone (an artifact's appended chunks among them), so it gets
                        # the task as it stands instead, and the events after that.
                        after, caught_up = events.last_sequence, self.snapshot()  # together
                        break
                    after = sequence
                    yield event
                else:
                    return
            yield caught_up


class TaskBook:
    """Every A2A task this host remembers, by id, in creation order."""

    def __init__(self, *, max_finished: int = MAX_FINISHED, ttl: float = FINISHED_TTL) -> None:
        self._tasks: dict[str, A2ATask] = {}
        self._finished: OrderedDict[str, A2ATask] = OrderedDict()  # in the order they ended
        self._numbers = itertools.count(1)
        self._max_finished = max_finished
        self._ttl = ttl

    def __len__(self) -> int:
        return len(self._tasks)

    def add(self, task: a2a_pb2.Task, tenant: str, owner: str) -> A2ATask:
        self._forget_old()
        record = A2ATask(task, tenant, owner, next(self._numbers), on_finish=self._ended)
        self._tasks[task.id] = record
        return record

    def _ended(self, record: A2ATask) -> None:
        if record.id in self._tasks:
            self._finished[record.id] = record

    def discard(self, record: A2ATask) -> None:
        """Forget a task that never ran (its message was refused)."""
        self._tasks.pop(record.id, None)
        self._finished.pop(record.id, None)

    def get(self, task_id: str, owner: str) -> A2ATask | None:
        record = self._tasks.get(task_id)
        if record is None or record.owner != owner:
            return None
        return record

    def newest_first(self, owner: str) -> Iterable[A2ATask]:
        self._forget_old()
        return (r for r in reversed(self._tasks.values()) if r.owner == owner)

    def _forget_old(self) -> None:
        """Drop the finished tasks past their time or past the count, oldest first."""
        now = time.monotonic()
        while self._finished:
            record = next(iter(self._finished.values()))
            assert record.finished_at is not None
            if len(self._finished) <= self._max_finished and now - record.finished_at <= self._ttl:
                return
            del self._finished[record.id]
            self._tasks.pop(record.id, None)


def now() -> Timestamp:
    """The time now (Timestamp.GetCurrentTime goes through a datetime: 5x slower)."""
    seconds, nanos = divmod(time.time_ns(), 1_000_000_000)
    return Timestamp(seconds=seconds, nanos=nanos)
