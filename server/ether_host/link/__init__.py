"""The stdio link: JSON frames, one per line, between the host and an agent process."""

from ether_host.link.connection import (
    AgentConnection,
    HandshakeError,
    LinkClosed,
    ProtocolMismatch,
    TaskFailure,
)
from ether_host.link.lines import LineSplitter

__all__ = [
    "AgentConnection",
    "HandshakeError",
    "LineSplitter",
    "LinkClosed",
    "ProtocolMismatch",
    "TaskFailure",
]
