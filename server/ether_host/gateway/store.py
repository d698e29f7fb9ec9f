"""The gateway store: sessions, their context and events, mailboxes and topics in SQLite.

Everything the gateway holds in memory is written here too, so a restarted
host (SIGTERM or ``kill -9``) carries on where the last one stopped.
Writes never block the event loop: each is queued, as one item, to a writer
thread that commits whole items in batches (later rows of the same session,
context or mailbox replace earlier ones in a batch). An item is atomic: a
context change and the event that announces it are committed together.

``durable()`` waits until everything queued so far is committed: the
gateway awaits it before an RPC or host call that changed something
answers, and before a Converse stream shows an event, so what a client or
agent was told survives a ``kill -9`` of the host. (Commits are not synced
to the disk one by one: WAL mode with ``synchronous=NORMAL``, so a power
loss may take the last ones.)

Bounded as in memory: the last ``event_history`` events of each session,
``topic_retention`` messages of each topic and ``remembered_request_ids``
SendMessage request ids (each with its message's id, never its data) are
kept; a mailbox holds only the messages not yet delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from ether_host import sqlite
from ether_host.errors import Unavailable
from ether_host.reasons import Reason

log = structlog.get_logger("ether.gateway")

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS contexts (
    session_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    updated_at REAL NOT NULL,
    document TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS session_events (
    session_id TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (session_id, sequence)
);
CREATE TABLE IF NOT EXISTS mailboxes (
    agent TEXT PRIMARY KEY,
    last_sequence INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS mailbox_messages (
    agent TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    id TEXT NOT NULL UNIQUE,
    body TEXT NOT NULL,
    PRIMARY KEY (agent, sequence)
);
CREATE TABLE IF NOT EXISTS sent_requests (
    sender TEXT NOT NULL,
    request_id TEXT NOT NULL,
    depth INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (sender, request_id)
);
CREATE TABLE IF NOT EXISTS topic_messages (
    topic TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (topic, sequence)
);
CREATE TABLE IF NOT EXISTS topic_agents (
    topic TEXT NOT NULL,
    agent TEXT NOT NULL,
    PRIMARY KEY (topic, agent)
);
"""
# Version 2: a remembered SendMessage request_id keeps what answers a retry, not the whole
# message (whose data may be 256 KiB); the rows of version 1 are carried over.
SENT_REQUESTS = """
CREATE TABLE sent_requests_2 (
    sender TEXT NOT NULL,
    request_id TEXT NOT NULL,
    agent TEXT NOT NULL,
    message_id TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    sent_at REAL NOT NULL,
    depth INTEGER NOT NULL,
    PRIMARY KEY (sender, request_id)
);
INSERT INTO sent_requests_2
    SELECT sender, request_id, json_extract(body, '$.agent'), json_extract(body, '$.id'),
           json_extract(body, '$.sequence'), json_extract(body, '$.sent_at'), depth
    FROM sent_requests ORDER BY rowid;
DROP TABLE sent_requests;
ALTER TABLE sent_requests_2 RENAME TO sent_requests;
"""
# Schema migrations in order (ether_host/sqlite.py): version 1 is the schema above.
MIGRATIONS = (SCHEMA, SENT_REQUESTS)
SCHEMA_VERSION = len(MIGRATIONS)
BATCH = 5000  # queued items committed in one transaction at most

Op = tuple[str, Any]


@dataclass
class SavedSession:
    """One session as stored: its row, its context and its retained events."""

    body: dict[str, Any]
    document: dict[str, Any]
    version: int
    updated_at: float
    events: list[tuple[int, dict[str, Any]]]


@dataclass
class Saved:
    """Everything the last host left, read once at start."""

    sessions: list[SavedSession] = field(default_factory=list)
    mailboxes: dict[str, tuple[int, list[dict[str, Any]]]] = field(default_factory=dict)
    topics: dict[str, list[tuple[int, dict[str, Any]]]] = field(default_factory=dict)
    subscriptions: list[tuple[str, str]] = field(default_factory=list)
    # (sender, request_id, agent, message_id, sequence, sent_at, depth), oldest first
    sent: list[tuple[str, str, str, str, int, float, int]] = field(default_factory=list)


