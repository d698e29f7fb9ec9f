"""The run's budget used up exactly as a stage ends, with stages still to come (docs/workflows.md,
"Budgets"), seen as a user sees it: a real host, the `flow` test agent (tests/agents/flow),
whose `step` action reports the `cost` of its input, and gRPC clients.

A stage whose last task brings the run's cost exactly to its `max_cost` ran every task it had
within the budget: it SUCCEEDED and its data is the run's result, and the run stops before the
next stage, which is CANCELLED without starting (that stage was FAILED with no result before: a
fault, mended). The run's `max_tasks` reached exactly by a stage's last task, the analogue,
leaves that stage SUCCEEDED too.
"""

from __future__ import annotations

from tests.support.host import HostProcess
from tests.workflows.runs import (
    events,
    kinds,
    run_to_end,
    stage_states,
    state,
    task_state,
    tasks,
    value,
)

STAGES = (
    "  - {name: first, agent: flow, action: step, inputs: [{cost: 0.25}]}\n"
    "  - {name: spend, agent: flow, action: step, inputs: [{cost: 0.25}, {cost: 0.5}]}\n"
    "  - {name: after, agent: flow, action: echo}\n"
    "  - {name: last, agent: flow, action: echo}\n"
)
SPENT = [{"spent": 0.25}, {"spent": 0.5}]  # the data of the stage `spend`


def test_the_stage_that_spends_the_run_max_cost_exactly_succeeded(
    host: HostProcess, flow: str
) -> None:
    """ "once the sum reaches the limit with work remaining, the run stops": the last task of
    `spend` brings the run's cost to exactly its max_cost, so `spend` ran all its tasks within
    the budget and SUCCEEDED, with no error; the run stops before `after` (CANCELLED, "not run",
    never started, no task made) and `last`; the run ends PARTIAL with `budget_exceeded` naming
    the budget, and its result is `spend`'s data, as a stage that ended before a budget ran
    out gives it."""
    run = run_to_end(
        host, f"name: run-cost-at-stage-end\nbudget: {{max_cost: 1.0}}\nstages:\n{STAGES}"
    )
    message = "run budget max_cost=1 used up: spent 1"
    assert state(run) == "PARTIAL", run.error
    assert (run.error.code, run.error.message) == ("budget_exceeded", message)
    assert stage_states(run) == {
        "first": "SUCCEEDED",
        "spend": "SUCCEEDED",
        "after": "CANCELLED",
        "last": "CANCELLED",
    }
    spend, after = run.stages[1], run.stages[2]
    assert not spend.HasField("error") and spend.tasks.succeeded == 2
    assert (after.error.code, after.error.message) == ("budget_exceeded", f"not run: {message}")
    assert not after.HasField("started_at")
    assert value(run.result) == SPENT
    assert run.usage.cost == 1.0 and run.usage.tasks == 3
    assert [task_state(t) for t in tasks(host, run.id)] == ["SUCCEEDED"] * 3
    seen = events(host, run.id)
    began = [e.stage_started.stage for e in seen if e.WhichOneof("event") == "stage_started"]
    assert began == ["first", "spend"]
    ended = [e.stage_completed.stage for e in seen if e.WhichOneof("event") == "stage_completed"]
    assert ended == ["first", "spend", "after", "last"]
    assert kinds(seen)[-1] == "run_completed"


def test_the_run_max_tasks_analogue(host: HostProcess, flow: str) -> None:
    """The same flow under the run's `max_tasks: 3` instead: `spend`'s last task is the third
    start, so `spend` SUCCEEDED, and the run ends PARTIAL, `budget_exceeded`, with `spend`'s data
    as the result, as under max_cost. What differs is the next stage: "a task that would start
    past it stops the run", so `after` starts and its task, refused, is CANCELLED unstarted;
    `after` ends FAILED."""
    run = run_to_end(
        host, f"name: run-tasks-at-stage-end\nbudget: {{max_tasks: 3}}\nstages:\n{STAGES}"
    )
    message = "run budget max_tasks=3 used up: 3 task(s) started"
    assert state(run) == "PARTIAL", run.error
    assert (run.error.code, run.error.message) == ("budget_exceeded", message)
    assert stage_states(run) == {
        "first": "SUCCEEDED",
        "spend": "SUCCEEDED",
        "after": "FAILED",
        "last": "CANCELLED",
    }
    assert not run.stages[1].HasField("error")
    assert run.stages[2].error.message == message
    (refused,) = tasks(host, run.id, stage="after")
    assert task_state(refused) == "CANCELLED" and refused.attempts == 0
    assert value(run.result) == SPENT
