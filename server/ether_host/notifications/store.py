"""Deliveries and their attempts in SQLite (``<state>/notifications.sqlite3``): what was sent
where, each attempt's outcome, and what is still pending when the host stops, so the next host
goes on with it (docs/notifications.md, "Across a host restart")."""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import anyio

from ether_host import sqlite
from ether_host.notifications.model import PENDING, Delivery

SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    subject TEXT NOT NULL,
    target TEXT NOT NULL,
    address TEXT NOT NULL,
    body BLOB NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    last_error TEXT NOT NULL,
    last_status INTEGER NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS deliveries_subject ON deliveries (subject);
CREATE INDEX IF NOT EXISTS deliveries_state ON deliveries (state);
CREATE TABLE IF NOT EXISTS attempts (
    delivery TEXT NOT NULL,
    number INTEGER NOT NULL,
    time REAL NOT NULL,
    outcome TEXT NOT NULL,
    status INTEGER NOT NULL,
    error TEXT NOT NULL,
    PRIMARY KEY (delivery, number)
);
-- A run whose output is awaited (its notify, kept from CreateRun until the run ends).
CREATE TABLE IF NOT EXISTS awaited_runs (
    run_id TEXT PRIMARY KEY,
    webhook_url TEXT NOT NULL,
    reply_topic TEXT NOT NULL
);
"""
MIGRATIONS = (
    SCHEMA,
    # An awaited run that ended INTERRUPTED has been delivered so (once); ResumeRun clears it.
    "ALTER TABLE awaited_runs ADD COLUMN told_interrupted INTEGER NOT NULL DEFAULT 0;",
)
_COLUMNS = [f.name for f in fields(Delivery)]


class DeliveryStore:
    """The notification records; every call runs in a worker thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def open(self) -> None:
        self._db = sqlite.connect(self.path, MIGRATIONS)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    async def add(self, delivery: Delivery) -> None:
        delivery.created = delivery.updated = time.time()
        values = asdict(delivery)
        await self._run(
            f"INSERT INTO deliveries ({', '.join(_COLUMNS)}) "
            f"VALUES ({', '.join('?' for _ in _COLUMNS)})",
            [values[c] for c in _COLUMNS],
        )

    async def attempted(self, delivery: Delivery, outcome: str, status: int, error: str) -> None:
        """Record attempt ``delivery.attempts`` and the delivery's state after it."""
        delivery.updated = time.time()
        await self._run(
            "INSERT INTO attempts (delivery, number, time, outcome, status, error) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [delivery.id, delivery.attempts, delivery.updated, outcome, status, error],
        )
        await self._run(
            "UPDATE deliveries SET state = ?, attempts = ?, last_error = ?, last_status = ?, "
            "updated = ? WHERE id = ?",
            [
                delivery.state,
                delivery.attempts,
                delivery.last_error,
                delivery.last_status,
                delivery.updated,
                delivery.id,
            ],
        )

    async def pending(self) -> list[Delivery]:
        rows = await self._rows(
            f"SELECT {', '.join(_COLUMNS)} FROM deliveries WHERE state = ? ORDER BY created",
            [PENDING],
        )
        return [Delivery(**dict(zip(_COLUMNS, row, strict=True))) for row in rows]

    async def await_run(self, run_id: str, webhook_url: str, reply_topic: str) -> bool:
        """Keep ``run_id``'s notify until the run ends; False when it is kept already (a
        CreateRun repeated with its request_id: the first request's notify holds)."""
        cursor = await self._run(
            "INSERT OR IGNORE INTO awaited_runs (run_id, webhook_url, reply_topic) "
            "VALUES (?, ?, ?)",
            [run_id, webhook_url, reply_topic],
        )
        return cursor == 1

    async def run_ended(self, run_id: str) -> None:
        await self._run("DELETE FROM awaited_runs WHERE run_id = ?", [run_id])

    async def awaited_runs(self) -> list[tuple[str, str, str, bool]]:
        """Each awaited run: its id, webhook, topic and whether it was told INTERRUPTED."""
        rows = await self._rows(
            "SELECT run_id, webhook_url, reply_topic, told_interrupted FROM awaited_runs", []
        )
        return [(str(a), str(b), str(c), bool(d)) for a, b, c, d in rows]

    async def run_interrupted(self, run_id: str, told: bool) -> None:
        await self._run(
            "UPDATE awaited_runs SET told_interrupted = ? WHERE run_id = ?", [int(told), run_id]
        )

    async def awaited_run(self, run_id: str) -> tuple[str, str] | None:
        """The webhook and topic a run is awaited with, if it is."""
        rows = await self._rows(
            "SELECT webhook_url, reply_topic FROM awaited_runs WHERE run_id = ?", [run_id]
        )
        return (str(rows[0][0]), str(rows[0][1])) if rows else None

    async def _run(self, sql: str, args: list[object]) -> int:
        def write() -> int:
            with self._lock:
                if self._db is None:
                    raise sqlite3.OperationalError("the notification store is closed")
                return self._db.execute(sql, args).rowcount

        return await anyio.to_thread.run_sync(write)

    async def _rows(self, sql: str, args: list[object]) -> list[tuple[Any, ...]]:
        def read() -> list[tuple[Any, ...]]:
            with self._lock:
                if self._db is None:
                    return []
                return list(self._db.execute(sql, args).fetchall())

        return await anyio.to_thread.run_sync(read)
