"""Edges of docs/workflows.md that no other test in tests/workflows held, each seen as a user
sees it: a real host, the `flow` test agent (tests/agents/flow), gRPC clients.

- "Runs as resources": `stage_progress` comes "at most every 100 ms per stage".
- "Settings and limits": the run's `max_concurrency` defaults to 64.
- "Budgets": `max_tasks` exactly at the budget (run and stage, across stages) and one over;
  `max_cost` reached exactly, with and without work remaining; a stage's `max_time` "runs from
  the ... stage's start"; what the run's error and its reports say then. A stage's own
  `max_cost` reached exactly by its last task leaves later stages alone (it halted the
  whole run before: a fault, mended).
- "A spec" (Conditions, Stage data): `when` reads stage data as later stages do (only succeeded
  tasks, in input order; `*` paths; a missing path and a skipped stage's data are null; values
  of different kinds compare false).
- "Reports": a report "renders a run, finished or not": running, cancelled and failed runs, in
  JSON and Markdown.
- "Persistence, restarts and resume": only unfinished non-idempotent tasks "that had started"
  fail `interrupted` on resume; `include_non_idempotent` runs them again, as `run_resumed`
  counts.
"""

from __future__ import annotations

import itertools
import json
import uuid
from pathlib import Path
from typing import Any

from ether.v1 import workflow_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.host import HostProcess
from tests.workflows.runs import (
    create,
    events,
    follow_until,
    kinds,
    logged,
    report,
    run_to_end,
    stage_states,
    started,
    state,
    task_state,
    tasks,
    value,
    wait,
)
from tests.workflows.test_restart import flow_back, gated, holding, restart

JSON, MARKDOWN = workflow_pb2.REPORT_FORMAT_JSON, workflow_pb2.REPORT_FORMAT_MARKDOWN


def json_report(host: HostProcess, run_id: str) -> dict[str, Any]:
    return json.loads(report(host, run_id, JSON).content)  # type: ignore[no-any-return]


def markdown_report(host: HostProcess, run_id: str) -> str:
    return str(report(host, run_id, MARKDOWN).content)


def summary_row(run_id: str, run_state: str, *counts: object) -> str:
    """The Markdown summary table's row: run, state, tasks, succeeded, failed, cancelled, cost."""
    return f"| `{run_id}` | **{run_state}** | " + " | ".join(str(c) for c in counts) + " |"


def test_stage_progress_comes_at_most_every_100_ms_per_stage(host: HostProcess, flow: str) -> None:
    """ "`stage_progress` (at most every 100 ms per stage)": a map stage of 3,000 quick tasks
    ends thousands of tasks, yet its stage_progress events, read in order, are at least 100 ms
    apart by their own timestamps (10 ms allowed for the two clocks the host reads), and each
    carries counts that only grow."""
    run = run_to_end(
        host,
        "name: progress-rate\nstages:\n"
        f"  - {{name: map, agent: flow, action: double, inputs: {list(range(3000))}, "
        "parallel: true, max_concurrency: 50}\n"
        "  - {name: one, agent: flow, action: echo}\n",
    )
    assert state(run) == "SUCCEEDED", run.error
    seen = events(host, run.id, exclude_task_details=True)
    by_stage: dict[str, list[workflow_pb2.StreamRunEventsResponse]] = {}
    for event in seen:
        if event.WhichOneof("event") == "stage_progress":
            by_stage.setdefault(event.stage_progress.stage, []).append(event)
    assert set(by_stage) == {"map", "one"}, kinds(seen)
    progress = by_stage["map"]
    times = [e.time.ToNanoseconds() / 1e9 for e in progress]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    # 10 ms allowed: the host throttles by its monotonic clock and stamps events by the wall
    # clock, a moment later (more when the machine is busy)
    assert all(gap >= 0.09 for gap in gaps), sorted(gaps)[:5]
    done = [e.stage_progress.tasks.succeeded for e in progress]
    assert done == sorted(done) and done[0] >= 1 and done[-1] <= 3000


