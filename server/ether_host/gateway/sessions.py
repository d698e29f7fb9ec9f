"""User sessions: who owns them, which gateway agent serves them, their turns and events.

A session is served by one agent of kind ``io_gateway`` (assignment.py
chooses it, and replaces it when it fails).

Sessions belong to the identity that opened them; to anyone else they do
not exist (NOT_FOUND). Events are numbered per session and kept in a
bounded history, so a client that reconnects resumes after the last one it
saw.

Every session is also written to the gateway store (each event with the
session's row, and the context with the change that made it), so it is
still there after a host restart; in a cluster the store is Redis, and a
host that is asked to change a session another host holds brings it over
(``adopt``; the other ``release``s it). A turn that was running or waiting
when the host stopped did not finish: the restarted host ends it with an
``error`` event ``host_restarted`` and its ``turn_completed``.

This module is ``SessionStore``, the use cases over every session of the host; one session's
state (``Session``, ``Turn``) and its rebuilding from a stored row are session.py's.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import structlog

from ether_host.errors import (
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    NotFound,
    OutOfRange,
    QuotaViolation,
    ResourceExhausted,
    Unavailable,
)
from ether_host.gateway import events as ev
from ether_host.gateway.assignment import GatewayAgents
from ether_host.gateway.context import json_size
from ether_host.gateway.events import SessionEvent, error_data, event_record
from ether_host.gateway.notices import SessionNotices, SessionNotify
from ether_host.gateway.pipeline import build_pipeline
from ether_host.gateway.records import SessionRecords
from ether_host.gateway.session import CLOSED, Session, Turn, rebuild
from ether_host.gateway.settings import GatewaySettings
from ether_host.gateway.store import SavedSession
from ether_host.reasons import Reason
from ether_host.supervisor import Supervisor
from ether_host.telemetry import Tracing
from ether_host.value_levels import MAX_VALUE_LEVELS, OBJECT_LEVELS, nests_too_deep

log = structlog.get_logger("ether.gateway")

MAX_CLIENT_MESSAGE_ID = 128
REMEMBERED_MESSAGE_IDS = 1000
REMEMBERED_REQUEST_IDS = 10000


def _metadata_too_deep() -> InvalidArgument:
    """GetSession and ListSessions show a session's metadata as a Struct: metadata no client
    could decode would be shown as a note in its place on every read, so it is refused here."""
    return InvalidArgument(
        "metadata nests objects and lists deeper than a protobuf Struct can carry to a client "
        f"(at most {MAX_VALUE_LEVELS} levels: an object takes {OBJECT_LEVELS}, a list 2, the "
        "metadata itself an object); no session was opened: keep it flatter, or send such "
        "data as a JSON string",
        reason=Reason.INVALID_FIELD,
        metadata={"limit": str(MAX_VALUE_LEVELS)},
        violations=[FieldViolation("metadata", "nests too deep for a Struct")],
    )


class SessionStore:
    """Every session of this host, by id, and the agents serving them."""

    def __init__(
        self, supervisor: Supervisor, settings: GatewaySettings, store: SessionRecords
    ) -> None:
        self.supervisor = supervisor
        self.settings = settings
        self.store = store
        self.sessions: dict[str, Session] = {}
        self.agents = GatewayAgents(supervisor, self.sessions)
        self._request_ids: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._changed = anyio.Event()
        self.on_open: Callable[[Session], None] | None = None  # starts the turn worker
        self.on_close: Callable[[Session], None] | None = None  # delivers its session_closed
        self.notices: SessionNotices | None = None  # the notifier, when the host has one

    # -- use cases -----------------------------------------------------------------------

    def open(
        self,
        owner: str,
        *,
        agent: str = "",
        capability: str = "",
        pipeline: dict[str, Any] | None = None,
        context: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
        idle_timeout: float | None = None,
        request_id: str = "",
        notify: SessionNotify | None = None,
    ) -> Session:
        if request_id:
            earlier = self._request_ids.get((owner, request_id))
            if earlier is not None and earlier in self.sessions:
                return self.sessions[earlier]
        open_sessions = [s for s in self.sessions.values() if s.is_open]
        if len(open_sessions) >= self.settings.max_sessions:
            raise ResourceExhausted(
                f"the host has {len(open_sessions)} open sessions, its limit "
                "(gateway.max_sessions); close some first",
                reason=Reason.TOO_MANY_SESSIONS,
                retry_after=5.0,
                metadata={"limit": str(self.settings.max_sessions), "setting": "max_sessions"},
                quota_violations=[
                    QuotaViolation("host", f"at most {self.settings.max_sessions} open sessions")
                ],
            )
        mine = sum(1 for s in open_sessions if s.owner == owner)
        if mine >= self.settings.max_sessions_per_owner:
            raise ResourceExhausted(
                f"{owner} has {mine} open sessions, the limit per caller "
                "(gateway.max_sessions_per_owner); close some first",
                reason=Reason.TOO_MANY_SESSIONS_FOR_CALLER,
                retry_after=5.0,
                metadata={
                    "limit": str(self.settings.max_sessions_per_owner),
                    "setting": "max_sessions_per_owner",
                },
                quota_violations=[
                    QuotaViolation(
                        f"owner:{owner}",
                        f"at most {self.settings.max_sessions_per_owner} open sessions",
                    )
                ],
            )
        if notify:
            self._check_notify(notify)
        built = build_pipeline(pipeline, self.supervisor, self.agents.actions_elsewhere)
        chosen = self.agents.assign(agent, capability)
        timeout = self.settings.idle_timeout if idle_timeout is None else idle_timeout
        if timeout <= 0:
            raise InvalidArgument(
                "idle_timeout must be positive",
                reason=Reason.INVALID_IDLE_TIMEOUT,
                violations=[FieldViolation("idle_timeout", "more than 0 seconds")],
            )
        if metadata and nests_too_deep(metadata):
            raise _metadata_too_deep()
        session = Session(
            f"ses-{secrets.token_hex(8)}",
            owner,
            chosen,
            capability,
            built,
            metadata or {},
            context or {},
            min(timeout, self.settings.max_idle_timeout),
            self.settings,
        )
        session.request_id = request_id
        session.notify = notify or SessionNotify()
        self._add(session)
        self._journal(session, None)
        if self.on_open is not None:
            self.on_open(session)
        self.wake()
        log.info(
            "session opened",
            session=session.id,
            owner=owner,
            agent=chosen,
            capability=capability,
        )
        return session

    def _check_notify(self, notify: SessionNotify) -> None:
        if self.notices is None:
            raise InvalidArgument(
                "notify: this host delivers no notifications; open the session without one",
                reason=Reason.INVALID_FIELD,
                violations=[FieldViolation("notify", "not delivered by this host")],
            )
        self.notices.check_session_notify(notify)

    def _add(self, session: Session) -> None:
        self.sessions[session.id] = session
        session.journal = self._journal
        if session.request_id:
            self._request_ids[(session.owner, session.request_id)] = session.id
            while len(self._request_ids) > REMEMBERED_REQUEST_IDS:
                self._request_ids.popitem(last=False)

    def _journal(self, session: Session, emitted: tuple[int, SessionEvent] | None) -> None:
        """Queue the session's row to the store, with the event just emitted; the context
        goes with the event that announces its change (one atomic write), or with the row
        when the session opens."""
        context = None
        if emitted is None or emitted[1].kind == ev.CONTEXT_CHANGED:
            c = session.context
            context = (c.version, c.updated_at, c.document)
        event = None if emitted is None else (emitted[0], event_record(emitted[1]))
        self.store.save_session(session.id, session.owner, session.record(), event, context)

    def restore(self, saved: list[SavedSession]) -> None:
        """Take back the sessions the last host stored; their unfinished turns end here."""
        for stored in saved:
            self.adopt(stored)
        if saved:
            log.info(
                "sessions restored",
                sessions=len(saved),
                open=sum(1 for s in self.sessions.values() if s.is_open),
            )

    def adopt(self, stored: SavedSession, why: str = "host_restarted") -> Session:
        """Serve a stored session here (at start, or brought from another host): its turns
        that did not finish end with ``why``."""
        session = rebuild(stored, self.settings)
        self._add(session)
        if session.is_open:
            self._end_interrupted_turns(session, why)
            if self.on_open is not None:
                self.on_open(session)
        self.wake()
        return session

    def release(self, session: Session, to: str) -> None:
        """Let another host serve the session (cluster): its running and waiting turns end
        with ``session_moved``, its streams here end, and nothing here writes it again."""
        if session.worker is not None:
            session.worker.cancel()
        if session.is_open:
            self._end_interrupted_turns(session, "session_moved", to)
        self.sessions.pop(session.id, None)
        session.journal = None
        session.moved_to = to
        session.queue.close()
        session.wake()
        session.context.changes.wake()
        log.info("session released", session=session.id, to_host=to)

    @staticmethod
    def _end_interrupted_turns(session: Session, why: str, to: str = "") -> None:
        # A turn's text lives only in the queue of the host that accepted it: it cannot run
        # again here. The client sees it end, and may send it again.
        what = f"the session moved to host {to}" if to else "the host restarted"
        for number in range(session.completed + 1, session.turns + 1):
            session.emit(
                ev.ERROR,
                number,
                error_data(
                    "",
                    why,
                    f"{what} before this turn finished; send the message again",
                    retryable=True,
                ),
            )
            session.completed = number
            session.emit(ev.TURN_COMPLETED, number, {"latency": 0.0, "steps_run": []})

    def get(self, owner: str, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None or session.owner != owner:
            raise NotFound(
                f"no session {session_id[:64]!r} (it may have expired, or belong to someone else)",
                reason=Reason.SESSION_NOT_FOUND,
                resource=("session", session_id[:64]),
            )
        return session

    def get_open(self, owner: str, session_id: str) -> Session:
        session = self.get(owner, session_id)
        if not session.is_open:
            raise FailedPrecondition(
                f"session {session.id} is closed ({session.close_reason}); open a new one",
                reason=Reason.SESSION_CLOSED,
                resource=("session", session.id),
            )
        return session

    def list(self, owner: str, state: str = "") -> list[Session]:
        mine = [
            s
            for s in self.sessions.values()
            if s.owner == owner and (not state or s.state == state)
        ]
        return sorted(mine, key=lambda s: (s.created_at, s.id), reverse=True)

    def close(self, session: Session, reason: str) -> Session:
        """Close (idempotent): cancel the running turn, end every stream with session_closed."""
        if not session.is_open:
            return session
        session.state = CLOSED
        session.closed_at = time.time()
        session.close_reason = reason or "closed"
        if session.worker is not None:
            session.worker.cancel()
        session.queue.close()
        session.emit(ev.SESSION_CLOSED, 0, {"reason": session.close_reason})
        session.events.close()
        session.context.close()
        self.wake()
        log.info("session closed", session=session.id, reason=session.close_reason)
        if session.notify and self.on_close is not None:
            self.on_close(session)
        return session

    def submit(
        self, session: Session, text: str, data: dict[str, Any], client_message_id: str
    ) -> Turn:
        """Accept a user message as the next turn (or again, when its client id was seen)."""
        if not session.is_open:
            raise FailedPrecondition(
                f"session {session.id} is closed",
                reason=Reason.SESSION_CLOSED,
                resource=("session", session.id),
            )
        if not text and not data:
            raise InvalidArgument(
                "a message needs text or data",
                reason=Reason.EMPTY_MESSAGE,
                violations=[FieldViolation("message.text", "required unless data is set")],
            )
        if len(client_message_id) > MAX_CLIENT_MESSAGE_ID:
            raise InvalidArgument(
                f"client_message_id is longer than {MAX_CLIENT_MESSAGE_ID} characters",
                reason=Reason.INVALID_CLIENT_MESSAGE_ID,
                violations=[FieldViolation("message.client_message_id", "at most 128 characters")],
            )
        size = json_size({"text": text, "data": data})
        if size > self.settings.max_message_bytes:
            raise ResourceExhausted(
                f"the message is {size} bytes, over the limit of {self.settings.max_message_bytes}",
                reason=Reason.MESSAGE_TOO_LARGE,
                metadata={"size": str(size), "limit": str(self.settings.max_message_bytes)},
            )
        if client_message_id and client_message_id in session.message_ids:
            number = session.message_ids[client_message_id]
            session.emit(
                ev.ACCEPTED, number, {"client_message_id": client_message_id, "queued_ahead": 0}
            )
            return Turn(number, text, data, client_message_id)
        ahead = session.queued + (1 if session.current_turn else 0)
        links = Tracing.links_to_current()  # the span of the call sending it, when traced
        turn = Turn(session.turns + 1, text, data, client_message_id, trace_links=links)
        try:
            session.queue.send_nowait(turn)
        except anyio.WouldBlock:
            raise ResourceExhausted(
                f"session {session.id} has {session.queued} turns queued, the limit "
                "(gateway.turn_queue); wait for replies",
                reason=Reason.TURN_QUEUE_FULL,
                retry_after=1.0,
                resource=("session", session.id),
                metadata={"limit": str(self.settings.turn_queue), "setting": "turn_queue"},
                quota_violations=[
                    QuotaViolation(
                        f"session:{session.id}", f"at most {self.settings.turn_queue} turns queued"
                    )
                ],
            ) from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            # Its worker has stopped with the host: the restarted host takes the message.
            raise Unavailable(
                f"the host is stopping; send the message to session {session.id} again on the "
                "restarted host",
                reason=Reason.HOST_STOPPING,
                retry_after=1.0,
                resource=("session", session.id),
            ) from None
        session.turns = turn.number
        if client_message_id:
            session.message_ids[client_message_id] = turn.number
            while len(session.message_ids) > REMEMBERED_MESSAGE_IDS:
                session.message_ids.popitem(last=False)
        session.emit(
            ev.ACCEPTED,
            turn.number,
            {"client_message_id": client_message_id, "queued_ahead": ahead},
        )
        return turn

    def check_resume(self, session: Session, after: int) -> None:
        """OUT_OF_RANGE when events after ``after`` are no longer all held."""
        first = session.first_sequence()
        if after + 1 < first:
            raise OutOfRange(
                f"events after {after} are no longer retained; the oldest retained is {first}: "
                "resume from there or read GetContext for the current state",
                reason=Reason.EVENTS_EXPIRED,
                metadata={"first_sequence": str(first)},
            )

    async def follow(
        self, session: Session, after: int, until: Callable[[], bool]
    ) -> AsyncIterator[tuple[int, SessionEvent]]:
        async for sequence, event in session.events.follow(after, until=until):
            yield sequence, event

    # -- housekeeping --------------------------------------------------------------------

    def wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def reap(self) -> None:
        """Close idle sessions and forget closed ones after the retention; runs until cancelled."""
        while True:
            changed = self._changed
            now = time.time()
            next_due = now + 3600.0
            for session in list(self.sessions.values()):
                if session.is_open:
                    due = session.last_activity_at + session.idle_timeout
                    if due <= now and session.current_turn:
                        due = now + 1.0  # a turn is running: not idle, look again soon
                    elif due <= now:
                        self.close(session, "idle_timeout")
                        due = now + self.settings.retention
                else:
                    due = (session.closed_at or now) + self.settings.retention
                    if due <= now:
                        self.sessions.pop(session.id, None)
                        self.store.drop_session(session.id)
                        continue
                next_due = min(next_due, due)
            with anyio.move_on_after(max(0.05, next_due - time.time())):
                await changed.wait()

    def close_all(self, reason: str) -> None:
        for session in list(self.sessions.values()):
            self.close(session, reason)
