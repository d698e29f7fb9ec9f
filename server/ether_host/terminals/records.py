"""What is left of terminals after a host restart: their records under the state directory.

A terminal cannot outlive its PTY: when the host stops, every program on one ends with it.
So that its id still means something to a client after a restart, the host records each
terminal in SQLite (``<state>/terminals/terminals.sqlite3``): its description when it is
created, its exit status and last screen (text, size, cursor, title) when its program exits,
and the reason when it is closed. Each write is committed before the event it records is
reported (CreateTerminal's answer, the exit seen by WaitFor, Attach and GetTerminal, the
``closed`` event), so what a client was told survives a ``kill -9`` of the host.

The next host reads the records once at start (``open``). A terminal that had ended (exited
or closed) stays readable through GetTerminal and ReadScreen; one still running when the host
died has no final screen and is marked lost. Only the newest ``KEEP`` records are kept.

Every method here blocks (SQLite): the manager calls them in worker threads.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ether_host import sqlite
from ether_host.terminals.model import (
    Cursor,
    ExitInfo,
    ScreenView,
    TerminalInfo,
    TerminalState,
)

KEEP = 1000  # terminals remembered across restarts, newest first
PRUNE_EVERY = 100  # records written between two prunes (a long-lived host creates many)

SCHEMA = """
CREATE TABLE IF NOT EXISTS terminals (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    created_at REAL NOT NULL,
    state TEXT NOT NULL,          -- running | exited | closed | lost
    close_reason TEXT NOT NULL,   -- the `closed` event's reason, or "" before a close
    info TEXT NOT NULL,           -- TerminalInfo as JSON, as of the last write
    screen TEXT                   -- ScreenView as JSON once the program exited
);
CREATE INDEX IF NOT EXISTS terminals_by_time ON terminals (created_at DESC);
"""
# Schema migrations in order (ether_host/sqlite.py); the first is the schema as it was before
# the table was versioned.
MIGRATIONS = (SCHEMA,)


@dataclass(frozen=True)
class FormerTerminal:
    """A terminal of an earlier run of the host, as its record left it."""

    info: TerminalInfo  # state CLOSED: nothing of it runs any more
    state: str  # what the record says it was when the host stopped: exited, closed or lost
    close_reason: str

    @property
    def lost(self) -> bool:
        """Still running when the host died: no exit status, no final screen."""
        return self.state == "lost"


class TerminalRecords:
    """The SQLite table of terminals; one connection, used from worker threads under a lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._writes = 0

    def open(self) -> dict[str, FormerTerminal]:
        """Open (or create) the table and return the terminals of earlier runs by id.

        Records still ``running`` belong to a host that died without closing them
        (``kill -9``, a crash, a power cut): they become ``lost``.
        """
        # WAL + NORMAL: a commit survives the host being killed (the WAL is in the OS's
        # cache), which is what the records are for; an fsync per terminal would not pay.
        db = sqlite.connect(self.path, MIGRATIONS, synchronous="NORMAL")
        with self._lock:
            self._db = db
            db.execute("UPDATE terminals SET state = 'lost' WHERE state = 'running'")
            self._prune()
            rows = db.execute(
                "SELECT id, state, close_reason, info FROM terminals ORDER BY created_at"
            ).fetchall()
        return {
            terminal_id: FormerTerminal(_info(json.loads(info)), state, reason)
            for terminal_id, state, reason, info in rows
        }

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # -- writes ---------------------------------------------------------------------------

    def created(self, info: TerminalInfo) -> None:
        # OR IGNORE: a program that exited at once may have been recorded as exited already.
        self._write(
            "INSERT OR IGNORE INTO terminals VALUES (?, ?, ?, 'running', '', ?, NULL)",
            (info.id, info.owner, info.created_at, _dumps(asdict(info))),
        )

    def exited(self, info: TerminalInfo, screen: ScreenView) -> None:
        self._write(
            "INSERT INTO terminals VALUES (?, ?, ?, 'exited', '', ?, ?) ON CONFLICT (id) DO "
            "UPDATE SET state = 'exited', info = excluded.info, screen = excluded.screen",
            (
                info.id,
                info.owner,
                info.created_at,
                _dumps(asdict(info)),
                _dumps(_screen_json(screen)),
            ),
        )

    def closed(self, info: TerminalInfo, reason: str) -> None:
        self._write(
            "INSERT INTO terminals VALUES (?, ?, ?, 'closed', ?, ?, NULL) ON CONFLICT (id) DO "
            "UPDATE SET state = 'closed', close_reason = excluded.close_reason, "
            "info = excluded.info",
            (info.id, info.owner, info.created_at, reason, _dumps(asdict(info))),
        )

    def _write(self, statement: str, values: tuple[Any, ...]) -> None:
        with self._lock:
            if self._db is None:
                return
            self._db.execute(statement, values)
            self._writes += 1
            if self._writes % PRUNE_EVERY == 0:
                self._prune()

    def _prune(self) -> None:
        assert self._db is not None
        self._db.execute(
            "DELETE FROM terminals WHERE state != 'running' AND id NOT IN "
            "(SELECT id FROM terminals ORDER BY created_at DESC LIMIT ?)",
            (KEEP,),
        )

    # -- reads ----------------------------------------------------------------------------

    def screen(self, terminal_id: str) -> ScreenView | None:
        """The last screen recorded for a terminal (None: it never exited while recorded)."""
        with self._lock:
            if self._db is None:
                return None
            row = self._db.execute(
                "SELECT screen FROM terminals WHERE id = ?", (terminal_id,)
            ).fetchone()
        if row is None or row[0] is None:
            return None
        return _screen(json.loads(row[0]))


def _dumps(value: Any) -> str:
    return json.dumps(value, default=lambda v: v.value if isinstance(v, TerminalState) else v)


def _exit(data: dict[str, Any] | None) -> ExitInfo | None:
    return None if data is None else ExitInfo(data["code"], data["signal"], data["time"])


def _info(data: dict[str, Any]) -> TerminalInfo:
    """A recorded TerminalInfo, as a terminal that no longer runs: CLOSED, no pid, no clients."""
    data = data | {
        "argv": tuple(data["argv"]),
        "state": TerminalState.CLOSED,
        "exit": _exit(data["exit"]),
        "pid": 0,
        "attached_clients": 0,
    }
    return TerminalInfo(**data)


def _screen_json(view: ScreenView) -> dict[str, Any]:
    return {
        "rows": view.rows,
        "cols": view.cols,
        "lines": view.lines,
        "cursor": asdict(view.cursor),
        "title": view.title,
        "alternate": view.alternate,
        "output_offset": view.output_offset,
        "exit": None if view.exit is None else asdict(view.exit),
    }


def _screen(data: dict[str, Any]) -> ScreenView:
    return ScreenView(
        rows=data["rows"],
        cols=data["cols"],
        lines=data["lines"],
        cursor=Cursor(**data["cursor"]),
        title=data["title"],
        alternate=data["alternate"],
        output_offset=data["output_offset"],
        exit=_exit(data["exit"]),
    )
