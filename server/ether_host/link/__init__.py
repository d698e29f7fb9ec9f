"""The stdio link: JSON frames, one per line, between the host and an agent process."""

from ether_host.link.connection import (
    DEFAULT_MAX_FRAME,
    NOT_RUN,
    PROTOCOL_VERSIONS,
    SHUTTING_DOWN,
    AgentConnection,
)
from ether_host.link.lines import LineSplitter, Oversized
from ether_host.link.mcp import McpConnection
from ether_host.link.pending import (
    HandshakeError,
    LinkClosed,
    Pending,
    ProtocolMismatch,
    TaskFailure,
)
from ether_host.link.stderr import MAX_STDERR_LINE, StderrParser, own_task_fields, task_fields

__all__ = [
    "DEFAULT_MAX_FRAME",
    "MAX_STDERR_LINE",
    "NOT_RUN",
    "PROTOCOL_VERSIONS",
    "SHUTTING_DOWN",
    "AgentConnection",
    "HandshakeError",
    "LineSplitter",
    "LinkClosed",
    "McpConnection",
    "Oversized",
    "Pending",
    "ProtocolMismatch",
    "StderrParser",
    "TaskFailure",
    "own_task_fields",
    "task_fields",
]
