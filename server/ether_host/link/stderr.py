"""Turn an agent's stderr lines into structured log records.

Which task a line is about: stderr is one stream for the whole process, so a line is
attributed to a task only when that task was the one in flight on the replica when the line
was read (``task_fields``); with several in flight the record lists them all and names none.

Recognised: JSON lines (``level``/``@level``/``levelname`` and
``msg``/``message``/``@message``/``event``), ``[LEVEL]`` and ``LEVEL:``
prefixes, and multi-line Python tracebacks, Go panics and Node stacks, whose
lines are all errors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ether_host.link.pending import Pending

MAX_STDERR_LINE = 64 * 1024
_LEVEL_NAMES = {
    "trace": "debug",
    "debug": "debug",
    "info": "info",
    "notice": "info",
    "warn": "warning",
    "warning": "warning",
    "error": "error",
    "err": "error",
    "critical": "error",
    "fatal": "error",
    "panic": "error",
}
_PREFIX = re.compile(
    r"^\s*\[?(?P<level>trace|debug|info|notice|warn|warning|error|err|critical|fatal)\]?[:\s]\s*(?P<rest>.*)$",
    re.I,
)
_ERROR_START = re.compile(
    r"^(Traceback \(most recent call last\):|panic: |goroutine \d+ \[|\S*Error: |Uncaught )"
)
_CONTINUATION = re.compile(
    r"^(\s+|During handling|The above exception|goroutine |\S+\.go:\d+|created by )"
)


@dataclass
class StderrRecord:
    """One log record read from stderr."""

    level: str
    message: str
    fields: dict[str, Any] = field(default_factory=dict)


class StderrParser:
    """Stateful: remembers whether it is inside a traceback or panic."""

    def __init__(self) -> None:
        self._in_error_block = False

    def parse(self, raw: bytes) -> StderrRecord:
        text = raw[:MAX_STDERR_LINE].decode("utf-8", errors="replace").rstrip("\r")
        if self._in_error_block:
            if _CONTINUATION.match(text) or not text:
                return StderrRecord("error", text)
            self._in_error_block = False
            if re.match(r"^[\w.]+(Error|Exception|Exit|Interrupt)\b", text):
                return StderrRecord("error", text)  # the exception line ends the traceback
        if _ERROR_START.match(text):
            self._in_error_block = True
            return StderrRecord("error", text)
        if text.startswith("{"):
            record = self._json(text)
            if record is not None:
                return record
        match = _PREFIX.match(text)
        if match:
            return StderrRecord(_LEVEL_NAMES[match["level"].lower()], match["rest"])
        return StderrRecord("info", text)

    @staticmethod
    def _json(text: str) -> StderrRecord | None:
        try:
            value = json.loads(text)
        except ValueError:
            return None
        if not isinstance(value, dict):
            return None
        level = next(
            (str(value.pop(k)) for k in ("level", "@level", "levelname", "severity") if k in value),
            "info",
        )
        message = next(
            (str(value.pop(k)) for k in ("msg", "message", "@message", "event") if k in value), ""
        )
        return StderrRecord(_LEVEL_NAMES.get(level.lower(), "info"), message, value)


# With more tasks than this in flight, a stderr record lists only the first ones (it says how
# many there were).
MAX_LISTED_TASKS = 16


def task_fields(fields: dict[str, Any], in_flight: Iterable[Pending]) -> dict[str, Any]:
    """``fields`` of a stderr record, with the task it was written during: ``task_id`` (and
    ``trace_id`` when traced) when exactly one task was in flight on the replica; when several
    were, ``tasks_in_flight`` and their ``task_ids``, and no guess which one wrote it."""
    running = [pending for pending in in_flight if pending.sent and pending.task_id]
    if not running:
        return fields
    if len(running) == 1:
        return fields | own_task_fields(running[0])
    return fields | {
        "tasks_in_flight": len(running),
        "task_ids": [pending.task_id for pending in running[:MAX_LISTED_TASKS]],
    }


def own_task_fields(pending: Pending) -> dict[str, str]:
    """The task a record is about for certain (a ``log`` frame names its task)."""
    if pending.trace_id:
        return {"task_id": pending.task_id, "trace_id": pending.trace_id}
    return {"task_id": pending.task_id} if pending.task_id else {}
