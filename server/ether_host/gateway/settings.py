"""The host config's ``[gateway]`` table: limits of sessions, context and messaging.

Every key has a default; a bad key or value is a ConfigError naming it, so the
host refuses to start rather than run with a surprise. The egress policy
(``[gateway.egress]``) is read by :mod:`ether_host.gateway.egress.policy`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ether_host.config import ConfigError


@dataclass(frozen=True)
class GatewaySettings:
    """Limits and defaults of the gateway, all overridable in ``[gateway]``."""

    max_sessions: int = 1000  # open sessions in total
    max_sessions_per_owner: int = 100  # open sessions per identity
    idle_timeout: float = 3600.0  # seconds without activity before a session closes
    max_idle_timeout: float = 86400.0  # the most a client may ask for
    retention: float = 3600.0  # seconds a closed session stays readable
    event_history: int = 1000  # Converse events kept per session for resuming
    context_history: int = 1000  # context changes kept per session for WatchContext resumes
    max_message_bytes: int = (
        256 * 1024
    )  # a user message, a mailbox message, a published message (JSON)
    max_context_bytes: int = 1024 * 1024  # a session's context document (JSON)
    turn_queue: int = 16  # turns queued behind the running one
    turn_timeout: float = 60.0  # default time limit of a whole turn
    mailbox_size: int = (
        100  # messages waiting in one agent's mailbox (deployment config may change it)
    )
    topic_retention: int = 1000  # messages kept per topic for subscribers that resume
    # SendMessage request ids remembered (and stored) so that a retry is answered, not sent
    # again; each costs a few hundred bytes of memory, whatever the size of its message.
    remembered_request_ids: int = 10000

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> GatewaySettings:
        """Read ``[gateway]``; the ``egress`` sub-table is someone else's."""
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, raw in table.items():
            if key == "egress":
                continue
            field = known.get(key)
            if field is None:
                allowed = ", ".join(sorted([*known, "egress"]))
                raise ConfigError(f"gateway: unknown key {key!r}; allowed keys are {allowed}")
            values[key] = _number(f"gateway.{key}", raw, integer=field.type == "int")
        return cls(**values)


def _number(key: str, raw: Any, *, integer: bool) -> float | int:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ConfigError(f"{key}: expected a number, got {raw!r}")
    if raw <= 0:
        raise ConfigError(f"{key}: {raw!r} must be greater than 0")
    if integer:
        if float(raw) != int(raw):
            raise ConfigError(f"{key}: expected a whole number, got {raw!r}")
        return int(raw)
    return float(raw)
