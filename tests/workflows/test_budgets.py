"""Budgets hold: when max_time, max_cost or max_tasks runs out mid-run, the remaining tasks are
cancelled (the agents get the cancel frame and say so in their log) and the run ends with the reason.
CancelRun stops a run the same way."""

from __future__ import annotations

import json
import uuid

from ether.v1 import workflow_pb2
from tests.support.host import HostProcess
from tests.workflows.runs import (
    create,
    follow_until,
    logged,
    run_to_end,
    saw_cancel,
    stage_states,
    started,
    state,
    task_state,
    tasks,
    value,
    wait,
)


def holds(count: int) -> tuple[set[str], str]:
    """Unique tags for `count` holding steps, and the steps as a YAML list."""
    tags = {f"hold-{uuid.uuid4().hex[:8]}" for _ in range(count)}
    return tags, json.dumps([{"hold": tag} for tag in sorted(tags)])


def test_run_max_time_exhausted(host: HostProcess, flow: str) -> None:
    """The run's max_time runs out while tasks hold: they are cancelled and the run ends PARTIAL."""
    tags, steps = holds(2)
    run = run_to_end(
        host,
        f"""\
name: out-of-time
budget: {{max_time: 3s}}
stages:
  - {{name: first, agent: flow, action: step, inputs: [1]}}
  - {{name: wait, agent: flow, action: step, inputs: {steps}, parallel: true}}
""",
    )
    assert state(run) == "PARTIAL"
    assert run.error.code == "budget_exceeded" and "max_time=3s" in run.error.message
    assert stage_states(run) == {"first": "SUCCEEDED", "wait": "FAILED"}
    assert {task_state(t) for t in tasks(host, run.id, stage="wait")} == {"CANCELLED"}
    saw_cancel(host, flow, tags)


def test_stage_max_time_exhausted(host: HostProcess, flow: str) -> None:
    """A stage's own max_time stops the run the same way, naming the stage."""
    tags, steps = holds(1)
    run = run_to_end(
        host,
        f"""\
name: slow-stage
stages:
  - {{name: first, agent: flow, action: step, inputs: [1]}}
  - {{name: wait, agent: flow, action: step, inputs: {steps}, budget: {{max_time: 1s}}}}
  - {{name: never, agent: flow, action: echo}}
""",
    )
    assert state(run) == "PARTIAL"
    assert "stage 'wait' budget max_time=1s" in run.error.message
    assert stage_states(run) == {"first": "SUCCEEDED", "wait": "FAILED", "never": "CANCELLED"}
    saw_cancel(host, flow, tags)


def test_max_cost_exhausted(host: HostProcess, flow: str) -> None:
    """Once the reported costs reach max_cost with work remaining, the running tasks are cancelled."""
    tags, steps = holds(2)
    inputs = json.dumps(
        [json.loads(steps)[0], {"cost": 0.5, "after_holds": 2}, json.loads(steps)[1]]
    )
    run = run_to_end(
        host,
        f"""\
name: out-of-money
budget: {{max_cost: 0.5}}
stages:
  - {{name: spend, agent: flow, action: step, inputs: {inputs}, parallel: true}}
  - {{name: never, agent: flow, action: echo}}
""",
    )
    assert state(run) == "PARTIAL"
    assert run.error.code == "budget_exceeded" and "max_cost=0.5" in run.error.message
    assert run.usage.cost == 0.5
    states = [task_state(t) for t in tasks(host, run.id, stage="spend")]
    assert states == ["CANCELLED", "SUCCEEDED", "CANCELLED"]
    assert stage_states(run)["never"] == "CANCELLED"
    saw_cancel(host, flow, tags)


def test_task_over_what_is_left_of_max_cost(host: HostProcess, flow: str) -> None:
    """A task gets what is left of max_cost as its own budget; reporting more fails it and stops the run."""
    run = run_to_end(
        host,
        """\
name: overspend
budget: {max_cost: 1.0}
stages:
  - {name: spend, agent: flow, action: step, inputs: [{cost: 0.75}, {cost: 0.75}, {cost: 0.1}]}
""",
    )
    assert state(run) == "PARTIAL"
    assert run.error.code == "budget_exceeded"
    assert [task_state(t) for t in tasks(host, run.id)] == ["SUCCEEDED", "FAILED", "CANCELLED"]
    assert tasks(host, run.id)[1].output.error.code == "budget_exceeded"


