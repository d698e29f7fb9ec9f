"""Where the sessions are written: one interface, two stores.

On one host the gateway's SQLite store (store.py, ``GatewayStore``) keeps them beside the
mailboxes and topics; in a cluster (docs/cluster.md, "The gateway across hosts") the composition
root gives the gateway the cluster's Redis store instead (cluster/gateway_sessions.py), so every
host can read them and take them over. Either way the calls are queued, never block the event
loop, and ``durable()`` waits until what was queued before it is written.
"""

from __future__ import annotations

from typing import Any, Protocol


class SessionRecords(Protocol):
    def save_session(
        self,
        session_id: str,
        owner: str,
        body: dict[str, Any],
        event: tuple[int, dict[str, Any]] | None = None,
        context: tuple[int, float, dict[str, Any]] | None = None,
    ) -> None:
        """The session's row, with the event just emitted and the context it changed, written
        together (pass nothing that changes afterwards)."""
        ...

    def drop_session(self, session_id: str) -> None:
        """Forget the session (its retention after closing has passed)."""
        ...

    async def durable(self) -> None:
        """Wait until every write queued before this call is done (UNAVAILABLE if it could
        not be)."""
        ...
