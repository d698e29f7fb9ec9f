"""The host's SQLite files carry a schema version (``PRAGMA user_version``) and are migrated
when a host starts on them (ether_host/sqlite.py).

Each test writes a file by hand the way an older host left it, starts a real host on that state
directory, and checks the rows are still there (through the API where one shows them) and the
version moved up; a file from a newer host stops the host with a message naming it.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from ether.v1 import gateway_pb2, terminal_pb2
from ether_host.gateway import store as gateway_store
from ether_host.gateway.egress import audit as audit_module
from ether_host.supervisor import store as agent_store
from ether_host.supervisor.manifest import AgentSpec
from ether_host.terminals import records as terminal_records
from ether_host.workflows import store as run_store
from tests.support.agents import AGENTS, watch_until
from tests.support.host import HostProcess

# The schemas as the hosts before versioning wrote them (user_version 0), by hand: a change to
# the stores' current schema must not change what these tests start from.
OLD_AUDIT = """
CREATE TABLE audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, agent TEXT NOT NULL,
    task_id TEXT NOT NULL, session_id TEXT NOT NULL, method TEXT NOT NULL, url TEXT NOT NULL,
    host TEXT NOT NULL, port INTEGER NOT NULL, resolved_address TEXT NOT NULL,
    decision TEXT NOT NULL, reason TEXT NOT NULL, rule TEXT NOT NULL,
    status_code INTEGER NOT NULL, request_bytes INTEGER NOT NULL,
    response_bytes INTEGER NOT NULL, duration REAL NOT NULL, redirect_depth INTEGER NOT NULL,
    error TEXT NOT NULL
);
"""
OLD_RUNS = """
CREATE TABLE runs (id TEXT PRIMARY KEY, created_at REAL NOT NULL, name TEXT NOT NULL,
    state TEXT NOT NULL, request_id TEXT NOT NULL, body TEXT NOT NULL);
CREATE TABLE tasks (run_id TEXT NOT NULL, seq INTEGER NOT NULL, task_id TEXT NOT NULL,
    stage TEXT NOT NULL, state TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_id, seq));
CREATE TABLE events (run_id TEXT NOT NULL, sequence INTEGER NOT NULL, time REAL NOT NULL,
    kind TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_id, sequence));
"""
OLD_TERMINALS = """
CREATE TABLE terminals (id TEXT PRIMARY KEY, owner TEXT NOT NULL, created_at REAL NOT NULL,
    state TEXT NOT NULL, close_reason TEXT NOT NULL, info TEXT NOT NULL, screen TEXT);
"""


def make(path: Path, schema: str, rows: list[str], user_version: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.executescript(schema)
    for row in rows:
        db.execute(row)
    db.execute(f"PRAGMA user_version = {user_version}")
    db.commit()
    db.close()


def read(path: Path, sql: str) -> tuple[int, list[tuple[object, ...]]]:
    """The file's schema version and the rows ``sql`` selects."""
    db = sqlite3.connect(path)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0]), db.execute(sql).fetchall()
    finally:
        db.close()


