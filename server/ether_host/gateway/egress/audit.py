"""The egress audit log: one SQLite row per request and decision, under the state directory.

Writes go through a worker thread with one connection. A record that cannot
be written fails the fetch it describes, and before a request leaves the log
is asked whether it can be written now (check_writable): fail closed, so a
log that cannot be written sends nothing, and an answer whose record could
not be written never reaches the agent. Readers list newest first with keyset pages, or
follow new records as they are written.
"""

from __future__ import annotations

import base64
import binascii
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import anyio

from ether_host import sqlite
from ether_host.errors import FieldViolation, InvalidArgument
from ether_host.paging import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from ether_host.reasons import Reason

ALLOWED, DENIED = "ALLOWED", "DENIED"

SCHEMA = """
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    agent TEXT NOT NULL,
    task_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    method TEXT NOT NULL,
    url TEXT NOT NULL,
    host TEXT NOT NULL,
    port INTEGER NOT NULL,
    resolved_address TEXT NOT NULL,
    decision TEXT NOT NULL,
    reason TEXT NOT NULL,
    rule TEXT NOT NULL,
    status_code INTEGER NOT NULL,
    request_bytes INTEGER NOT NULL,
    response_bytes INTEGER NOT NULL,
    duration REAL NOT NULL,
    redirect_depth INTEGER NOT NULL,
    error TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_agent ON audit (agent, id);
CREATE INDEX IF NOT EXISTS audit_host ON audit (host, id);
CREATE INDEX IF NOT EXISTS audit_time ON audit (time);
"""
# Schema migrations in order (ether_host/sqlite.py); the first is the schema as it was before
# the log was versioned.
MIGRATIONS = (SCHEMA,)


@dataclass(frozen=True)
class AuditRecord:
    """One egress request and the decision on it."""

    agent: str
    method: str
    url: str
    host: str
    port: int
    decision: str
    reason: str
    rule: str = ""
    task_id: str = ""
    session_id: str = ""
    resolved_address: str = ""
    status_code: int = 0
    request_bytes: int = 0
    response_bytes: int = 0
    duration: float = 0.0  # seconds
    redirect_depth: int = 0
    error: str = ""
    time: float = 0.0
    id: int = 0


@dataclass(frozen=True)
class AuditFilter:
    """Which records a reader wants; empty fields match anything."""

    agent: str = ""
    decision: str = ""
    host: str = ""
    start_time: float | None = None
    end_time: float | None = None

    def matches(self, record: AuditRecord) -> bool:
        return (
            (not self.agent or record.agent == self.agent)
            and (not self.decision or record.decision == self.decision)
            and (not self.host or record.host == self.host)
            and (self.start_time is None or record.time >= self.start_time)
            and (self.end_time is None or record.time < self.end_time)
        )

    def where(self) -> tuple[str, list[Any]]:
        clauses, args = [], []
        for column in ("agent", "decision", "host"):
            if getattr(self, column):
                clauses.append(f"{column} = ?")
                args.append(getattr(self, column))
        if self.start_time is not None:
            clauses.append("time >= ?")
            args.append(self.start_time)
        if self.end_time is not None:
            clauses.append("time < ?")
            args.append(self.end_time)
        return " AND ".join(clauses) or "1", args

    def scope(self) -> str:
        return f"audit/{self.agent}/{self.decision}/{self.host}/{self.start_time}/{self.end_time}"


_COLUMNS = [f.name for f in fields(AuditRecord) if f.name != "id"]


