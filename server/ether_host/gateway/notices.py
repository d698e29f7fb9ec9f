"""Where a session's turns and its closing are delivered besides its Converse streams.

A session opened with a notify (a webhook URL, a reply topic) keeps it in its record, so it
holds across a host restart and on the host of a cluster that takes the session over. The
delivering is the notifier's (notifications/, docs/notifications.md); the gateway knows it only
through ``SessionNotices``, which the composition root hands it, because the notifier itself
is built on the gateway (its egress and topics).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

TURN, SESSION_CLOSED = "turn", "session_closed"  # the kinds of a session's deliveries


@dataclass(frozen=True, slots=True)
class SessionNotify:
    """Where a session's deliveries go; both empty: nowhere."""

    webhook_url: str = ""
    reply_topic: str = ""

    def __bool__(self) -> bool:
        return bool(self.webhook_url or self.reply_topic)

    def record(self) -> dict[str, str]:
        return {"webhook_url": self.webhook_url, "reply_topic": self.reply_topic}

    @classmethod
    def from_record(cls, record: Any) -> SessionNotify:
        """A stored notify (a session written before notifies existed has none)."""
        if not isinstance(record, dict):
            return cls()
        return cls(str(record.get("webhook_url") or ""), str(record.get("reply_topic") or ""))


class SessionNotices(Protocol):
    def check_session_notify(self, notify: SessionNotify) -> None:
        """InvalidArgument when ``notify`` cannot be delivered from this host."""
        ...

    async def session_notice(
        self, notify: SessionNotify, kind: str, session_id: str, output: dict[str, Any]
    ) -> None:
        """Record a delivery of ``output`` to ``notify`` and start delivering it (returns
        once it is recorded, not delivered)."""
        ...
