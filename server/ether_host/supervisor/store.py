"""The agent store: the agents deployed by request, as desired state, in SQLite.

A supervisor's deployments are what an operator asked for, as systemd units or Kubernetes
deployments are: every ``DeployAgent``, ``ScaleAgent``, ``StopAgent``, ``StartAgent``,
``RestartAgent`` and ``RemoveAgent`` that succeeds leaves one row per agent here (its
resolved spec and whether it should run), committed before the call answers, and a host
started on the same state directory deploys exactly those again. Agents from the host
config and ``agents_dir`` are the operator's file and are not recorded (docs/agents.md).

Changes are an operator's calls, not tasks, and each is synced to the disk
(``synchronous=FULL``): a deployment survives a ``kill -9`` of the host and a power loss. The
supervisor writes them in a worker thread (``anyio.to_thread``), one transaction at a time,
and the changes of calls that arrived while one was being written go together in the next
(one sync for all: deployments.py says why).
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from ether_host import sqlite
from ether_host.supervisor.manifest import AgentSpec

log = structlog.get_logger("ether.supervisor")

SCHEMA = """
CREATE TABLE IF NOT EXISTS agents (
    name TEXT PRIMARY KEY,
    running INTEGER NOT NULL,
    spec TEXT NOT NULL,
    updated_at REAL NOT NULL
);
"""
# Schema versions in order (ether_host/sqlite.py): MIGRATIONS[n - 1] takes a file to version n.
MIGRATIONS = (SCHEMA,)
_FIELDS = {f.name for f in dataclasses.fields(AgentSpec)}


@dataclass
class SavedAgent:
    """One recorded deployment: the spec it runs with and whether it should run."""

    spec: AgentSpec
    running: bool


class StoreError(Exception):
    """The store file cannot be used (made by a newer host)."""


def spec_json(spec: AgentSpec) -> str:
    """The resolved spec as stored (every default filled in)."""
    body = dataclasses.asdict(spec)
    body["path"] = str(spec.path)
    # A TOML date in agent.toml's config has no JSON form: stored as its text.
    return json.dumps(body, sort_keys=True, default=str)


def spec_from_json(text: str) -> AgentSpec:
    """A stored spec; a field this host no longer knows is left out, a new one defaulted."""
    body: dict[str, Any] = {k: v for k, v in json.loads(text).items() if k in _FIELDS}
    body["path"] = Path(body["path"])
    return AgentSpec(**body)


class StoreClosed(Exception):
    """The store is not open: the supervisor has not started, or has stopped."""


class AgentStore:
    """SQLite persistence of the deployed agents (blocking: call from worker threads, one
    at a time)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._connection: sqlite3.Connection | None = None

    def open(self) -> list[SavedAgent]:
        """Create or check the schema and read the recorded agents."""
        try:
            # FULL: a deployment is rare and must survive a power loss, not only a kill -9.
            connection = sqlite.connect(self.path, MIGRATIONS, synchronous="FULL")
        except sqlite.SchemaTooNew as error:
            raise StoreError(str(error)) from None
        self._connection = connection
        saved = []
        for name, running, text in connection.execute(
            "SELECT name, running, spec FROM agents ORDER BY name"
        ):
            try:
                saved.append(SavedAgent(spec_from_json(text), bool(running)))
            except (ValueError, TypeError, KeyError) as error:
                log.error("recorded agent unreadable; not deployed", agent=name, error=str(error))
        return saved

    def put(self, rows: dict[str, tuple[str, bool] | None]) -> None:
        """Record each name as (spec JSON, running), or forget it (``None``), in one
        transaction: committed (and synced) once for all of them. Raises StoreClosed before
        open() and after close()."""
        if self._connection is None:
            raise StoreClosed(f"the agent store {self.path} is closed")
        now = time.time()
        with self._connection:
            for name, row in rows.items():
                if row is None:
                    self._connection.execute("DELETE FROM agents WHERE name = ?", (name,))
                else:
                    self._connection.execute(
                        "INSERT OR REPLACE INTO agents (name, running, spec, updated_at) "
                        "VALUES (?, ?, ?, ?)",
                        (name, int(row[1]), row[0], now),
                    )

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