class AuditLog:
    """SQLite-backed audit records with followers."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._grown = anyio.Event()
        # (agent, decision) -> records written since the host started: the metrics scrape's
        # egress decisions, kept here because every decision passes through write().
        self.decisions: Counter[tuple[str, str]] = Counter()

    def open(self) -> None:
        self._db = sqlite.connect(self.path, MIGRATIONS)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    async def write(self, record: AuditRecord) -> AuditRecord:
        """Store ``record`` and return it with its id and time; raises OSError/sqlite3.Error on failure."""
        stored = replace(record, time=record.time or time.time())
        row_id = await anyio.to_thread.run_sync(self._insert, stored)
        self.decisions[(record.agent, record.decision)] += 1
        self._grown.set()
        self._grown = anyio.Event()
        return replace(stored, id=row_id)

    async def check_writable(self) -> None:
        """Raise (sqlite3.Error, OSError) unless a write could be made now: the log's write lock
        taken and let go. A fetch asks before its request leaves, so a log that cannot be
        written (locked past its busy timeout, closed, read-only) refuses it with nothing sent."""
        await anyio.to_thread.run_sync(self._probe)

    def _probe(self) -> None:
        with self._lock:
            if self._db is None:
                raise sqlite3.OperationalError("the audit log is closed")
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def _insert(self, record: AuditRecord) -> int:
        values = asdict(record)
        with self._lock:
            if self._db is None:
                raise sqlite3.OperationalError("the audit log is closed")
            cursor = self._db.execute(
                f"INSERT INTO audit ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' for _ in _COLUMNS)})",
                [values[c] for c in _COLUMNS],
            )
            return int(cursor.lastrowid or 0)

    def _max_id(self) -> int:
        with self._lock:
            if self._db is None:
                return 0
            return int(self._db.execute("SELECT coalesce(max(id), 0) FROM audit").fetchone()[0])

    def _select(self, sql: str, args: list[Any]) -> list[AuditRecord]:
        with self._lock:
            if self._db is None:
                return []
            rows = self._db.execute(sql, args).fetchall()
        return [AuditRecord(**dict(zip(["id", *_COLUMNS], row, strict=True))) for row in rows]

    async def page(
        self, where: AuditFilter, page_size: int, page_token: str
    ) -> tuple[list[AuditRecord], str]:
        """Newest first; the token carries the last id seen and the filters it belongs to."""
        if page_size < 0:
            raise InvalidArgument(
                f"page_size {page_size} is negative; use 0 for the default of {DEFAULT_PAGE_SIZE}",
                reason=Reason.INVALID_PAGE_SIZE,
                violations=[FieldViolation("page_size", "0 to 1000")],
            )
        if (
            where.start_time is not None
            and where.end_time is not None
            and where.start_time > where.end_time
        ):
            raise InvalidArgument(
                "start_time is after end_time",
                reason=Reason.INVALID_TIME_RANGE,
                violations=[FieldViolation("start_time", "at or before end_time")],
            )
        size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        before = _cursor(page_token, where.scope()) if page_token else None
        clause, args = where.where()
        if before is not None:
            clause += " AND id < ?"
            args.append(before)
        sql = f"SELECT id, {', '.join(_COLUMNS)} FROM audit WHERE {clause} ORDER BY id DESC LIMIT ?"
        rows = await anyio.to_thread.run_sync(self._select, sql, [*args, size + 1])
        if len(rows) > size:
            rows = rows[:size]
            return rows, _token(rows[-1].id, where.scope())
        return rows, ""

    async def follow(
        self, where: AuditFilter, after_id: int | None, until: Callable[[], bool]
    ) -> AsyncIterator[AuditRecord]:
        """Stored records after ``after_id`` (None: only new ones), then new ones as written."""
        if after_id is None:
            after_id = await anyio.to_thread.run_sync(self._max_id)
        clause, args = where.where()
        while not until():
            grown = self._grown
            sql = f"SELECT id, {', '.join(_COLUMNS)} FROM audit WHERE {clause} AND id > ? ORDER BY id LIMIT 500"
            for record in await anyio.to_thread.run_sync(self._select, sql, [*args, after_id]):
                after_id = record.id
                yield record
            if until():
                return
            await grown.wait()

    def wake(self) -> None:
        self._grown.set()
        self._grown = anyio.Event()


def _token(last_id: int, scope: str) -> str:
    return base64.urlsafe_b64encode(f"{scope}:{last_id}".encode()).decode()


def _cursor(token: str, scope: str) -> int:
    try:
        found, _, text = base64.urlsafe_b64decode(token.encode()).decode().rpartition(":")
        value = int(text)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        found, value = "", -1
    if found != scope or value < 0:
        raise InvalidArgument(
            "page_token was not issued by this list call with these filters; "
            "pass the next_page_token of the previous page",
            reason=Reason.INVALID_PAGE_TOKEN,
            violations=[FieldViolation("page_token", "not a token of this list")],
        )
    return value
