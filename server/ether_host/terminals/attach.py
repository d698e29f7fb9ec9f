"""One attached client: a snapshot, then output from its offset, then the exit.

The client's "queue" is its offset into the terminal's shared output buffer:
nothing is copied per client and the PTY reader never waits for one. A client
that falls more than ``max_lag`` bytes behind (or behind what the buffer still
holds) is told it lagged and gets a fresh snapshot.

During a flood, output is sent in few large chunks rather than one per PTY
read: after each chunk the client waits for the terminal's next wake-up (at
most every ``NOTIFY_GAP``) unless a full batch is already pending, so what
arrived meanwhile goes out together. Each message costs the host and the
client far more than its bytes do.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass

from ether_host.errors import EtherError
from ether_host.terminals.model import ExitInfo, ScreenRequest, ScreenView
from ether_host.terminals.terminal import Terminal

CHUNK = 512 * 1024  # most output bytes per message (gRPC's default receive limit is 4 MiB)


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
        self, session: Terminal, from_offset: int | None, read_only: bool, max_lag: int
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
        # Trailing spaces kept: their background may be coloured (a status bar), and a client
        # repainting from the snapshot draws every cell.
        view = await self.session.screen(ScreenRequest(styles=True, keep_trailing_spaces=True))
        self.offset = view.output_offset
        return Snapshot(view, view.output_offset)

    async def items(self) -> AsyncGenerator[AttachItem, None]:
        session = self.session
        buffer = session.buffer
        if not self.resumed:
            yield await self._snapshot()
        batch = min(CHUNK, max(1, self.max_lag // 4))  # pending output worth sending at once
        waiter = session.changed.waiter()  # always taken before the state it waits on is read
        while True:
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
                # Sent. Unless a batch is pending (or the program has exited), let output
                # gather until the next wake-up; `waiter` predates the read above, so output
                # that arrived since has already set it or will.
                if session.exit is None and buffer.end - self.offset < batch:
                    await waiter.wait()
                waiter = session.changed.waiter()
                continue
            if session.exit is not None:
                yield Exited(session.exit)
                return
            await waiter.wait()
            waiter = session.changed.waiter()
