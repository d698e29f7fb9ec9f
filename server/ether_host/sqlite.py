"""Opening the host's SQLite files: WAL, and a schema brought up to date by numbered migrations.

A store lists its migrations in order; ``MIGRATIONS[n - 1]`` takes a file from schema version
``n - 1`` to ``n``, and ``PRAGMA user_version`` says which version a file is at (0 for a new
file, or one written before its store was versioned; the first migration of such a store is
its schema as it was then, with ``IF NOT EXISTS``, so that file is adopted as it is). The
migrations a file lacks run in one transaction with the version bump, so a crash leaves the
file as it was. A file from a newer host is refused, never read: its rows may mean something
this host does not know.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path


class SchemaTooNew(RuntimeError):
    """The file was written by a newer host (its schema version is past the last migration)."""


def connect(
    path: Path, migrations: Sequence[str], synchronous: str = "NORMAL"
) -> sqlite3.Connection:
    """Open (or create) ``path`` in WAL mode, autocommit, and migrate it to the last version.

    Raises SchemaTooNew for a file of a newer schema, sqlite3.Error if a migration fails (the
    file is left at the version it had).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(f"PRAGMA synchronous={synchronous}")
        connection.execute("PRAGMA busy_timeout=5000")
        migrate(connection, migrations, path)
    except BaseException:
        connection.close()
        raise
    return connection


def version(connection: sqlite3.Connection) -> int:
    return int(connection.execute("PRAGMA user_version").fetchone()[0])


def migrate(connection: sqlite3.Connection, migrations: Sequence[str], path: Path) -> int:
    """Apply the migrations ``connection``'s file lacks, in order, in one transaction; the
    version it is at afterwards."""
    latest = len(migrations)
    found = version(connection)
    if found > latest:
        raise SchemaTooNew(
            f"{path} has schema version {found}; this host knows up to {latest}: "
            "run a newer host, or move the file away to start empty"
        )
    if found == latest:
        return found
    # executescript commits any open transaction first, so the transaction is in the script.
    script = "\n".join(
        [
            "BEGIN IMMEDIATE;",
            *(f"{migrations[number].strip().rstrip(';')};" for number in range(found, latest)),
            f"PRAGMA user_version = {latest};",
            "COMMIT;",
        ]
    )
    try:
        connection.executescript(script)
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    return latest


__all__ = ["SchemaTooNew", "connect", "migrate", "version"]