def test_a_run_runs_64_tasks_at_once_by_default(host: HostProcess) -> None:
    """ "`max_concurrency` of the run (default 64)": a spec without one shows 64, and a parallel
    stage allowing 100 of 70 holding tasks starts 64 of them and no more, while an agent of two
    replicas (128 task slots) could take them all. Every one of the 64 has logged "holding"
    before the run is cancelled: all of a batch's starts are recorded before any task's log."""
    agent = deploy(host, AGENTS / "flow", name=f"flow-{uuid.uuid4().hex[:6]}", replicas=2)
    holds = json.dumps([{"hold": f"run-cap-{i}"} for i in range(70)])
    run = create(
        host,
        f"name: run-cap\nstages:\n  - {{name: s, agent: {agent}, action: step, parallel: true, "
        f"max_concurrency: 100, inputs: {holds}}}\n",
    )
    assert run.spec.max_concurrency == 64
    follow_until(
        host,
        run.id,
        lambda s: (
            sum(
                1
                for e in s
                if e.WhichOneof("event") == "task_progress"
                and e.task_progress.log.message == "holding"
            )
            == 64
        ),
    )
    host.workflows.CancelRun(workflow_pb2.CancelRunRequest(run_id=run.id), timeout=10)
    ended = wait(host, run.id)
    assert state(ended) == "CANCELLED"
    assert kinds(events(host, run.id)).count("task_started") == 64
    assert ended.usage.tasks == 64 and ended.tasks.cancelled == 70


def test_max_tasks_exactly_at_the_budget_and_one_over(host: HostProcess, flow: str) -> None:
    """ "`max_tasks` counts task starts ...; a task that would start past it stops the run": the
    run's max_tasks counts across stages and a stage's only its own, so exactly as many tasks
    as either allows run to SUCCEEDED; one more stops the run PARTIAL, `budget_exceeded`,
    naming the budget, the task never started CANCELLED; the reports say the same."""
    at = run_to_end(
        host,
        """\
name: tasks-at-budget
budget: {max_tasks: 5}
stages:
  - {name: a, agent: flow, action: echo, inputs: [1, 2, 3]}
  - {name: b, agent: flow, action: echo, inputs: [4, 5], budget: {max_tasks: 2}}
""",
    )
    assert state(at) == "SUCCEEDED", at.error
    assert at.usage.tasks == 5 and not at.HasField("error")

    cases = {
        "run budget max_tasks=5 used up: 5 task(s) started": (
            "budget: {max_tasks: 5}",
            "",
            "[4, 5, 6]",
        ),
        "stage 'b' budget max_tasks=2 used up: 2 task(s) started": (
            "",
            ", budget: {max_tasks: 2}",
            "[4, 5, 6]",
        ),
    }
    for message, (run_budget, stage_budget, inputs) in cases.items():
        over = run_to_end(
            host,
            f"name: tasks-over\n{run_budget}\nstages:\n"
            "  - {name: a, agent: flow, action: echo, inputs: [1, 2, 3]}\n"
            f"  - {{name: b, agent: flow, action: echo, inputs: {inputs}{stage_budget}}}\n"
            "  - {name: c, agent: flow, action: echo}\n",
        )
        assert state(over) == "PARTIAL", over.error
        assert (over.error.code, over.error.message) == ("budget_exceeded", message)
        assert stage_states(over) == {"a": "SUCCEEDED", "b": "FAILED", "c": "CANCELLED"}
        last = tasks(host, over.id, stage="b")[-1]
        assert task_state(last) == "CANCELLED" and last.attempts == 0
        document = json_report(host, over.id)
        assert document["run"]["error"]["message"] == message
        assert document["summary"]["state"] == "PARTIAL"
        assert document["summary"]["tasks_started"] == over.usage.tasks
        assert document["summary"]["tasks"]["cancelled"] == 1
        markdown = markdown_report(host, over.id)
        assert f"**PARTIAL:** `budget_exceeded`: {message}" in markdown
        assert summary_row(over.id, "PARTIAL", 6, 5, 0, 1, 0) in markdown


