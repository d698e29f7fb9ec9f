"""Plain records the terminal core hands to its callers (the transport, the agent calls)."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from enum import Enum


class TerminalState(Enum):
    """Lifecycle of a terminal, as TerminalService shows it."""

    RUNNING = "RUNNING"
    EXITED = "EXITED"
    CLOSED = "CLOSED"


@dataclass(frozen=True)
class ExitInfo:
    """How a terminal's program ended: an exit code, or the signal that killed it."""

    code: int | None
    signal: int = 0
    time: float = field(default_factory=time.time)

    @property
    def signal_name(self) -> str:
        if not self.signal:
            return ""
        try:
            return signal.Signals(self.signal).name
        except ValueError:
            return f"SIG{self.signal}"

    def describe(self) -> str:
        if self.signal:
            return f"killed by {self.signal_name}"
        return f"exit code {self.code}"

    @classmethod
    def from_wait_status(cls, status: int) -> ExitInfo:
        """From the status ``os.waitpid`` returned."""
        if os.WIFSIGNALED(status):
            return cls(None, os.WTERMSIG(status))
        return cls(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 0)


@dataclass(frozen=True)
class TerminalInfo:
    """A terminal's description and state at one moment."""

    id: str
    name: str
    owner: str
    argv: tuple[str, ...]
    cwd: str
    rows: int
    cols: int
    term: str
    scrollback_lines: int
    state: TerminalState
    pid: int
    created_at: float
    last_activity_at: float
    exit: ExitInfo | None
    output_offset: int
    retained_offset: int
    attached_clients: int
    idle_timeout: float
    max_lifetime: float


@dataclass(frozen=True)
class Cursor:
    row: int
    col: int
    visible: bool


@dataclass(frozen=True)
class Run:
    """A stretch of one line with the same attributes."""

    text: str
    fg: str = ""
    bg: str = ""
    bold: bool = False
    italic: bool = False
    underline: bool = False
    reverse: bool = False
    strikethrough: bool = False
    blink: bool = False


@dataclass(frozen=True)
class ScreenView:
    """The emulated screen at one output offset."""

    rows: int
    cols: int
    lines: list[str]
    cursor: Cursor
    title: str
    alternate: bool
    output_offset: int
    scrollback: list[str] = field(default_factory=list)
    styled: list[list[Run]] | None = None
    exit: ExitInfo | None = None

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass(frozen=True)
class InputAccepted:
    """What one write did to a terminal's input queue."""

    queued: int  # bytes of this write now queued for the program
    pending: int  # bytes waiting in the queue after it
    # Unread input dropped because this write interrupts the program (Ctrl-C, Ctrl-\ or
    # Ctrl-Z under ISIG), as the terminal itself drops it on the signal.
    discarded: int = 0


@dataclass(frozen=True)
class ScreenRequest:
    """What a reader wants from the screen."""

    scrollback: bool = False
    scrollback_limit: int = 0
    styles: bool = False
    keep_trailing_spaces: bool = False


@dataclass(frozen=True)
class TerminalEvent:
    """Created, exited or closed, for WatchTerminals and the agent layer."""

    kind: str  # "created" | "exited" | "closed"
    terminal: TerminalInfo
    reason: str = ""
    time: float = field(default_factory=time.time)
