"""The gateway's use cases, one method per thing a client or the host asks for.

The transport calls these with the caller's identity; the identity decides
whose sessions exist (owners) and what is allowed (rights):
``gateway.message`` to send and publish, ``gateway.admin`` to watch an
agent's mailbox, ``gateway.audit`` to read the egress audit log. Tokens
without a rights column hold every right.

What a use case changes is committed to the gateway store before it
answers (``store.durable()``), and a Converse stream shows an event only
once it is committed: a client is never told of something a ``kill -9`` of
the host could take back.

In a cluster (docs/cluster.md, "The gateway across hosts") sessions are
written to Redis, and any host answers for any of them: a read of a session
another host holds reads it as stored; a change, a Converse or a
WatchContext brings it here first (``elsewhere.bring_session``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import TaskStatus

from ether_host.agents import Dispatcher
from ether_host.auth import Identity
from ether_host.background import start_detached
from ether_host.errors import PermissionDenied, Unavailable
from ether_host.gateway.calls import HostCalls
from ether_host.gateway.context import Change
from ether_host.gateway.egress.audit import AuditFilter, AuditLog, AuditRecord
from ether_host.gateway.egress.fetch import Egress
from ether_host.gateway.elsewhere import OtherGateways
from ether_host.gateway.events import SessionEvent, event_record
from ether_host.gateway.messaging import Message, Messaging, SubscriptionLagged
from ether_host.gateway.notices import SESSION_CLOSED, SessionNotices
from ether_host.gateway.records import SessionRecords
from ether_host.gateway.session import Session, Turn, rebuild
from ether_host.gateway.sessions import SessionStore
from ether_host.gateway.settings import GatewaySettings
from ether_host.gateway.store import GatewayStore, SavedSession
from ether_host.gateway.turns import TurnRunner
from ether_host.paging import Page, paginate
from ether_host.reasons import Reason
from ether_host.supervisor import Supervisor

log = structlog.get_logger("ether.gateway")

RIGHT_MESSAGE = "gateway.message"
RIGHT_ADMIN = "gateway.admin"
RIGHT_AUDIT = "gateway.audit"


class Gateway:
    """Sessions, their context and turns, messaging and egress: the whole feature."""

    def __init__(
        self,
        supervisor: Supervisor,
        dispatcher: Dispatcher,
        state_dir: Path,
        table: Mapping[str, Any],
        store: GatewayStore,
        records: SessionRecords | None = None,
    ) -> None:
        """``records``: where sessions are written (the cluster's Redis store); ``store``, the
        host's own SQLite file, when None."""
        self.settings = GatewaySettings.from_table(table)
        self.supervisor = supervisor
        self.store = store
        store.retain(
            events=self.settings.event_history,
            topic_messages=self.settings.topic_retention,
            request_ids=self.settings.remembered_request_ids,
        )
        self.records: SessionRecords = store if records is None else records
        self.sessions = SessionStore(supervisor, self.settings, self.records)
        self.turns = TurnRunner(dispatcher, self.sessions, self.settings)
        self.messaging = Messaging(supervisor, dispatcher, self.settings, store)
        self.audit = AuditLog(state_dir.absolute() / "gateway" / "audit.sqlite3")
        self.egress = Egress(dict(table.get("egress") or {}), self.audit, self._deployment_egress)
        self.stopping = False
        self._elsewhere: OtherGateways | None = None
        self._bringing: dict[str, anyio.Lock] = {}  # sessions being brought from another host
        self._tg: anyio.abc.TaskGroup | None = None
        self.sessions.on_open = self._start_worker
        self.sessions.on_close = self._closed
        self.messaging.authorize = self._authorize
        self.messaging.revoke = self._revoke
        self.calls = calls = HostCalls(self)
        dispatcher.register_calls("ctx.*", calls.ctx)
        dispatcher.register_calls("msg.*", calls.msg)
        dispatcher.register_calls("net.fetch", calls.fetch)

    @property
    def notices(self) -> SessionNotices | None:
        """What delivers the turns and closing of sessions opened with a notify (the notifier,
        set by the composition root); None: OpenSession refuses a notify."""
        return self.sessions.notices

    @notices.setter
    def notices(self, notices: SessionNotices | None) -> None:
        self.sessions.notices = notices

    @property
    def elsewhere(self) -> OtherGateways | None:
        """The other hosts of the cluster (set by the cluster when it joins); None on one host."""
        return self._elsewhere

    @elsewhere.setter
    def elsewhere(self, other: OtherGateways | None) -> None:
        self._elsewhere = self.sessions.agents.elsewhere = other

    async def durable(self) -> None:
        """Wait until what the gateway changed is written (the store, and the sessions' own
        store in a cluster)."""
        await self.store.durable()
        if self.records is not self.store:
            await self.records.durable()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Restore what the last host stored, then own the session workers, the reaper and
        message delivery until cancelled."""
        self.audit.open()
        saved = await anyio.to_thread.run_sync(self.store.open)
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                self.messaging.restore(saved)
                self.sessions.restore(saved.sessions)
                await tg.start(self.messaging.run)
                tg.start_soon(self.sessions.reap)
                task_status.started()
                await anyio.sleep_forever()
        finally:
            self._tg = None
            # Blocking, on purpose: the host is stopping and the last writes must land.
            self.store.close()
            self.audit.close()

    def shutdown(self) -> None:
        """The host is stopping: sessions stay open for the next host; their running turns
        stop now (before the agents do, so no turn ends in an agent error), and streams end
        UNAVAILABLE so clients resume them on the restarted host."""
        self.stopping = True
        for session in self.sessions.sessions.values():
            if session.worker is not None:
                session.worker.cancel()
            session.wake()
            session.context.changes.wake()  # WatchContext streams end too
        self.audit.wake()

    def until_stopping(self) -> bool:
        return self.stopping

    def _start_worker(self, session: Session) -> None:
        assert self._tg is not None, "the gateway is not running"
        # Not in the context of the RPC that opened the session: the session outlives it.
        start_detached(self._tg, self.turns.serve, session, name=f"session {session.id}")

    def _closed(self, session: Session) -> None:
        notices = self.sessions.notices
        if notices is None or self._tg is None:
            log.warning("session_closed not delivered: no notifier", session=session.id)
            return
        output = {
            "session": {
                "reason": session.close_reason,
                "turns": session.turns,
                "closed_at": session.closed_at,
            }
        }
        start_detached(
            self._tg, notices.session_notice, session.notify, SESSION_CLOSED, session.id, output
        )

    def _deployment_egress(self, agent: str) -> Any:
        found = self.supervisor.agents.get(agent)
        return None if found is None else found.spec.config.get("egress")

    def _authorize(self, task_id: str, session_id: str) -> None:
        session = self.sessions.sessions.get(session_id)
        if session is not None:
            session.task_roots.add(task_id)

    def _revoke(self, task_id: str, session_id: str) -> None:
        session = self.sessions.sessions.get(session_id)
        if session is not None:
            session.task_roots.discard(task_id)

    # -- sessions ------------------------------------------------------------------------

    @staticmethod
    def saved(session: Session) -> SavedSession:
        """A session as a store keeps it (its row, context and retained events)."""
        context = session.context
        return SavedSession(
            body=session.record(),
            document=context.document,
            version=context.version,
            updated_at=context.updated_at,
            events=[(n, event_record(e)) for n, e in session.events.since(0)],
        )

    async def open_session(self, caller: Identity, **options: Any) -> Session:
        # In a cluster: other hosts' gateway agents too, and the agents pipeline steps may name.
        await self.sessions.agents.refresh(actions=bool(options.get("pipeline")))
        session = self.sessions.open(caller.name, **options)
        await self.durable()
        return session

    async def get_session(self, caller: Identity, session_id: str) -> Session:
        return await self._readable(caller, session_id)

    async def list_sessions(
        self, caller: Identity, state: str, page_size: int, page_token: str
    ) -> Page[Session]:
        """One page of the caller's sessions (in ``state`` when not empty), newest first."""
        mine = self.sessions.list(caller.name, state)
        if self._elsewhere is not None:  # and those other hosts hold, as stored
            for stored in await self._elsewhere.owned_sessions(caller.name):
                if stored.body["id"] not in self.sessions.sessions:
                    found = rebuild(stored, self.settings)
                    if not state or found.state == state:
                        mine.append(found)
        return paginate(
            mine,
            page_size,
            page_token,
            f"sessions/{caller.name}/{state}",
            key=lambda s: (s.created_at, s.id),
            newest_first=True,
        )

    async def close_session(self, caller: Identity, session_id: str, reason: str) -> Session:
        session = self.sessions.close(
            await self._held(caller, session_id), reason or "closed by the client"
        )
        await self.durable()
        return session

    async def start_conversation(
        self, caller: Identity, session_id: str, after: int | None
    ) -> tuple[Session, int]:
        """The open session and the sequence to follow after (OUT_OF_RANGE when expired)."""
        await self._held(caller, session_id)
        session = self.sessions.get_open(caller.name, session_id)
        if after is None:
            return session, session.events.last_sequence
        self.sessions.check_resume(session, after)
        return session, after

    async def _readable(self, caller: Identity, session_id: str) -> Session:
        """The caller's session: held here, or (in a cluster) as stored for another host."""
        session = self.sessions.sessions.get(session_id)
        if session is None and self._elsewhere is not None:
            stored = await self._elsewhere.saved_session(session_id)
            if stored is not None and stored.body["owner"] == caller.name:
                return rebuild(stored, self.settings)
        return self.sessions.get(caller.name, session_id)

    async def _held(self, caller: Identity, session_id: str) -> Session:
        """The caller's session, held here: in a cluster, brought from the host that holds it
        (one bringing at a time per session)."""
        if session_id not in self.sessions.sessions and self._elsewhere is not None:
            lock = self._bringing.setdefault(session_id, anyio.Lock())
            try:
                async with lock:
                    if session_id not in self.sessions.sessions:
                        stored = await self._elsewhere.bring_session(session_id, caller.name)
                        if stored is not None:
                            self.sessions.adopt(stored, "session_moved")
                            log.info("session brought here", session=session_id)
            finally:
                self._bringing.pop(session_id, None)
        return self.sessions.get(caller.name, session_id)

    async def follow_session(
        self, session: Session, after: int, done: Callable[[], bool]
    ) -> AsyncIterator[tuple[int, SessionEvent]]:
        """The session's events after ``after`` as they come, until ``done()``, its close or
        shutdown; each once it is committed (so a resumed stream never contradicts it)."""
        async for sequence, event in self.sessions.follow(
            session, after, lambda: self.stopping or done() or bool(session.moved_to)
        ):
            await self.durable()
            yield sequence, event

    def check_interrupted(self, session: Session, done: bool) -> None:
        """UNAVAILABLE when a stream of ``session`` ended because the host is stopping, or
        because another host of the cluster took the session over."""
        if session.moved_to and not done:
            raise _moved(session)
        if self.stopping and session.is_open and not done:
            raise Unavailable(
                f"the host is stopping; session {session.id} stays open: resume it on the "
                "restarted host with after_sequence set to the last event you received",
                reason=Reason.HOST_STOPPING,
                resource=("session", session.id),
                retry_after=1.0,
            )

    def submit(
        self, session: Session, text: str, data: dict[str, Any], client_message_id: str
    ) -> Turn:
        if session.moved_to:
            raise _moved(session)
        return self.sessions.submit(session, text, data, client_message_id)

    # -- context -------------------------------------------------------------------------

    async def get_context(
        self, caller: Identity, session_id: str, keys: list[str]
    ) -> tuple[Session, dict[str, Any]]:
        session = await self._readable(caller, session_id)
        return session, session.context.snapshot(keys)

    async def update_context(
        self, caller: Identity, session_id: str, kind: str, value: Any, expected_version: int | None
    ) -> Change:
        await self._held(caller, session_id)
        session = self.sessions.get_open(caller.name, session_id)
        change = session.context.update(kind, value, caller.name, expected_version)
        await self.durable()
        return change

    async def watch_context(
        self, caller: Identity, session_id: str, after_version: int | None
    ) -> AsyncIterator[tuple[str, Any]]:
        """("snapshot", (doc, version)), then ("change", Change)..., then ("closed", reason)."""
        session = await self._held(caller, session_id)
        context = session.context
        if after_version is None or after_version < context.first_retained_version():
            after_version = context.version
            yield "snapshot", (context.snapshot(), after_version)
        async for change in context.follow(
            after_version, lambda: self.stopping or bool(session.moved_to)
        ):
            yield "change", change
        if session.moved_to:
            raise _moved(session)
        if not session.is_open:
            yield "closed", session.close_reason
        else:
            self.check_interrupted(session, False)

    # -- messaging -----------------------------------------------------------------------

    async def send_message(
        self,
        caller: Identity,
        agent: str,
        kind: str,
        data: Any,
        *,
        correlation_id: str,
        session_id: str,
        request_id: str,
    ) -> tuple[Message, int]:
        _require(caller, RIGHT_MESSAGE, "send messages")
        if session_id:
            await self._readable(caller, session_id)
        return await self.send_from(
            caller.name,
            agent,
            kind,
            data,
            correlation_id=correlation_id,
            session_id=session_id,
            request_id=request_id,
        )

    async def send_from(
        self,
        sender: str,
        agent: str,
        kind: str,
        data: Any,
        *,
        correlation_id: str = "",
        session_id: str = "",
        request_id: str = "",
    ) -> tuple[Message, int]:
        """Put a message in ``agent``'s mailbox, on this host when it runs the agent, else (in a
        cluster) on a host that does; answers once it is on disk there."""
        if self.elsewhere is not None and agent not in self.supervisor.agents:
            return await self.elsewhere.send_message(
                sender,
                agent,
                kind,
                data,
                correlation_id=correlation_id,
                session_id=session_id,
                request_id=request_id,
            )
        outcome = self.messaging.send(
            sender,
            agent,
            kind,
            data,
            correlation_id=correlation_id,
            session_id=session_id,
            request_id=request_id,
        )
        await self.durable()
        return outcome

    async def publish(
        self,
        caller: Identity,
        topic: str,
        kind: str,
        data: Any,
        *,
        correlation_id: str,
        session_id: str,
    ) -> tuple[Message, int]:
        _require(caller, RIGHT_MESSAGE, "publish")
        if session_id:
            await self._readable(caller, session_id)
        return await self.publish_from(
            caller.name, topic, kind, data, correlation_id=correlation_id, session_id=session_id
        )

    async def publish_from(
        self,
        sender: str,
        topic: str,
        kind: str,
        data: Any,
        *,
        correlation_id: str = "",
        session_id: str = "",
    ) -> tuple[Message, int]:
        """Publish on a topic: here, and in a cluster on every other host first (so a message
        Redis did not take is published nowhere, and a retry does not repeat it here)."""
        if self.elsewhere is None:
            outcome = self.messaging.publish(
                sender, topic, kind, data, correlation_id=correlation_id, session_id=session_id
            )
        else:
            draft = self.messaging.draft(
                sender, topic, kind, data, correlation_id=correlation_id, session_id=session_id
            )
            await self.elsewhere.publish(draft)
            outcome = self.messaging.publish_draft(draft)
        await self.durable()
        return outcome

    def subscribe(
        self, caller: Identity, *, agent: str = "", topic: str = "", after: int | None = None
    ) -> AsyncIterator[Message | SubscriptionLagged]:
        """Follow a topic, or copies of an agent's mailbox (admin only)."""
        if agent:
            _require(caller, RIGHT_ADMIN, "watch an agent's mailbox")
            box = self.messaging.mailbox(agent)
            return self.messaging.follow(box.copies, after, self.until_stopping)
        self.messaging.topic(topic)
        return self.messaging.follow_topic(topic, after, self.until_stopping)

    # -- audit ---------------------------------------------------------------------------

    async def list_audit(
        self, caller: Identity, where: AuditFilter, page_size: int, page_token: str
    ) -> Page[AuditRecord]:
        """One page of the audit log, newest first (a keyset over the SQLite table)."""
        _require(caller, RIGHT_AUDIT, "read the egress audit log")
        return Page(*await self.audit.page(where, page_size, page_token))

    def watch_audit(
        self, caller: Identity, where: AuditFilter, after_id: int | None
    ) -> AsyncIterator[AuditRecord]:
        _require(caller, RIGHT_AUDIT, "read the egress audit log")
        return self.audit.follow(where, after_id, self.until_stopping)


def _moved(session: Session) -> Unavailable:
    return Unavailable(
        f"session {session.id} moved to host {session.moved_to} of the cluster, where it was "
        "used; resume it there or on any host with after_sequence set to the last event you "
        "received",
        reason=Reason.HOST_STOPPING,
        resource=("session", session.id),
        retry_after=0.1,
    )


def _require(caller: Identity, right: str, what: str) -> None:
    if not caller.may(right):
        raise PermissionDenied(
            f"{caller.name} may not {what}: the token lacks the {right} right",
            reason=Reason.MISSING_RIGHT,
            metadata={"right": right},
        )