def test_unversioned_files_are_adopted(tmp_path: Path) -> None:
    """Files from before the stores were versioned (user_version 0) are migrated in place: the
    audit records show through ListAudit, the runs and terminal records are still there, and
    every file is at its store's latest version once the host runs."""
    state = tmp_path / "state"
    audit_path = state / "gateway" / "audit.sqlite3"
    runs_path = state / "workflows" / "runs.sqlite3"
    terminals_path = state / "terminals" / "terminals.sqlite3"
    now = time.time()
    make(
        audit_path,
        OLD_AUDIT,
        [
            f"INSERT INTO audit VALUES (7, {now}, 'old-agent', 't1', '', 'GET', "
            "'http://example.test/', 'example.test', 80, '', 'DENIED', 'host_not_allowed', "
            "'allow_hosts', 0, 0, 0, 0.0, 0, '')"
        ],
    )
    make(
        runs_path,
        OLD_RUNS,
        [
            "INSERT INTO events VALUES ('gone-run', 1, 0, 'x', '{}')",
        ],
    )
    info = json.dumps(
        {
            "id": "t-old",
            "name": "old-shell",
            "owner": "",
            "argv": ["sh"],
            "cwd": "/",
            "rows": 24,
            "cols": 80,
            "term": "xterm-256color",
            "scrollback_lines": 1000,
            "state": "EXITED",
            "pid": 0,
            "created_at": now,
            "last_activity_at": now,
            "exit": None,
            "output_offset": 5,
            "retained_offset": 0,
            "attached_clients": 0,
            "idle_timeout": 0.0,
            "max_lifetime": 0.0,
        }
    )
    make(
        terminals_path,
        OLD_TERMINALS,
        [f"INSERT INTO terminals VALUES ('t-old', '', {now}, 'closed', 'closed', '{info}', NULL)"],
    )
    # The deployments file as the agent store first wrote it (before sqlite.py versioned it).
    agents_path = state / "agents.sqlite3"
    spec = agent_store.spec_json(
        AgentSpec(name="old-flow", path=AGENTS / "flow", language="python")
    )
    make(
        agents_path,
        agent_store.SCHEMA,
        [f"INSERT INTO agents VALUES ('old-flow', 1, '{spec}', {now})"],
    )
    host = HostProcess(state)
    try:
        host.wait_serving()
        watch_until(host, "old-flow", {"RUNNING"})
        records = host.gateway.ListAudit(
            gateway_pb2.ListAuditRequest(agent="old-agent"), timeout=10
        ).records
        assert [(r.id, r.host, r.reason) for r in records] == [
            (7, "example.test", "host_not_allowed")
        ]
        terminal = host.terminals.GetTerminal(
            terminal_pb2.GetTerminalRequest(terminal_id="t-old"), timeout=10
        ).terminal
        assert (terminal.name, terminal.output_offset) == ("old-shell", 5)
    finally:
        assert host.stop() == 0
    assert read(audit_path, "SELECT id FROM audit") == (len(audit_module.MIGRATIONS), [(7,)])
    assert read(runs_path, "SELECT run_id FROM events") == (
        len(run_store.MIGRATIONS),
        [("gone-run",)],
    )
    assert read(agents_path, "SELECT name FROM agents") == (
        len(agent_store.MIGRATIONS),
        [("old-flow",)],
    )
    assert read(terminals_path, "SELECT id FROM terminals") == (
        len(terminal_records.MIGRATIONS),
        [("t-old",)],
    )


STORES = {
    "audit": ("gateway/audit.sqlite3", OLD_AUDIT, len(audit_module.MIGRATIONS)),
    "runs": ("workflows/runs.sqlite3", OLD_RUNS, len(run_store.MIGRATIONS)),
    "terminals": ("terminals/terminals.sqlite3", OLD_TERMINALS, len(terminal_records.MIGRATIONS)),
    "gateway": ("gateway/state.sqlite3", gateway_store.SCHEMA, len(gateway_store.MIGRATIONS)),
    "agents": ("agents.sqlite3", agent_store.SCHEMA, len(agent_store.MIGRATIONS)),
}


@pytest.mark.parametrize("store", sorted(STORES))
def test_a_file_from_a_newer_host_is_refused(tmp_path: Path, store: str) -> None:
    """A file whose schema is newer than this host knows stops the host at start, naming the
    file and the versions; the file is left as it was."""
    relative, schema, latest = STORES[store]
    state = tmp_path / "state"
    path = state / relative
    make(path, schema, [], user_version=latest + 1)
    host = HostProcess(state)
    try:
        assert host.process.wait(timeout=60) != 0
        text = "\n".join(host.last_lines(200))
        assert str(path) in text and f"schema version {latest + 1}" in text, text
    finally:
        host.stop()
    assert read(path, "SELECT 1")[0] == latest + 1
