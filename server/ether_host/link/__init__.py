"""The stdio link: JSON frames, one per line, between the host and an agent process."""

from ether_host.link.connection import SHUTTING_DOWN, AgentConnection
from ether_host.link.lines import LineSplitter
from ether_host.link.pending import (
    HandshakeError,
    LinkClosed,
    Pending,
    ProtocolMismatch,
    TaskFailure,
)

__all__ = [
    "SHUTTING_DOWN",
    "AgentConnection",
    "HandshakeError",
    "LineSplitter",
    "LinkClosed",
    "Pending",
    "ProtocolMismatch",
    "TaskFailure",
]
