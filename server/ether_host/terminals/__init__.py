"""Terminals: programs on PTYs with an emulated screen (TerminalService and the ``term.*`` calls).

The core of the feature, with no gRPC in it: ``TerminalManager`` holds the
use cases; ``Terminal`` owns one PTY; ``Emulator`` renders its screen with a
patched pyte off the event loop. See docs/terminals.md.
"""

from ether_host.terminals.attach import AttachItem, Attachment, Exited, Lagged, Output, Snapshot
from ether_host.terminals.hostcalls import TERMINAL_CALLS, AgentTerminals
from ether_host.terminals.keys import InputSpec
from ether_host.terminals.manager import TerminalManager
from ether_host.terminals.model import (
    Cursor,
    ExitInfo,
    Run,
    ScreenRequest,
    ScreenView,
    TerminalEvent,
    TerminalInfo,
    TerminalState,
)
from ether_host.terminals.placement import (
    HostDirectory,
    HostWhereabouts,
    OwnerHost,
    TerminalPlacement,
    host_unavailable,
    terminal_host,
)
from ether_host.terminals.recording import RecordingInfo
from ether_host.terminals.requests import CreateSpec, parse_signal
from ether_host.terminals.rights import ADMIN, AGENT_RIGHTS
from ether_host.terminals.settings import TerminalSettings
from ether_host.terminals.waiting import (
    ExitWait,
    OutputWait,
    QuietWait,
    ScreenWait,
    WaitCondition,
    WaitFailed,
    WaitFailure,
    WaitResult,
)

__all__ = [
    "ADMIN",
    "AGENT_RIGHTS",
    "TERMINAL_CALLS",
    "AgentTerminals",
    "AttachItem",
    "Attachment",
    "CreateSpec",
    "Cursor",
    "ExitInfo",
    "ExitWait",
    "Exited",
    "HostDirectory",
    "HostWhereabouts",
    "InputSpec",
    "Lagged",
    "Output",
    "OutputWait",
    "OwnerHost",
    "QuietWait",
    "RecordingInfo",
    "Run",
    "ScreenRequest",
    "ScreenView",
    "ScreenWait",
    "Snapshot",
    "TerminalEvent",
    "TerminalInfo",
    "TerminalManager",
    "TerminalPlacement",
    "TerminalSettings",
    "TerminalState",
    "WaitCondition",
    "WaitFailed",
    "WaitFailure",
    "WaitResult",
    "host_unavailable",
    "parse_signal",
    "terminal_host",
]
