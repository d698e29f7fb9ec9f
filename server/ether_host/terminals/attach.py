"""One attached client: a snapshot, then output from its offset, then the exit.

The client's "queue" is its offset into the terminal's shared output buffer:
nothing is copied per client and the PTY reader never waits for one. A client
that falls more than ``max_lag`` bytes behind (or behind what the buffer still
holds) is told it lagged and gets a fresh snapshot.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from ether_host.errors import EtherError
from ether_host.terminals.model import ExitInfo, ScreenRequest, ScreenView
from ether_host.terminals.session import Session

CHUNK = 64 * 1024


@dataclass(frozen=True)
class Snapshot:
    view: ScreenView
    offset: int


@dataclass(frozen=True)
class Output:
    offset: int
    data: bytes


@dataclass(frozen=True)
class Lagged:
    dropped_from: int
    dropped_to: int


@dataclass(frozen=True)
class Exited:
    exit: ExitInfo


AttachItem = Snapshot | Output | Lagged | Exited


class Attachment:
    """An attached client's view of a terminal."""

    def __init__(
        self, session: Session, from_offset: int | None, read_only: bool, max_lag: int
    ) -> None:
        self.session = session
        self.read_only = read_only
        self.max_lag = max_lag
        self.resumed = from_offset is not None and session.buffer.held(from_offset)
        self.offset = from_offset if self.resumed and from_offset is not None else -1
        self._error: EtherError | None = None
        self._detached = False
        self._closed = False
        session.attached += 1

    def fail(self, error: EtherError) -> None:
        """End the stream with ``error`` (raised from ``items``)."""
        self._error = error
        self.session.changed.notify()

    def detach(self) -> None:
        """End the stream quietly (the client closed its side)."""
        self._detached = True
        self.session.changed.notify()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.session.attached -= 1

    async def _snapshot(self) -> Snapshot:
        view = await self.session.screen(ScreenRequest(styles=True))
        self.offset = view.output_offset
        return Snapshot(view, view.output_offset)

    async def items(self) -> AsyncIterator[AttachItem]:
        session = self.session
        buffer = session.buffer
        if not self.resumed:
            yield await self._snapshot()
        while True:
            waiter = session.changed.waiter()
            if self._error is not None:
                raise self._error
            if self._detached:
                return
            end = buffer.end
            if self.offset < buffer.start or end - self.offset > self.max_lag:
                yield Lagged(self.offset, end)
                yield await self._snapshot()
                continue
            if self.offset < end:
                data = buffer.read(self.offset, CHUNK)
                offset = self.offset
                self.offset += len(data)
                yield Output(offset, data)
                continue
            if session.exit is not None:
                yield Exited(session.exit)
                return
            await waiter.wait()