def test_max_tasks_exhausted(host: HostProcess, flow: str) -> None:
    """A task that would start past max_tasks stops the run; the running ones are cancelled."""
    tags, steps = holds(1)
    inputs = json.dumps([*json.loads(steps), {"after_holds": 1}, 3, 4])
    run = run_to_end(
        host,
        f"""\
name: too-many
budget: {{max_tasks: 3}}
stages:
  - {{name: first, agent: flow, action: step, inputs: [1]}}
  - {{name: more, agent: flow, action: step, inputs: {inputs}, parallel: true, max_concurrency: 2}}
""",
    )
    assert state(run) == "PARTIAL"
    assert run.error.code == "budget_exceeded" and "max_tasks=3" in run.error.message
    assert run.usage.tasks == 3
    assert [task_state(t) for t in tasks(host, run.id, stage="more")] == [
        "CANCELLED",
        "SUCCEEDED",
        "CANCELLED",
        "CANCELLED",
    ]
    saw_cancel(host, flow, tags)


def test_budget_exhausted_before_anything_finished(host: HostProcess, flow: str) -> None:
    """A budget that runs out before any task succeeded ends the run FAILED."""
    tags, steps = holds(1)
    run = run_to_end(
        host,
        f"""\
name: nothing-done
stages:
  - {{name: wait, agent: flow, action: step, inputs: {steps}, budget: {{max_time: 1s}}}}
""",
    )
    assert state(run) == "FAILED" and run.error.code == "budget_exceeded"
    saw_cancel(host, flow, tags)


def test_tasks_inherit_what_is_left(host: HostProcess, flow: str) -> None:
    """Each task's budget is what is left of the run's and its stage's: cost, tasks and a deadline."""
    run = run_to_end(
        host,
        """\
name: inherit
budget: {max_cost: 1.0, max_tasks: 10, max_time: 1m}
stages:
  - {name: spend, agent: flow, action: step, inputs: [{cost: 0.25}]}
  - {name: look, agent: flow, action: context, budget: {max_cost: 0.5, max_iterations: 7}}
""",
    )
    assert state(run) == "SUCCEEDED", run.error
    seen = value(run.result)
    assert seen["budget"] == {"max_cost": 0.5, "max_iterations": 7}
    assert seen["has_deadline"] is True
    run = run_to_end(
        host,
        """\
name: inherit-run
budget: {max_cost: 1.0}
stages:
  - {name: spend, agent: flow, action: step, inputs: [{cost: 0.25}]}
  - {name: look, agent: flow, action: context}
""",
    )
    assert value(run.result)["budget"] == {"max_cost": 0.75}
    assert value(run.result)["has_deadline"] is False


def test_cancel_run(host: HostProcess, flow: str) -> None:
    """CancelRun returns at once; running tasks get a cancel frame; the run ends CANCELLED with the
    reason and what had finished; cancelling again is a no-op."""
    tags, steps = holds(3)
    run = create(
        host,
        f"""\
name: to-cancel
stages:
  - {{name: first, agent: flow, action: step, inputs: [1]}}
  - {{name: wait, agent: flow, action: step, inputs: {steps}, parallel: true}}
  - {{name: never, agent: flow, action: echo}}
""",
    )
    follow_until(host, run.id, started(3, "wait"))
    logged(host, flow, "holding", tags)
    cancelled = host.workflows.CancelRun(
        workflow_pb2.CancelRunRequest(run_id=run.id, reason="changed my mind"), timeout=10
    ).run
    assert state(cancelled) in ("RUNNING", "CANCELLED")
    ended = wait(host, run.id)
    assert state(ended) == "CANCELLED"
    assert ended.error.code == "cancelled" and ended.error.message == "changed my mind"
    assert stage_states(ended) == {"first": "SUCCEEDED", "wait": "CANCELLED", "never": "CANCELLED"}
    assert ended.tasks.succeeded == 1 and ended.tasks.cancelled == 3
    found = saw_cancel(host, flow, tags)
    assert {f["run_task"] for f in found.values()} == {
        t.task_id for t in tasks(host, run.id, stage="wait")
    }
    again = host.workflows.CancelRun(workflow_pb2.CancelRunRequest(run_id=run.id), timeout=10).run
    assert state(again) == "CANCELLED"