def test_max_cost_reached_exactly(host: HostProcess, flow: str) -> None:
    """ "A task gets what is left as its own `max_cost` (a task reporting more fails ...); once
    the sum reaches the limit with work remaining, the run stops": a last task reporting
    exactly what is left succeeds and the run SUCCEEDED at cost 1.0; with a stage still to
    come, the same sum stops the run PARTIAL, `budget_exceeded` naming the budget, the later
    stage never run."""
    spend = "  - {name: spend, agent: flow, action: step, inputs: [{cost: 0.25}, {cost: 0.75}]}\n"
    at = run_to_end(host, f"name: cost-at\nbudget: {{max_cost: 1.0}}\nstages:\n{spend}")
    assert state(at) == "SUCCEEDED", at.error
    assert at.usage.cost == 1.0 and [t.output.metadata.cost for t in tasks(host, at.id)] == [
        0.25,
        0.75,
    ]
    assert json_report(host, at.id)["summary"]["total_cost"] == 1.0

    more = run_to_end(
        host,
        f"name: cost-then-more\nbudget: {{max_cost: 1.0}}\nstages:\n{spend}"
        "  - {name: after, agent: flow, action: echo}\n",
    )
    assert state(more) == "PARTIAL", more.error
    message = "run budget max_cost=1 used up: spent 1"
    assert (more.error.code, more.error.message) == ("budget_exceeded", message)
    assert stage_states(more)["after"] == "CANCELLED"
    assert [task_state(t) for t in tasks(host, more.id)] == ["SUCCEEDED", "SUCCEEDED"]
    assert f"**PARTIAL:** `budget_exceeded`: {message}" in markdown_report(host, more.id)


def test_a_stage_max_cost_reached_exactly_leaves_later_stages_alone(
    host: HostProcess, flow: str
) -> None:
    """A stage's budget bounds its own tasks ("a task's `TaskContext.budget` is the minimum of
    what remains of the run's and its stage's budgets": a later stage's tasks get nothing of
    it), and `max_cost` stops the run once "the sum reaches the limit with work remaining": a
    stage whose last task brings its sum exactly to its max_cost has no work left, so it
    SUCCEEDED and the next stage runs, as with a stage's max_tasks reached exactly."""
    spend = (
        "  - {name: spend, agent: flow, action: step, inputs: [{cost: 0.25}, {cost: 0.75}],"
        " budget: {max_cost: 1.0}}\n"
    )
    tasks_at = run_to_end(
        host,
        "name: stage-tasks-at\nstages:\n"
        "  - {name: spend, agent: flow, action: echo, inputs: [1, 2], budget: {max_tasks: 2}}\n"
        "  - {name: after, agent: flow, action: echo}\n",
    )
    assert stage_states(tasks_at) == {"spend": "SUCCEEDED", "after": "SUCCEEDED"}
    cost_at = run_to_end(
        host,
        f"name: stage-cost-at\nstages:\n{spend}  - {{name: after, agent: flow, action: echo}}\n",
    )
    assert [task_state(t) for t in tasks(host, cost_at.id, stage="spend")] == ["SUCCEEDED"] * 2
    assert stage_states(cost_at) == {"spend": "SUCCEEDED", "after": "SUCCEEDED"}, cost_at.error
    assert state(cost_at) == "SUCCEEDED"


def test_a_stage_max_time_runs_from_the_stage_start(host: HostProcess, flow: str) -> None:
    """ "`max_time` runs from the run's (or stage's) start": a first stage that takes 1.5 s (a
    hold ended by its `task_timeout`, under `on_failure: continue`) does not use up the next
    stage's 1 s: that stage's task succeeds, and the run ends PARTIAL for the failed task only,
    not `budget_exceeded`."""
    tag = f"slow-{uuid.uuid4().hex[:8]}"
    run = run_to_end(
        host,
        f"""\
name: stage-clock
stages:
  - {{name: slow, agent: flow, action: hold, params: {{tag: {tag}}}, task_timeout: 1.5s,
     on_failure: continue}}
  - {{name: quick, agent: flow, action: echo, params: {{ok: true}}, budget: {{max_time: 1s}}}}
""",
    )
    assert stage_states(run) == {"slow": "PARTIAL", "quick": "SUCCEEDED"}, run.error
    assert state(run) == "PARTIAL" and run.error.code == "tasks_failed", run.error
    assert value(run.result) == {"ok": True}


