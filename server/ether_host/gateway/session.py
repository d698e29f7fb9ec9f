"""One session's state: its owner and serving agent, context, pipeline, turns and events, and
its rebuilding from the gateway store.

A ``Session`` holds what a session is and what it has said (its event history and context),
and emits its own events; it does not decide who may open one, which agent serves it or when
it closes: the ``SessionStore`` (sessions.py) does, over every session of the host. The two
are apart so that the state and the way a stored row becomes that state again sit together,
without the use cases around them: ``rebuild`` serves the store at start and when a session is
brought from another host (``adopt``), and the use cases when a caller reads a session that
another host holds.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ether_host.bus import History
from ether_host.gateway import events as ev
from ether_host.gateway.context import Change, Context
from ether_host.gateway.events import SessionEvent, event_from
from ether_host.gateway.notices import SessionNotify
from ether_host.gateway.pipeline import Pipeline, describe, restore_pipeline
from ether_host.gateway.settings import GatewaySettings
from ether_host.gateway.store import SavedSession
from ether_host.telemetry import Link

OPEN, CLOSED = "OPEN", "CLOSED"


@dataclass(frozen=True)
class Turn:
    """A user message accepted as a turn."""

    number: int
    text: str
    data: dict[str, Any]
    client_message_id: str = ""
    accepted_at: float = field(default_factory=time.monotonic)
    trace_links: list[Link] = field(default_factory=list)  # the sending call's span, if traced


class Session:
    """One user session: owner, serving agent, context, pipeline, turns and events."""

    def __init__(
        self,
        session_id: str,
        owner: str,
        agent: str,
        capability: str,
        pipeline: Pipeline,
        metadata: dict[str, Any],
        initial: dict[str, Any],
        idle_timeout: float,
        settings: GatewaySettings,
    ) -> None:
        self.id = session_id
        self.owner = owner
        self.agent = agent
        self.capability = capability
        self.pipeline = pipeline
        self.metadata = metadata
        self.idle_timeout = idle_timeout
        self.state = OPEN
        self.created_at = self.last_activity_at = time.time()
        self.closed_at: float | None = None
        self.close_reason = ""
        self.turns = 0  # accepted
        self.completed = 0  # turns whose events are all out
        self.current_turn = 0
        self.events: History[SessionEvent] = History(settings.event_history)
        self.context = Context(
            initial,
            max_bytes=settings.max_context_bytes,
            history=settings.context_history,
            on_change=self._context_changed,
        )
        self.task_roots: set[str] = set()  # root tasks allowed to use ctx.* on this session
        self.message_ids: OrderedDict[str, int] = OrderedDict()
        self.request_id = ""  # the OpenSession request_id that made it
        self.notify = SessionNotify()  # where its turns and closing are delivered (notices.py)
        self._pipeline_record = describe(pipeline)  # a pipeline never changes: described once
        # Called with each event emitted (None: the session itself changed); the store's hook.
        self.journal: Callable[[Session, tuple[int, SessionEvent] | None], None] | None = None
        self.queue: MemoryObjectSendStream[Turn]
        self.inbox: MemoryObjectReceiveStream[Turn]
        self.queue, self.inbox = anyio.create_memory_object_stream[Turn](settings.turn_queue)
        self.worker: anyio.CancelScope | None = None
        self.moved_to = ""  # the host it was released to (cluster): its streams here end

    @property
    def is_open(self) -> bool:
        return self.state == OPEN

    def emit(self, kind: str, turn: int, data: Any) -> int:
        """Append an event to the session's stream; returns its sequence number."""
        self.last_activity_at = time.time()
        event = SessionEvent(kind, turn, data)
        sequence = self.events.append(event)
        if self.journal is not None:
            self.journal(self, (sequence, event))
        return sequence

    def record(self) -> dict[str, Any]:
        """The session's own fields as plain values (context and events are stored apart)."""
        return {
            "id": self.id,
            "owner": self.owner,
            "agent": self.agent,
            "capability": self.capability,
            "pipeline": self._pipeline_record,
            "metadata": self.metadata,
            "idle_timeout": self.idle_timeout,
            "state": self.state,
            "created_at": self.created_at,
            "last_activity_at": self.last_activity_at,
            "closed_at": self.closed_at,
            "close_reason": self.close_reason,
            "turns": self.turns,
            "completed": self.completed,
            "request_id": self.request_id,
            "notify": self.notify.record() if self.notify else None,
        }

    def wake(self) -> None:
        """Make followers of the event stream re-check their stop condition."""
        self.events.wake()

    def _context_changed(self, change: Change) -> None:
        self.emit(ev.CONTEXT_CHANGED, self.current_turn, change)

    def first_sequence(self) -> int:
        """The oldest event sequence still held (last + 1 when none is)."""
        held = self.events.since(0)
        return held[0][0] if held else self.events.last_sequence + 1

    @property
    def queued(self) -> int:
        return self.queue.statistics().current_buffer_used


def rebuild(stored: SavedSession, settings: GatewaySettings) -> Session:
    """A stored session as it was: its row, context and retained events."""
    body = stored.body
    session = Session(
        body["id"],
        body["owner"],
        body["agent"],
        body["capability"],
        restore_pipeline(body["pipeline"]),
        body["metadata"],
        {},
        float(body["idle_timeout"]),
        settings,
    )
    session.state = body["state"]
    session.created_at = float(body["created_at"])
    session.closed_at = body["closed_at"]
    session.close_reason = body["close_reason"]
    session.turns = int(body["turns"])
    session.completed = int(body["completed"])
    session.request_id = body["request_id"]
    session.notify = SessionNotify.from_record(body.get("notify"))
    events = [(sequence, event_from(record)) for sequence, record in stored.events]
    session.events.restore(events, events[-1][0] if events else 0)
    session.context.restore(
        stored.document,
        stored.version,
        stored.updated_at,
        [e.data for _, e in events if e.kind == ev.CONTEXT_CHANGED],
    )
    session.last_activity_at = max([float(body["last_activity_at"])] + [e.time for _, e in events])
    for _, event in events:
        client_id = event.data.get("client_message_id") if event.kind == ev.ACCEPTED else ""
        if client_id:
            session.message_ids[client_id] = event.turn
    return session
