"""Host-wide lifecycle signals shared by the core and the transport, and what the host is."""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from ether_host.containment import Isolation


@dataclass(frozen=True)
class HostInfo:
    """The running host as GetHostInfo reports it (and `ether serve` logs it at start)."""

    version: str
    listeners: tuple[str, ...]
    auth: bool
    tls: bool
    client_certificates: bool
    isolation: Isolation
    started_at: float


class Lifecycle:
    """Set once when the host begins to stop, so long streams can end cleanly; ``info`` once it
    serves."""

    def __init__(self) -> None:
        self.stopping = anyio.Event()
        self.info: HostInfo | None = None

    @property
    def is_stopping(self) -> bool:
        return self.stopping.is_set()