def test_when_reads_stage_data_as_later_stages_do(host: HostProcess, flow: str) -> None:
    """Conditions read `<stage>.data[.path]`, the stage data of "Stage data": of a PARTIAL map
    stage only its succeeded tasks' data, in input order (also through `*`); a missing path is
    null and so is a skipped stage's data; comparing different kinds is false, not an error
    (a boolean is not 1)."""
    run = run_to_end(
        host,
        """\
name: when-data
stages:
  - name: work
    agent: flow
    inputs: [1, 2]
    on_failure: continue
    map: [{action: double}, {action: fail}]
  - {name: flag, agent: flow, action: echo, params: {enabled: true, n: 1}}
  - name: counted
    agent: flow
    action: echo
    params: {ran: counted}
    when: "work.status == PARTIAL and len(work.data) == 2 and work.data.*.value == [2, 4]"
  - {name: kinds, agent: flow, action: echo, when: "flag.data.enabled == 1 or flag.data.n == true"}
  - name: missing
    agent: flow
    action: echo
    params: {ran: missing}
    when: "flag.data.nothing.deeper == null and kinds.data == null and kinds.status == SKIPPED"
""",
    )
    assert stage_states(run) == {
        "work": "PARTIAL",
        "flag": "SUCCEEDED",
        "counted": "SUCCEEDED",
        "kinds": "SKIPPED",
        "missing": "SUCCEEDED",
    }
    assert state(run) == "PARTIAL" and value(run.result) == {"ran": "missing"}


def test_reports_of_a_running_then_cancelled_run(host: HostProcess, flow: str) -> None:
    """ "`GetRunReport` ... renders a run, finished or not": while two tasks hold, both reports
    show the run RUNNING with what finished (a task's cost and model in JSON); once cancelled,
    they show CANCELLED with the reason as the run's error, the counts, a later stage "not
    run", the total cost and tasks started, and no result."""
    tags = [f"report-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    run = create(
        host,
        f"""\
name: report-cancel
stages:
  - {{name: pay, agent: flow, action: charge, params: {{cost: 0.25}}}}
  - {{name: wait, agent: flow, action: step, parallel: true,
     inputs: [{{hold: {tags[0]}}}, {{hold: {tags[1]}}}]}}
  - {{name: never, agent: flow, action: echo}}
""",
    )
    follow_until(host, run.id, started(2, "wait"))
    logged(host, flow, "holding", set(tags))
    live = json_report(host, run.id)
    assert live["summary"]["state"] == "RUNNING"
    assert [(s["name"], s["state"]) for s in live["stages"]] == [
        ("pay", "SUCCEEDED"),
        ("wait", "RUNNING"),
        ("never", "PENDING"),
    ]
    assert {k: live["summary"]["tasks"][k] for k in ("succeeded", "running")} == {
        "succeeded": 1,
        "running": 2,
    }
    paid = live["tasks"][0]
    assert (paid["status"], paid["cost"], paid["model"], paid["attempts"]) == (
        "SUCCESS",
        0.25,
        "flow-model",
        1,
    )
    assert [t["state"] for t in live["tasks"][1:]] == ["RUNNING", "RUNNING"]
    assert summary_row(run.id, "RUNNING", 3, 1, 0, 0, 0.25) in markdown_report(host, run.id)

    reason = "enough for today"
    host.workflows.CancelRun(
        workflow_pb2.CancelRunRequest(run_id=run.id, reason=reason), timeout=10
    )
    assert state(wait(host, run.id)) == "CANCELLED"
    document = json_report(host, run.id)
    assert document["run"]["state"] == document["summary"]["state"] == "CANCELLED"
    assert document["run"]["error"]["code"] == "cancelled"
    assert document["run"]["error"]["message"] == reason
    summary = document["summary"]
    assert (summary["tasks"]["succeeded"], summary["tasks"]["cancelled"]) == (1, 2)
    assert (summary["total_cost"], summary["tasks_started"]) == (0.25, 3)
    never = document["stages"][2]
    assert never["state"] == "CANCELLED" and never["error"]["message"] == f"not run: {reason}"
    assert [t["state"] for t in document["tasks"]] == ["SUCCEEDED", "CANCELLED", "CANCELLED"]
    assert document["result"] is None
    markdown = markdown_report(host, run.id)
    assert summary_row(run.id, "CANCELLED", 3, 1, 0, 2, 0.25) in markdown
    assert f"**CANCELLED:** `cancelled`: {reason}" in markdown
    assert f"| never | CANCELLED | 0 | 0 | 0 | 0 | 0 | 0.000 s | not run: {reason} |" in markdown
    assert "## Result" not in markdown


