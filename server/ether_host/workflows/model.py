"""Runs, stages and tasks as the engine keeps them, and their API JSON shapes.

The JSON written here is the proto3 JSON mapping of the ether.v1 messages
(``Run``, ``RunStage``, ``RunTask``, ``AgentOutput``...): the store keeps it,
the reports read it, and the transport parses it into messages. One shape,
three uses.
"""

from __future__ import annotations

import datetime
import functools
import math
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import anyio
import orjson

from ether_host.agents import ERROR, SUCCESS, Metadata, TaskErrorInfo, TaskResult
from ether_host.workflows.spec import WorkflowSpec, duration_json


class RunState:
    PENDING, RUNNING, SUCCEEDED, PARTIAL = "PENDING", "RUNNING", "SUCCEEDED", "PARTIAL"
    FAILED, CANCELLED, INTERRUPTED = "FAILED", "CANCELLED", "INTERRUPTED"
    ALL = (PENDING, RUNNING, SUCCEEDED, PARTIAL, FAILED, CANCELLED, INTERRUPTED)
    ENDED = frozenset({SUCCEEDED, PARTIAL, FAILED, CANCELLED, INTERRUPTED})


class StageState:
    PENDING, RUNNING, SUCCEEDED, PARTIAL = "PENDING", "RUNNING", "SUCCEEDED", "PARTIAL"
    FAILED, SKIPPED, CANCELLED = "FAILED", "SKIPPED", "CANCELLED"
    DONE = frozenset({SUCCEEDED, PARTIAL, SKIPPED})  # a resumed run does not run these again


class TaskState:
    PENDING, RUNNING, RETRYING = "PENDING", "RUNNING", "RETRYING"
    SUCCEEDED, FAILED, CANCELLED = "SUCCEEDED", "FAILED", "CANCELLED"
    FINISHED = frozenset({SUCCEEDED, FAILED, CANCELLED})


_BUCKET = {
    TaskState.PENDING: "pending",
    TaskState.RUNNING: "running",
    TaskState.RETRYING: "running",
    TaskState.SUCCEEDED: "succeeded",
    TaskState.FAILED: "failed",
    TaskState.CANCELLED: "cancelled",
}


def rfc3339(epoch: float) -> str:
    """An epoch time as proto3 JSON Timestamp text (``2026-11-26T11:15:34.123456Z``, the
    fraction left out when it is zero, as datetime's isoformat does). Every task's row and
    events carry a few: the whole second comes from a small cache, since datetime's
    conversion was a tenth of the event loop's time in a map stage."""
    second = math.floor(epoch)
    micro = round((epoch - second) * 1e6)  # half to even, as datetime.fromtimestamp rounds
    if micro >= 1_000_000:
        second, micro = second + 1, micro - 1_000_000
    whole = _whole_second(second)
    return f"{whole}.{micro:06d}Z" if micro else f"{whole}Z"