class StoreError(Exception):
    """The store file cannot be used (made by a newer host)."""


class GatewayStore:
    """SQLite persistence of the gateway's state, written by one thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.event_history = 1000
        self.topic_retention = 1000
        self.request_ids = 10000
        self._queue: queue.SimpleQueue[tuple[int, list[Op]] | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        # Tickets number the queued items (taken on the event loop only); the writer
        # advances _committed and resolves the futures of durable() waiters. Futures, not
        # a worker thread per waiter: many RPCs wait at once under load.
        self._tickets = 0
        self._committed = 0
        self._lock = threading.Lock()
        self._waiters: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def retain(self, *, events: int, topic_messages: int, request_ids: int) -> None:
        """The bounds of what is kept (the gateway's settings)."""
        self.event_history = events
        self.topic_retention = topic_messages
        self.request_ids = request_ids

    # -- lifecycle ------------------------------------------------------------------------

    def open(self) -> Saved:
        """Create or check the schema, read what is stored, start the writer (blocking)."""
        try:
            connection = sqlite.connect(self.path, MIGRATIONS)
        except sqlite.SchemaTooNew as error:
            raise StoreError(str(error)) from None
        saved = _load(connection)
        self._writer = threading.Thread(
            target=self._write_loop, args=(connection,), name="gateway-store-writer", daemon=True
        )
        self._writer.start()
        return saved

    def close(self) -> None:
        """Commit what is queued, then stop the writer (blocking)."""
        if self._writer is not None:
            self._queue.put(None)
            self._writer.join()
            self._writer = None
        self._resolve(self._tickets, None)

    # -- writes (queued; each call is one atomic item) ------------------------------------

    def _put(self, *ops: Op) -> None:
        self._tickets += 1
        self._queue.put((self._tickets, list(ops)))

    def save_session(
        self,
        session_id: str,
        owner: str,
        body: dict[str, Any],
        event: tuple[int, dict[str, Any]] | None = None,
        context: tuple[int, float, dict[str, Any]] | None = None,
    ) -> None:
        """The session's row, with the event just emitted and the context it changed.

        The values are read in the writer thread: pass nothing that changes afterwards."""
        ops: list[Op] = [("session", (session_id, owner, body))]
        if event is not None:
            ops.append(("event", (session_id, *event)))
        if context is not None:
            ops.append(("context", (session_id, *context)))
        self._put(*ops)

    def drop_session(self, session_id: str) -> None:
        self._put(("drop", session_id))

    def put_message(
        self,
        agent: str,
        message: dict[str, Any],
        request: tuple[str, str, int] | None = None,
    ) -> None:
        """A message accepted into ``agent``'s mailbox (and the sender, request id and
        mailbox depth of the request that sent it)."""
        ops: list[Op] = [
            ("mailbox", (agent, message["sequence"])),
            ("message", (agent, message["sequence"], message["id"], message)),
        ]
        if request is not None:
            sender, request_id, depth = request
            ops.append(
                (
                    "sent",
                    (
                        sender,
                        request_id,
                        agent,
                        message["id"],
                        message["sequence"],
                        message["sent_at"],
                        depth,
                    ),
                )
            )
        self._put(*ops)

    def take_messages(self, message_ids: list[str]) -> None:
        """Messages delivered or received: they leave their mailbox."""
        if message_ids:
            self._put(("taken", list(message_ids)))

    def put_topic_message(self, topic: str, message: dict[str, Any]) -> None:
        self._put(("topic", (topic, message["sequence"], message)))

    def subscription(self, topic: str, agent: str, on: bool) -> None:
        self._put(("subscription", (topic, agent, on)))

    async def durable(self) -> None:
        """Wait until every write queued before this call is committed (UNAVAILABLE if it
        could not be)."""
        ticket = self._tickets
        if self._committed >= ticket:
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._committed >= ticket:
                return
            self._waiters.append((ticket, loop, future))
        await future

    def _resolve(self, upto: int, error: BaseException | None) -> None:
        with self._lock:
            self._committed = max(self._committed, upto)
            ready = [w for w in self._waiters if w[0] <= upto]
            self._waiters = [w for w in self._waiters if w[0] > upto]
        for _, loop, future in ready:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(_settle, future, error)

    # -- the writer thread ----------------------------------------------------------------

    def _write_loop(self, connection: sqlite3.Connection) -> None:
        stopping = False
        while not stopping:
            batch = [self._queue.get()]
            while len(batch) < BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            items = [item for item in batch if item is not None]
            stopping = len(items) < len(batch)
            error: BaseException | None = None
            try:
                _commit(connection, [op for _, ops in items for op in ops], self)
            except Exception as failure:
                error = Unavailable(
                    f"the gateway could not write its state ({failure}); retry shortly",
                    reason=Reason.STATE_NOT_WRITTEN,
                    retry_after=1.0,
                )
                log.error("gateway store write failed", error=str(failure), path=str(self.path))
            if items:
                self._resolve(items[-1][0], error)
        connection.close()


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():  # its waiter was cancelled
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


def _commit(connection: sqlite3.Connection, ops: list[Op], store: GatewayStore) -> None:
    sessions: dict[str, tuple[str, str]] = {}
    contexts: dict[str, tuple[int, float, str]] = {}
    events: list[tuple[str, int, str]] = []
    last_event: dict[str, int] = {}
    dropped: list[str] = []
    mailboxes: dict[str, int] = {}
    messages: list[tuple[str, int, str, str]] = []
    taken: list[str] = []
    sent: list[tuple[str, str, str, str, int, float, int]] = []
    topic_rows: list[tuple[str, int, str]] = []
    last_topic: dict[str, int] = {}
    subscriptions: dict[tuple[str, str], bool] = {}
    for kind, payload in ops:
        if kind == "session":
            session_id, owner, body = payload
            sessions[session_id] = (owner, json.dumps(body))
        elif kind == "event":
            session_id, sequence, body = payload
            events.append((session_id, sequence, json.dumps(body)))
            last_event[session_id] = max(last_event.get(session_id, 0), sequence)
        elif kind == "context":
            session_id, version, updated_at, document = payload
            contexts[session_id] = (version, updated_at, document)
        elif kind == "drop":
            dropped.append(payload)
        elif kind == "mailbox":
            mailboxes[payload[0]] = max(mailboxes.get(payload[0], 0), payload[1])
        elif kind == "message":
            agent, sequence, message_id, body = payload
            messages.append((agent, sequence, message_id, json.dumps(body)))
        elif kind == "taken":
            taken.extend(payload)
        elif kind == "sent":
            sent.append(payload)
        elif kind == "topic":
            topic, sequence, body = payload
            topic_rows.append((topic, sequence, json.dumps(body)))
            last_topic[topic] = max(last_topic.get(topic, 0), sequence)
        elif kind == "subscription":
            topic, agent, on = payload
            subscriptions[(topic, agent)] = on
    if not ops:
        return
    connection.execute("BEGIN")
    try:
        connection.executemany(
            "INSERT OR REPLACE INTO sessions VALUES (?, ?, ?)",
            [(i, owner, body) for i, (owner, body) in sessions.items()],
        )
        connection.executemany(
            "INSERT OR REPLACE INTO contexts VALUES (?, ?, ?, ?)",
            [(i, v, t, json.dumps(doc)) for i, (v, t, doc) in contexts.items()],
        )
        connection.executemany("INSERT OR REPLACE INTO session_events VALUES (?, ?, ?)", events)
        connection.executemany(
            "DELETE FROM session_events WHERE session_id = ? AND sequence <= ?",
            [(i, last - store.event_history) for i, last in last_event.items()],
        )
        # A dropped session is closed and past its retention: nothing queued later writes it.
        for table, column in (
            ("sessions", "id"),
            ("contexts", "session_id"),
            ("session_events", "session_id"),
        ):
            connection.executemany(
                f"DELETE FROM {table} WHERE {column} = ?", [(i,) for i in dropped]
            )
        connection.executemany(
            "INSERT INTO mailboxes VALUES (?, ?) ON CONFLICT (agent) DO UPDATE SET "
            "last_sequence = MAX(last_sequence, excluded.last_sequence)",
            list(mailboxes.items()),
        )
        connection.executemany(
            "INSERT OR REPLACE INTO mailbox_messages VALUES (?, ?, ?, ?)", messages
        )
        # After the inserts: a message sent and taken within one batch leaves no row.
        connection.executemany("DELETE FROM mailbox_messages WHERE id = ?", [(i,) for i in taken])
        connection.executemany(
            "INSERT OR REPLACE INTO sent_requests VALUES (?, ?, ?, ?, ?, ?, ?)", sent
        )
        if sent:
            connection.execute(
                "DELETE FROM sent_requests WHERE rowid <= "
                "(SELECT MAX(rowid) FROM sent_requests) - ?",
                (store.request_ids,),
            )
        connection.executemany("INSERT OR REPLACE INTO topic_messages VALUES (?, ?, ?)", topic_rows)
        connection.executemany(
            "DELETE FROM topic_messages WHERE topic = ? AND sequence <= ?",
            [(t, last - store.topic_retention) for t, last in last_topic.items()],
        )
        connection.executemany(
            "INSERT OR IGNORE INTO topic_agents VALUES (?, ?)",
            [key for key, on in subscriptions.items() if on],
        )
        connection.executemany(
            "DELETE FROM topic_agents WHERE topic = ? AND agent = ?",
            [key for key, on in subscriptions.items() if not on],
        )
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def _load(connection: sqlite3.Connection) -> Saved:
    saved = Saved()
    contexts = {
        row[0]: (json.loads(row[3]), int(row[1]), float(row[2]))
        for row in connection.execute(
            "SELECT session_id, version, updated_at, document FROM contexts"
        )
    }
    events: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for session_id, sequence, body in connection.execute(
        "SELECT session_id, sequence, body FROM session_events ORDER BY session_id, sequence"
    ):
        events.setdefault(session_id, []).append((int(sequence), json.loads(body)))
    for session_id, body in connection.execute("SELECT id, body FROM sessions ORDER BY rowid"):
        document, version, updated_at = contexts.get(session_id, ({}, 1, 0.0))
        saved.sessions.append(
            SavedSession(
                json.loads(body), document, version, updated_at, events.get(session_id, [])
            )
        )
    for agent, last in connection.execute("SELECT agent, last_sequence FROM mailboxes"):
        saved.mailboxes[agent] = (int(last), [])
    for agent, body in connection.execute(
        "SELECT agent, body FROM mailbox_messages ORDER BY agent, sequence"
    ):
        last, waiting = saved.mailboxes.setdefault(agent, (0, []))
        waiting.append(json.loads(body))
    for topic, sequence, body in connection.execute(
        "SELECT topic, sequence, body FROM topic_messages ORDER BY topic, sequence"
    ):
        saved.topics.setdefault(topic, []).append((int(sequence), json.loads(body)))
    saved.subscriptions = [
        (row[0], row[1]) for row in connection.execute("SELECT topic, agent FROM topic_agents")
    ]
    saved.sent = [
        (row[0], row[1], row[2], row[3], int(row[4]), float(row[5]), int(row[6]))
        for row in connection.execute(
            "SELECT sender, request_id, agent, message_id, sequence, sent_at, depth "
            "FROM sent_requests ORDER BY rowid"
        )
    ]
    return saved