def test_reports_of_a_failed_run(host: HostProcess, flow: str) -> None:
    """A run FAILED under `on_failure: stop`: the JSON report's run error is `stage_failed`
    naming the task, `errors` holds the task's error with the agent's traceback, and there is
    no result; the Markdown report says FAILED with the same error, lists it under Errors with
    the traceback, and has no Result section."""
    run = run_to_end(
        host,
        """\
name: report-failed
stages:
  - {name: ok, agent: flow, action: echo, params: {fine: true}}
  - {name: boom, agent: flow, action: explode, params: {input: 7}}
  - {name: never, agent: flow, action: echo}
""",
    )
    assert state(run) == "FAILED" and run.error.code == "stage_failed", run.error
    (failed,) = tasks(host, run.id, stage="boom")
    assert failed.task_id in run.error.message
    document = json_report(host, run.id)
    assert document["summary"]["state"] == "FAILED"
    assert document["run"]["error"]["message"] == run.error.message
    (error,) = document["errors"]
    assert (error["task_id"], error["stage"], error["state"]) == (failed.task_id, "boom", "FAILED")
    assert "ZeroDivisionError" in error["traceback"]
    assert document["result"] is None
    assert [s["state"] for s in document["stages"]] == ["SUCCEEDED", "FAILED", "CANCELLED"]
    markdown = markdown_report(host, run.id)
    assert summary_row(run.id, "FAILED", 2, 1, 1, 0, 0) in markdown
    assert f"**FAILED:** `stage_failed`: {run.error.message}" in markdown
    errors = markdown.split("## Errors", 1)[1]
    assert failed.task_id in errors and "ZeroDivisionError" in errors
    assert "## Result" not in markdown


def test_resume_fails_only_started_non_idempotent_tasks_unless_asked(tmp_path: Path) -> None:
    """ResumeRun: "unfinished non-idempotent tasks that had started are recorded as failed with
    code `interrupted` — unless `include_non_idempotent` is set". Two runs cut by one restart:
    in a serial stage of two non-idempotent gates, the one holding fails `interrupted` and the
    one that never started runs (run_resumed: 0 rerun, 1 failed); resumed with
    include_non_idempotent, the other run's holding non-idempotent gate runs again (2 rerun,
    0 failed)."""
    first = HostProcess(tmp_path / "state", shared=(tmp_path,))
    second: HostProcess | None = None
    try:
        first.wait_serving()
        deploy(first, AGENTS / "flow")
        serial_marker = tmp_path / "serial"
        (tmp_path / "serial.b").write_text("passed before\n")  # the second gate passes at once
        serial = create(
            first,
            f"""\
name: serial-gates
stages:
  - name: wait
    agent: flow
    inputs: [{json.dumps(str(serial_marker))}]
    input_param: marker
    on_failure: continue
    map: [{{action: gate_once, params: {{suffix: .a}}}}, {{action: gate_once, params: {{suffix: .b}}}}]
""",
        )
        follow_until(first, serial.id, started(1, "wait"))
        logged(first, "flow", "gate waiting", {f"{serial_marker}.a"})
        both = create(first, gated(tmp_path / "both"))
        holding(first, both.id, tmp_path / "both")
        second = restart(first)
        flow_back(second)

        second.workflows.ResumeRun(workflow_pb2.ResumeRunRequest(run_id=serial.id), timeout=10)
        ended = wait(second, serial.id)
        assert state(ended) == "PARTIAL", ended.error
        held, never_started = tasks(second, serial.id)
        assert task_state(held) == "FAILED" and held.output.error.code == "interrupted"
        assert task_state(never_started) == "SUCCEEDED" and never_started.attempts == 1
        resumed = next(e for e in events(second, serial.id) if e.HasField("run_resumed"))
        assert (resumed.run_resumed.tasks_rerun, resumed.run_resumed.tasks_failed) == (0, 1)

        second.workflows.ResumeRun(
            workflow_pb2.ResumeRunRequest(run_id=both.id, include_non_idempotent=True), timeout=10
        )
        assert state(wait(second, both.id)) == "SUCCEEDED"
        gates = {t.action: t for t in tasks(second, both.id, stage="wait")}
        assert gates["gate_once"].attempts == 2 and task_state(gates["gate_once"]) == "SUCCEEDED"
        resumed = next(e for e in events(second, both.id) if e.HasField("run_resumed"))
        assert (resumed.run_resumed.tasks_rerun, resumed.run_resumed.tasks_failed) == (2, 0)
    finally:
        (first if second is None else second).stop()