@functools.lru_cache(maxsize=256)
def _whole_second(second: int) -> str:
    return datetime.datetime.fromtimestamp(second, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S")


def parse_rfc3339(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def parse_duration(text: str) -> float:
    return float(text.rstrip("s") or 0)


@dataclass
class Counts:
    """Tasks by state."""

    total: int = 0
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0

    def move(self, old: str | None, new: str) -> None:
        # Through __dict__: a map stage moves each task three times in its stage's counts and
        # the run's, and getattr/setattr by name cost twice as much.
        counts = self.__dict__
        if old is None:
            counts["total"] += 1
        else:
            counts[_BUCKET[old]] -= 1
        counts[_BUCKET[new]] += 1

    def api(self) -> dict[str, int]:
        return {k: v for k, v in vars(self).items() if v}

    @classmethod
    def from_api(cls, raw: dict[str, Any] | None) -> Counts:
        return cls(**{k: int(v) for k, v in (raw or {}).items()})


@dataclass
class Usage:
    """What a run or a stage spent: cost, tasks started, and wall-clock time."""

    cost: float = 0.0
    tasks: int = 0
    elapsed_before: float = 0.0  # time spent in earlier segments (before a restart)
    since: float | None = None  # time.monotonic() when the current segment started

    def start(self) -> None:
        if self.since is None:
            self.since = time.monotonic()

    def stop(self) -> None:
        if self.since is not None:
            self.elapsed_before += time.monotonic() - self.since
            self.since = None

    @property
    def elapsed(self) -> float:
        return self.elapsed_before + (
            time.monotonic() - self.since if self.since is not None else 0.0
        )

    def api(self) -> dict[str, Any]:
        return {"cost": self.cost, "elapsed": duration_json(self.elapsed), "tasks": self.tasks}

    @classmethod
    def from_api(cls, raw: dict[str, Any] | None) -> Usage:
        raw = raw or {}
        return cls(
            float(raw.get("cost") or 0.0),
            int(raw.get("tasks") or 0),
            parse_duration(str(raw.get("elapsed") or "0s")),
        )


@dataclass
class Problem:
    """Why a run or a stage did not succeed (a TaskError in the API)."""

    code: str
    message: str

    def api(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}

    @classmethod
    def from_api(cls, raw: dict[str, Any] | None) -> Problem | None:
        return cls(str(raw.get("code") or ""), str(raw.get("message") or "")) if raw else None


def output_json(result: TaskResult) -> dict[str, Any]:
    """A TaskResult as proto3 JSON of ether.v1.AgentOutput."""
    meta = result.metadata
    out: dict[str, Any] = {
        "task_id": result.task_id,
        "status": f"TASK_STATUS_{result.status}",
        "agent": result.agent,
        "action": result.action,
        "metadata": {
            "duration": duration_json(meta.duration),
            "cost": meta.cost,
            "model": meta.model,
            "started_at": rfc3339(meta.started_at),
            "host": meta.host,
            "pid": meta.pid,
            "attempt": meta.attempt,
            "cached": meta.cached,
            "extra": meta.extra,
        },
    }
    if result.data is not None:
        out["data"] = result.data
    if result.error is not None:
        out["error"] = {
            "code": result.error.code,
            "message": result.error.message,
            "details": result.error.details,
            "retryable": result.error.retryable,
        }
    if result.next_actions:
        out["next_actions"] = [
            {
                "agent": str(p.get("agent") or ""),
                "action": str(p.get("action") or ""),
                "params": p.get("params") if isinstance(p.get("params"), dict) else {},
                "reason": str(p.get("reason") or ""),
            }
            for p in result.next_actions
        ]
    return out


def output_from_json(raw: dict[str, Any]) -> TaskResult:
    meta = raw.get("metadata") or {}
    error = raw.get("error")
    return TaskResult(
        task_id=str(raw.get("task_id") or ""),
        status=str(raw.get("status") or "TASK_STATUS_ERROR").removeprefix("TASK_STATUS_"),
        agent=str(raw.get("agent") or ""),
        action=str(raw.get("action") or ""),
        data=raw.get("data"),
        error=TaskErrorInfo(
            str(error.get("code") or ""),
            str(error.get("message") or ""),
            dict(error.get("details") or {}),
            bool(error.get("retryable")),
        )
        if error
        else None,
        metadata=Metadata(
            duration=parse_duration(str(meta.get("duration") or "0s")),
            cost=float(meta.get("cost") or 0.0),
            model=str(meta.get("model") or ""),
            started_at=parse_rfc3339(meta["started_at"]) if meta.get("started_at") else 0.0,
            host=str(meta.get("host") or ""),
            pid=int(meta.get("pid") or 0),
            attempt=int(meta.get("attempt") or 1),
            cached=bool(meta.get("cached")),
            extra=dict(meta.get("extra") or {}),
        ),
        next_actions=list(raw.get("next_actions") or []),
    )


def error_result(
    task_id: str, agent: str, action: str, code: str, message: str, *, retryable: bool = False
) -> TaskResult:
    return TaskResult(
        task_id,
        ERROR,
        agent,
        action,
        error=TaskErrorInfo(code, message, retryable=retryable),
        metadata=Metadata(started_at=time.time()),
    )


@dataclass(slots=True)  # a map keeps every task's record: no __dict__ for the collector to walk
class TaskRecord:
    """One task of a run."""

    seq: int  # creation order in the run, from 1
    task_id: str
    stage: str
    input_index: int
    action_index: int
    agent: str
    action: str
    params: dict[str, Any]
    state: str = TaskState.PENDING
    attempts: int = 0
    result: TaskResult | None = None
    proposed_by: str = ""
    depth: int = 0  # how many followed next actions led here
    started_at: float | None = None
    ended_at: float | None = None
    # The scope of the coroutine running it (a retry, a followed next action): what a halt
    # cancels. None for a task in a batch of its stage, which the dispatcher holds.
    scope: anyio.CancelScope | None = field(default=None, repr=False, compare=False)

    @property
    def succeeded(self) -> bool:
        return (
            self.state == TaskState.SUCCEEDED
            and self.result is not None
            and self.result.status == SUCCESS
        )

    def api(self, *, with_output: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "task_id": self.task_id,
            "stage": self.stage,
            "input_index": self.input_index,
            "action_index": self.action_index,
            "agent": self.agent,
            "action": self.action,
            "params": self.params,
            "state": f"RUN_TASK_STATE_{self.state}",
            "attempts": self.attempts,
        }
        if with_output and self.result is not None:
            out["output"] = output_json(self.result)
        if self.proposed_by:
            out["proposed_by"] = self.proposed_by
        if self.started_at is not None:
            out["started_at"] = rfc3339(self.started_at)
        if self.ended_at is not None:
            out["ended_at"] = rfc3339(self.ended_at)
        return out

    def stored(self) -> dict[str, Any]:
        """The API shape plus what a resume needs."""
        out = self.api()  # one dict, not a copy: a row per task of a resumed stage
        out["seq"] = self.seq
        out["depth"] = self.depth
        return out

    @classmethod
    def from_stored(cls, raw: dict[str, Any]) -> TaskRecord:
        return cls(
            seq=int(raw["seq"]),
            task_id=str(raw["task_id"]),
            stage=str(raw["stage"]),
            input_index=int(raw.get("input_index") or 0),
            action_index=int(raw.get("action_index") or 0),
            agent=str(raw.get("agent") or ""),
            action=str(raw.get("action") or ""),
            params=dict(raw.get("params") or {}),
            state=str(raw.get("state") or "").removeprefix("RUN_TASK_STATE_") or TaskState.PENDING,
            attempts=int(raw.get("attempts") or 0),
            result=output_from_json(raw["output"]) if raw.get("output") else None,
            proposed_by=str(raw.get("proposed_by") or ""),
            depth=int(raw.get("depth") or 0),
            started_at=parse_rfc3339(raw["started_at"]) if raw.get("started_at") else None,
            ended_at=parse_rfc3339(raw["ended_at"]) if raw.get("ended_at") else None,
        )


@dataclass
class StageRecord:
    """One stage of a run."""

    name: str
    state: str = StageState.PENDING
    counts: Counts = field(default_factory=Counts)
    usage: Usage = field(default_factory=Usage)
    started_at: float | None = None
    ended_at: float | None = None
    error: Problem | None = None
    tasks: list[TaskRecord] = field(default_factory=list)

    def api(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "state": f"STAGE_STATE_{self.state}",
            "tasks": self.counts.api(),
            "usage": self.usage.api(),
        }
        if self.started_at is not None:
            out["started_at"] = rfc3339(self.started_at)
        if self.ended_at is not None:
            out["ended_at"] = rfc3339(self.ended_at)
        if self.error is not None:
            out["error"] = self.error.api()
        return out


@dataclass
class RunRecord:
    """One run: its spec, where it is, and what it spent."""

    id: str
    spec: WorkflowSpec
    spec_text: str = ""
    state: str = RunState.PENDING
    stages: list[StageRecord] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)
    usage: Usage = field(default_factory=Usage)
    result: Any = None
    has_result: bool = False
    error: Problem | None = None
    creator: str = ""
    request_id: str = ""
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    ended_at: float | None = None
    last_sequence: int = 0
    resume_count: int = 0
    resume_requests: list[str] = field(default_factory=list)
    next_task: int = 0  # creation counter of task ids

    @property
    def name(self) -> str:
        return self.spec.name

    def stage(self, name: str) -> StageRecord:
        return next(s for s in self.stages if s.name == name)

    def tasks(self) -> list[TaskRecord]:
        """Every task, in creation order."""
        return sorted((t for s in self.stages for t in s.tasks), key=lambda t: t.seq)

    def api(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "state": f"RUN_STATE_{self.state}",
            "spec": self.spec.canonical,
            "stages": [s.api() for s in self.stages],
            "tasks": self.counts.api(),
            "usage": self.usage.api(),
            "creator": self.creator,
            "request_id": self.request_id,
            "created_at": rfc3339(self.created_at),
            "last_sequence": str(self.last_sequence),
            "resume_count": self.resume_count,
        }
        if self.spec_text:
            out["spec_text"] = self.spec_text
        if self.has_result:
            out["result"] = self.result
        if self.error is not None:
            out["error"] = self.error.api()
        if self.started_at is not None:
            out["started_at"] = rfc3339(self.started_at)
        if self.ended_at is not None:
            out["ended_at"] = rfc3339(self.ended_at)
        return out

    def stored(self) -> dict[str, Any]:
        """The API shape plus what a resume needs."""
        return {**self.api(), "resume_requests": self.resume_requests, "next_task": self.next_task}


class RunEvent(NamedTuple):
    """One event of a run: ``kind`` names the StreamRunEventsResponse oneof member, ``body`` is its
    JSON, as values or (a task's events, two per task of a map) encoded once (``encoded``): held
    so in the live run's memory, one object the cyclic collector does not walk instead of four or
    five dicts, and written to the store as it is; decoded only for a follower. A named tuple,
    not a frozen dataclass: two per task of a map, and a frozen dataclass's __init__ sets each
    field through object.__setattr__."""

    sequence: int
    time: float
    kind: str
    body: dict[str, Any] | bytes

    def data(self) -> dict[str, Any]:
        body = self.body
        return orjson.loads(body) if isinstance(body, bytes) else body

    def api(self, run_id: str) -> dict[str, Any]:
        return {
            "sequence": str(self.sequence),
            "run_id": run_id,
            "time": rfc3339(self.time),
            self.kind: self.data(),
        }


def encoded(body: dict[str, Any]) -> dict[str, Any] | bytes:
    """``body`` as JSON bytes, or ``body`` itself when orjson refuses it (an integer past 64
    bits: the store's json writes it). What orjson wrote, it reads back the same."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return body


DETAIL_KINDS = frozenset({"task_progress"})
