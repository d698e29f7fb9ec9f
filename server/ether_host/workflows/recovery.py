"""Crash recovery and resume: runs a stopped host left behind, and interrupted runs made live again.

At start, runs the store still shows PENDING or RUNNING belonged to a host that stopped without
ending them: they become INTERRUPTED, their unfinished tasks PENDING, and a ``run_completed``
event follows their last stored one. ``rebuild`` turns such a run back into a ``RunExecution``
for ResumeRun.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import structlog

from ether_host.agents import Dispatcher, TaskResult
from ether_host.errors import FailedPrecondition
from ether_host.reasons import Reason
from ether_host.supervisor import State, Supervisor
from ether_host.workflows import retries
from ether_host.workflows.engine import RunExecution
from ether_host.workflows.model import (
    Counts,
    Problem,
    RunEvent,
    RunRecord,
    StageRecord,
    StageState,
    TaskRecord,
    TaskState,
    Usage,
    error_result,
    parse_rfc3339,
    rfc3339,
)
from ether_host.workflows.source import Source
from ether_host.workflows.spec import parse_spec
from ether_host.workflows.store import RunStore

log = structlog.get_logger("ether.workflows")


async def interrupt_stale(store: RunStore) -> None:
    """Mark the runs a stopped host left pending or running as INTERRUPTED."""
    stale = await anyio.to_thread.run_sync(
        store.runs_in_states, ["RUN_STATE_PENDING", "RUN_STATE_RUNNING"]
    )
    for body in stale:
        tasks = await anyio.to_thread.run_sync(store.tasks, body["id"])
        run_counts = Counts()
        stage_counts = {s["name"]: Counts() for s in body.get("stages") or []}
        for task in tasks:
            if task["state"] in ("RUN_TASK_STATE_RUNNING", "RUN_TASK_STATE_RETRYING"):
                task["state"] = "RUN_TASK_STATE_PENDING"
                store.put_task(body["id"], task)
            short = task["state"].removeprefix("RUN_TASK_STATE_")
            run_counts.move(None, short)
            stage_counts.setdefault(task["stage"], Counts()).move(None, short)
        body["tasks"] = run_counts.api()  # the stored counts may predate the last task writes
        for stage in body.get("stages") or []:
            stage["tasks"] = stage_counts[stage["name"]].api()
            if stage.get("state") == "STAGE_STATE_RUNNING":
                stage["state"] = "STAGE_STATE_CANCELLED"
                stage["error"] = {
                    "code": "interrupted",
                    "message": "cut short by a host restart",
                }
        now = time.time()
        error = {
            "code": "interrupted",
            "message": "the host stopped while the run was running; ResumeRun continues it",
        }
        body.update(state="RUN_STATE_INTERRUPTED", error=error, ended_at=rfc3339(now))
        stored_last = await anyio.to_thread.run_sync(store.last_event, body["id"])
        sequence = max(int(body.get("last_sequence") or 0), stored_last) + 1
        body["last_sequence"] = str(sequence)
        event = RunEvent(
            sequence,
            now,
            "run_completed",
            {
                "state": "RUN_STATE_INTERRUPTED",
                "error": error,
                "usage": body.get("usage") or {},
                "tasks": body.get("tasks") or {},
            },
        )
        store.add_event(body["id"], event)
        store.put_run(body)
        log.warning("run interrupted by a host restart", run_id=body["id"])
    await store.flush()


def rebuild(
    body: dict[str, Any],
    stored_tasks: list[dict[str, Any]],
    include_non_idempotent: bool,
    request_id: str,
    *,
    store: RunStore,
    dispatcher: Dispatcher,
    supervisor: Supervisor,
) -> RunExecution:
    """An interrupted run from the store, ready to continue."""
    spec = parse_spec(Source(body["spec"]), lambda name: [])
    record = RunRecord(
        body["id"],
        spec,
        str(body.get("spec_text") or ""),
        creator=str(body.get("creator") or ""),
        request_id=str(body.get("request_id") or ""),
        created_at=parse_rfc3339(body["created_at"]),
        started_at=parse_rfc3339(body["started_at"]) if body.get("started_at") else None,
        last_sequence=int(body.get("last_sequence") or 0),
        resume_count=int(body.get("resume_count") or 0) + 1,
        resume_requests=[
            *(body.get("resume_requests") or []),
            *([request_id] if request_id else []),
        ],
        next_task=max([int(body.get("next_task") or 0), *(int(t["seq"]) for t in stored_tasks)]),
    )
    record.usage = Usage.from_api(body.get("usage"))
    by_stage: dict[str, list[TaskRecord]] = {}
    for raw in stored_tasks:
        task = TaskRecord.from_stored(raw)
        by_stage.setdefault(task.stage, []).append(task)
    stored_stages = {s["name"]: s for s in body.get("stages") or []}
    needed: set[str] = set()
    rerun, failed_now = 0, []
    for stage_spec in spec.stages:
        raw_stage = stored_stages.get(stage_spec.name, {})
        stage = StageRecord(stage_spec.name, tasks=by_stage.get(stage_spec.name, []))
        stage.state = (
            str(raw_stage.get("state") or "").removeprefix("STAGE_STATE_") or StageState.PENDING
        )
        stage.usage = Usage.from_api(raw_stage.get("usage"))
        stage.started_at = (
            parse_rfc3339(raw_stage["started_at"]) if raw_stage.get("started_at") else None
        )
        if stage.state not in StageState.DONE:
            stage.state, stage.ended_at, stage.error = StageState.PENDING, None, None
            needed.update(a.agent for a in stage_spec.actions)
            for task in stage.tasks:
                if task.state in TaskState.FINISHED:
                    continue
                if (
                    task.attempts
                    and not include_non_idempotent
                    and not retries.idempotent(supervisor, task)
                ):
                    task.state, task.ended_at = TaskState.FAILED, time.time()
                    task.result = _interrupted_result(task)
                    failed_now.append(task)
                else:
                    task.state, task.result = TaskState.PENDING, None
                    needed.add(task.agent)
                    rerun += task.attempts > 0
        else:
            stage.ended_at = (
                parse_rfc3339(raw_stage["ended_at"]) if raw_stage.get("ended_at") else None
            )
            stage.error = Problem.from_api(raw_stage.get("error"))
        stage.counts = Counts()
        for task in stage.tasks:
            stage.counts.move(None, task.state)
            record.counts.move(None, task.state)
        record.stages.append(stage)
    for name in sorted(needed):
        agent = supervisor.agents.get(name)
        if agent is None or agent.state is not State.RUNNING:
            what = "is not deployed" if agent is None else f"is {agent.state.value}"
            raise FailedPrecondition(
                f"run {record.id} needs agent {name!r}, which {what}; deploy or start it, "
                "then resume",
                reason=Reason.AGENT_NOT_RUNNING,
                resource=("agent", name),
            )
    execution = RunExecution(
        record,
        store,
        dispatcher,
        supervisor,
        dict(body.get("fanned") or {}),
        resumed={"tasks_rerun": rerun, "tasks_failed": len(failed_now)},
    )
    execution.failed_on_resume = failed_now
    for stage in record.stages:
        for task in stage.tasks:
            execution.save_task(task)
    return execution


def _interrupted_result(task: TaskRecord) -> TaskResult:
    return error_result(
        task.task_id,
        task.agent,
        task.action,
        "interrupted",
        "the host stopped while this task ran; it is not idempotent, so it was not run again "
        "(ResumeRun include_non_idempotent runs such tasks again)",
    )
