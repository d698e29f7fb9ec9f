"""Domain errors raised by the core and mapped to gRPC statuses by the transport.

The core never imports grpc; it raises these. Each carries one canonical
code (named after the gRPC status it maps to), a message a person can act on,
a `Reason` for `google.rpc.ErrorInfo` (reasons.py, the mirror of
`ether.v1.ErrorReason`), and optional typed details that the transport turns
into `BadRequest`, `ResourceInfo`, `RetryInfo` or `QuotaFailure`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ether_host.reasons import Reason


class ErrorCode(Enum):
    """Canonical error kinds; the values are gRPC status names."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    ABORTED = "ABORTED"
    OUT_OF_RANGE = "OUT_OF_RANGE"
    UNAVAILABLE = "UNAVAILABLE"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    CANCELLED = "CANCELLED"
    UNIMPLEMENTED = "UNIMPLEMENTED"
    INTERNAL = "INTERNAL"


@dataclass(frozen=True)
class FieldViolation:
    """One bad field of a request: its path (``input.params.path``) and why."""

    field: str
    description: str


@dataclass(frozen=True)
class QuotaViolation:
    """One quota a request ran into: what it applies to (``terminal/t-1``) and its bound."""

    subject: str
    description: str


@dataclass
class EtherError(Exception):
    """An error a caller can act on. Raise a subclass, not this."""

    message: str
    reason: Reason
    metadata: dict[str, str] = field(default_factory=dict)
    violations: list[FieldViolation] = field(default_factory=list)
    resource: tuple[str, str] | None = None  # (resource type, name)
    retry_after: float | None = None  # seconds
    quota_violations: list[QuotaViolation] = field(default_factory=list)
    # Further protobuf messages a servicer attaches on the way out (such as
    # ether.v1.WaitForFailure); the core leaves this empty.
    details: list[Any] = field(default_factory=list)

    code = ErrorCode.INTERNAL

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


class InvalidArgument(EtherError):
    code = ErrorCode.INVALID_ARGUMENT


class NotFound(EtherError):
    code = ErrorCode.NOT_FOUND


class AlreadyExists(EtherError):
    code = ErrorCode.ALREADY_EXISTS


class PermissionDenied(EtherError):
    code = ErrorCode.PERMISSION_DENIED


class Unauthenticated(EtherError):
    code = ErrorCode.UNAUTHENTICATED


class ResourceExhausted(EtherError):
    code = ErrorCode.RESOURCE_EXHAUSTED


class FailedPrecondition(EtherError):
    code = ErrorCode.FAILED_PRECONDITION


class Aborted(EtherError):
    code = ErrorCode.ABORTED


class OutOfRange(EtherError):
    code = ErrorCode.OUT_OF_RANGE


class Unavailable(EtherError):
    code = ErrorCode.UNAVAILABLE


class DeadlineExceeded(EtherError):
    code = ErrorCode.DEADLINE_EXCEEDED


class Cancelled(EtherError):
    code = ErrorCode.CANCELLED


class Unimplemented(EtherError):
    code = ErrorCode.UNIMPLEMENTED
