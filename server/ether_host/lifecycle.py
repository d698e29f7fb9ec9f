"""Host-wide lifecycle signals shared by the core and the transport."""

from __future__ import annotations

import anyio


class Lifecycle:
    """Set once when the host begins to stop, so long streams can end cleanly."""

    def __init__(self) -> None:
        self.stopping = anyio.Event()

    @property
    def is_stopping(self) -> bool:
        return self.stopping.is_set()
