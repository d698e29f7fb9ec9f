"""A task as it travels between hosts (remote.py, docs/cluster.md "Tasks across hosts"): the
names of the streams it goes on, the JSON of the task, of its result and of an EtherError, and
the entries of a stream as redis-py gives them.

Apart from ``RemoteTasks``, which sends and runs tasks, because this is the protocol between the
hosts of one cluster: both sides must write and read it alike, and the modules that read a
stream or an error without running tasks (backlog.py, gateway_link.py) need none of the rest.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import orjson

from ether_host.agents import Budget, Metadata, TaskErrorInfo, TaskInput, TaskResult
from ether_host.errors import EtherError, Unavailable
from ether_host.reasons import Reason


def tasks_stream(agent: str) -> str:
    return f"ether:tasks:{agent}"


def replies_stream(host: str) -> str:
    return f"ether:replies:{host}"


def streams(reply: Any) -> Iterator[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]]:
    """An XREAD or XREADGROUP reply as redis-py's client gives it: each stream with its entries,
    each entry's fields as a dict (a nil reply: nothing). Redis answers a map under RESP3 (the
    protocol redis-py 8 speaks by default) and a list of pairs under RESP2."""
    for stream, entries in reply.items() if isinstance(reply, dict) else reply or ():
        yield stream, [(entry, _fields(flat)) for entry, flat in entries]


def _fields(flat: list[bytes] | None) -> dict[bytes, bytes]:
    if not flat:
        return {}  # an entry deleted meanwhile (XREADGROUP can name one)
    pairs = iter(flat)
    return dict(zip(pairs, pairs, strict=True))


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def task_json(task: TaskInput, reply_to: str, events: bool) -> bytes:
    """The task as it travels: with its budget and its place in the task tree (root, parent,
    depth and lineage: depth limits and re-entrant calls hold across hosts)."""
    left = None if task.deadline is None else task.deadline - time.monotonic()
    travelling = replace(task, deadline=left)  # seconds left: monotonic clocks differ
    # orjson writes dataclasses itself: asdict's deep copy was 7 % of a calling host's CPU.
    return orjson.dumps({"task": travelling, "reply_to": reply_to, "events": events})


def task_from(value: dict[str, Any]) -> TaskInput:
    fields = dict(value)
    fields["budget"] = Budget(**fields.get("budget", {}))
    fields["lineage"] = tuple(fields.get("lineage", ()))
    left = fields.get("deadline")
    fields["deadline"] = None if left is None else time.monotonic() + float(left)
    return TaskInput(**fields)


def result_json(result: TaskResult) -> TaskResult:
    """The result as orjson writes it (a dataclass: asdict's deep copy was 11 % of a running
    host's CPU per remote task)."""
    return result


def result_from(value: dict[str, Any]) -> TaskResult:
    fields = dict(value)
    fields["metadata"] = Metadata(**fields.get("metadata", {}))
    error = fields.get("error")
    fields["error"] = None if error is None else TaskErrorInfo(**error)
    return TaskResult(**fields)


_ERRORS: dict[str, type[EtherError]] = {cls.__name__: cls for cls in EtherError.__subclasses__()}


def error_json(error: EtherError) -> dict[str, Any]:
    """An EtherError as it travels between hosts (task answers here, gateway requests in
    gateway_link.py); ``error_from`` makes it again on the other side."""
    return {"class": type(error).__name__, "message": error.message, "reason": error.reason.value}


def error_from(value: dict[str, Any]) -> EtherError:
    kind = _ERRORS.get(str(value.get("class")), Unavailable)
    try:
        reason = Reason(str(value.get("reason")))
    except ValueError:
        reason = Reason.AGENT_UNAVAILABLE
    return kind(str(value.get("message", "")), reason=reason)
