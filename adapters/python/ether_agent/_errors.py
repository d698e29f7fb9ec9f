"""Errors a handler raises, and the standard error codes of the stdio link."""

from __future__ import annotations

from typing import Any

# Standard codes (docs/protocol.md, rule 3).
INVALID_PARAMS = "invalid_params"
UNKNOWN_ACTION = "unknown_action"
INTERNAL = "internal"
CANCELLED = "cancelled"
TIMEOUT = "timeout"
FRAME_TOO_LARGE = "frame_too_large"
SHUTTING_DOWN = "shutting_down"
PERMISSION_DENIED = "permission_denied"
CYCLE_DETECTED = "cycle_detected"
PROTOCOL_VERSION_UNSUPPORTED = "protocol_version_unsupported"


class AgentError(Exception):
    """A task failure with a machine-readable code.

    Raise it from a handler to end the task with status ``error``; ``ctx.call_agent`` and
    ``ctx.host_call`` raise it when the host answers a call with an error.
    """

    def __init__(
        self,
        code: str,
        message: str = "",
        data: dict[str, Any] | None = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message or code
        self.data = data
        self.retryable = retryable

    def to_json(self) -> dict[str, Any]:
        """The error body of a result or reply frame."""
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data:
            body["data"] = self.data
        if self.retryable:
            body["retryable"] = True
        return body

    @classmethod
    def from_json(cls, body: Any) -> AgentError:
        """Read an error body from a frame, tolerating a bare message string."""
        if isinstance(body, dict):
            data = body.get("data")
            return cls(
                str(body.get("code") or INTERNAL),
                str(body.get("message") or ""),
                data if isinstance(data, dict) else None,
                bool(body.get("retryable")),
            )
        return cls(INTERNAL, str(body))


class FatalError(Exception):
    """The agent can never work as configured: the host marks it FATAL and does not restart it.

    Raise it from an ``@agent.on_start`` hook (bad config, missing secret); the runtime writes a
    ``fatal`` frame and exits 78.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
