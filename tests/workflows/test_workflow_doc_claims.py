"""Claims of docs/workflows.md and docs/errors.md that had no test of their own, each seen as a
user sees it: a real host, the `flow` test agent, gRPC clients. Retries that must not happen
(budget exhaustion, cancellation) and retries that count against `max_tasks`; a bad spec's
error kept small; the Markdown report's cut; `exclude_task_details`; an interrupted run that
retention deleted; the ErrorInfo reason of documented WorkflowService errors; OUT_OF_RANGE past
the end of a run that has ended."""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from pathlib import Path

import grpc
import pytest

from ether.v1 import errors_pb2, workflow_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import details
from tests.support.host import HostProcess, sandbox_grants
from tests.workflows.runs import (
    create,
    events,
    follow_until,
    kinds,
    logged,
    map_spec,
    report,
    run_to_end,
    saw_cancel,
    started,
    state,
    task_state,
    tasks,
    wait,
)
from tests.workflows.test_restart import flow_back, gated, holding

RETRY = "retry: {max_attempts: 3, initial_backoff: 10ms}"


def completions(host: HostProcess, run_id: str) -> dict[str, list[str]]:
    """The state of every task_completed event (one per attempt), by task id."""
    seen: dict[str, list[str]] = defaultdict(list)
    for event in events(host, run_id):
        if event.WhichOneof("event") == "task_completed":
            seen[event.task_completed.task.task_id].append(task_state(event.task_completed.task))
    return dict(seen)


def refused(call: object, code: grpc.StatusCode) -> dict[str, object]:
    """Run ``call``, which must fail with ``code``; its google.rpc details."""
    with pytest.raises(grpc.RpcError) as error:
        call()  # type: ignore[operator]
    assert error.value.code() == code, error.value.details()
    return details(error.value)


def test_budget_exhaustion_is_never_retried(host: HostProcess, flow: str) -> None:
    """ "retries failed tasks of actions the agent declared idempotent ...; never ... budget
    exhaustion": a task reporting more cost than is left fails `budget_exceeded` after one
    attempt, though its action is idempotent and the stage retries 3 times."""
    run = run_to_end(
        host,
        f"""\
name: no-retry-over-budget
budget: {{max_cost: 1.0}}
stages:
  - {{name: spend, agent: flow, action: step, inputs: [{{cost: 0.75}}, {{cost: 0.75}}], {RETRY}}}
""",
    )
    over = tasks(host, run.id)[1]
    assert over.attempts == 1
    assert completions(host, run.id)[over.task_id] == ["FAILED"]  # no RETRYING attempt
    assert over.output.error.code == "budget_exceeded"
    assert state(run) == "PARTIAL" and run.error.code == "budget_exceeded", run.error
    assert run.usage.tasks == 2


def test_a_cancelled_task_is_never_retried(host: HostProcess, flow: str) -> None:
    """ "never cancellations": a holding task of a stage that retries 3 times gets its cancel
    frame when the run is cancelled, and ends CANCELLED after that one attempt."""
    tag = f"cancel-{uuid.uuid4().hex[:8]}"
    run = create(
        host,
        f"""\
name: no-retry-of-cancel
stages:
  - {{name: wait, agent: flow, action: step, inputs: [{{hold: {tag}}}], {RETRY}}}
""",
    )
    follow_until(host, run.id, started(1))
    logged(host, flow, "holding", {tag})
    host.workflows.CancelRun(workflow_pb2.CancelRunRequest(run_id=run.id), timeout=10)
    ended = wait(host, run.id)
    assert state(ended) == "CANCELLED"
    saw_cancel(host, flow, {tag})
    (task,) = tasks(host, run.id)
    assert task_state(task) == "CANCELLED" and task.attempts == 1
    assert completions(host, run.id)[task.task_id] == ["CANCELLED"]
    assert ended.usage.tasks == 1


def test_each_retry_counts_against_max_tasks(host: HostProcess, flow: str) -> None:
    """ "Each attempt counts as a task against `max_tasks`" and "a task that would start past it
    stops the run": a failing task retried up to 5 times under `max_tasks: 2` gets 2 attempts,
    then the run ends FAILED with `budget_exceeded` naming max_tasks."""
    run = run_to_end(
        host,
        """\
name: retries-use-max-tasks
budget: {max_tasks: 2}
stages:
  - name: flaky
    agent: flow
    action: fail
    params: {code: transient, retryable: true}
    retry: {max_attempts: 5, initial_backoff: 10ms}
""",
    )
    assert state(run) == "FAILED", run.error
    assert run.error.code == "budget_exceeded" and "max_tasks=2" in run.error.message
    assert run.usage.tasks == 2
    (task,) = tasks(host, run.id)
    assert task.attempts == 2


def test_a_bad_spec_lists_the_first_problems_and_says_how_many_more(
    host: HostProcess, flow: str
) -> None:
    """ "One error lists the first problems, as many as fit in about 3,000 characters (gRPC
    clients refuse error details over 8 KiB), and says how many more there are": 400 stages
    naming an unknown agent are one INVALID_ARGUMENT the client can read, `(and 399 more)`."""
    stages = "".join(f"  - {{name: s{i}, agent: nobody{i}, action: x}}\n" for i in range(400))
    found = refused(
        lambda: create(host, f"name: many\nstages:\n{stages}"), grpc.StatusCode.INVALID_ARGUMENT
    )
    assert found["ErrorInfo"].reason == "INVALID_WORKFLOW"  # type: ignore[attr-defined]
    listed = list(found["BadRequest"].field_violations)  # type: ignore[attr-defined]
    *problems, rest = listed
    assert rest.field == "spec"
    assert rest.description == f"{400 - len(problems)} more problems not listed"
    assert 10 < len(problems) < 400
    assert [v.field for v in problems] == [f"stages[{i}].agent" for i in range(len(problems))]
    # "about 3,000 characters": all but the one that crossed the line fit in 3,000.
    assert sum(len(v.field) + len(v.description) for v in problems[:-1]) <= 3000
    no_runs = host.workflows.ListRuns(workflow_pb2.ListRunsRequest(name="many"), timeout=10)
    assert list(no_runs.runs) == []


def test_markdown_cuts_long_values_json_has_them_whole(host: HostProcess, flow: str) -> None:
    """The Markdown report has "a section per task (long values cut at 4,000 characters: the
    JSON report has them whole)"."""
    text = "a" * 5000 + "THE-END"
    run = run_to_end(
        host,
        f"name: long\nstages:\n  - {{name: say, agent: flow, action: echo, params: {{text: {text}}}}}\n",
    )
    assert state(run) == "SUCCEEDED", run.error
    markdown = report(host, run.id, workflow_pb2.REPORT_FORMAT_MARKDOWN).content
    assert "THE-END" not in markdown and "a" * 3900 in markdown
    assert "more characters in the JSON report" in markdown
    whole = json.loads(report(host, run.id, workflow_pb2.REPORT_FORMAT_JSON).content)
    (task,) = whole["tasks"]
    assert task["params"]["text"] == text and task["data"]["text"] == text


def test_exclude_task_details_leaves_out_task_progress(host: HostProcess, flow: str) -> None:
    """`task_progress` (a task's progress and log frames; "leave them out with
    `exclude_task_details`"): a task's "holding" log line is an event of the run, and not in
    the stream that excludes task details, which still has every other event."""
    tag = f"quiet-{uuid.uuid4().hex[:8]}"
    run = create(
        host,
        f"name: quiet\nstages:\n  - {{name: w, agent: flow, action: hold, params: {{tag: {tag}}}}}\n",
    )
    follow_until(
        host,
        run.id,
        lambda seen: any(
            e.WhichOneof("event") == "task_progress" and e.task_progress.log.message == "holding"
            for e in seen
        ),
    )
    host.workflows.CancelRun(workflow_pb2.CancelRunRequest(run_id=run.id), timeout=10)
    full = events(host, run.id)
    summary = events(host, run.id, exclude_task_details=True)
    assert "task_progress" in kinds(full)
    assert "task_progress" not in kinds(summary)
    assert summary == [e for e in full if e.WhichOneof("event") != "task_progress"]


def test_workflow_errors_carry_their_reason(host: HostProcess, flow: str) -> None:
    """ "always one `ErrorInfo` (domain `ether`, an UPPER_SNAKE `reason` ...)", a value of
    `ether.v1.ErrorReason`: resuming a run that is not interrupted is FAILED_PRECONDITION
    RUN_NOT_INTERRUPTED; an unknown run is NOT_FOUND RUN_NOT_FOUND."""
    run = run_to_end(host, "name: reasons\nstages:\n  - {name: a, agent: flow, action: echo}\n")
    cases = [
        (
            lambda: host.workflows.ResumeRun(
                workflow_pb2.ResumeRunRequest(run_id=run.id), timeout=10
            ),
            grpc.StatusCode.FAILED_PRECONDITION,
            "RUN_NOT_INTERRUPTED",
        ),
        (
            lambda: host.workflows.GetRun(
                workflow_pb2.GetRunRequest(run_id="run-ffffffffffffffff"), timeout=10
            ),
            grpc.StatusCode.NOT_FOUND,
            "RUN_NOT_FOUND",
        ),
    ]
    for call, code, reason in cases:
        info = refused(call, code)["ErrorInfo"]
        assert (info.domain, info.reason) == ("ether", reason)  # type: ignore[attr-defined]
        assert errors_pb2.ErrorReason.Value("ERROR_REASON_" + reason)


def test_past_the_end_of_an_ended_run_is_out_of_range(host: HostProcess, flow: str) -> None:
    """ "after the run ended the stream replays and ends, and a sequence beyond the end is
    `OUT_OF_RANGE`" (reason SEQUENCE_OUT_OF_RANGE), asked as soon as WaitRun says the run
    ended. A big map keeps the run store's writer busy meanwhile, as a busy host's would be."""
    busy = create(host, map_spec("busy-writer", 20000, 500))
    answered_ok = []
    try:
        for _ in range(40):
            run = run_to_end(
                host, "name: past\nstages:\n  - {name: a, agent: flow, action: echo}\n"
            )
            try:
                answered_ok.append(events(host, run.id, after=run.last_sequence + 1))
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.OUT_OF_RANGE, error.details()
                assert details(error)["ErrorInfo"].reason == "SEQUENCE_OUT_OF_RANGE"
    finally:
        try:  # the map may have ended already: it only kept the writer busy meanwhile
            host.workflows.CancelRun(workflow_pb2.CancelRunRequest(run_id=busy.id), timeout=10)
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise
        wait(host, busy.id)
    assert answered_ok == [], f"{len(answered_ok)} of 40 ended runs answered OK, with no event"


def test_an_interrupted_run_past_keep_runs_is_deleted_and_cannot_be_resumed(
    tmp_path: Path,
) -> None:
    """Retention keeps "the newest 1,000 ended runs (... `INTERRUPTED`)"; "An interrupted run can
    be resumed only while it is kept": with `keep_runs = 1`, a run interrupted by a restart is
    deleted once a newer run ends, and ResumeRun is then NOT_FOUND."""
    config = tmp_path / "ether.toml"
    # The test's own --config replaces the default one: grant the marker folder here too.
    config.write_text(sandbox_grants((tmp_path,)) + "[workflows]\nkeep_runs = 1\n")
    first = HostProcess(tmp_path / "state", "--config", str(config))
    second: HostProcess | None = None
    try:
        first.wait_serving()
        deploy(first, AGENTS / "flow")
        run = create(first, gated(tmp_path / "marker"))
        holding(first, run.id, tmp_path / "marker")
        assert first.stop() == 0
        second = HostProcess(tmp_path / "state", "--config", str(config))
        second.wait_serving()
        cut = second.workflows.GetRun(workflow_pb2.GetRunRequest(run_id=run.id), timeout=10).run
        assert state(cut) == "INTERRUPTED"  # the only ended run: kept
        flow_back(second)
        newer = run_to_end(
            second, "name: newer\nstages:\n  - {name: a, agent: flow, action: echo}\n"
        )
        assert state(newer) == "SUCCEEDED"
        second.wait_for_log(lambda r: r.get("event") == "ended runs deleted")
        found = refused(
            lambda: second.workflows.ResumeRun(  # type: ignore[union-attr]
                workflow_pb2.ResumeRunRequest(run_id=run.id), timeout=10
            ),
            grpc.StatusCode.NOT_FOUND,
        )
        assert found["ResourceInfo"].resource_name == run.id  # type: ignore[attr-defined]
        assert found["ErrorInfo"].reason == "RUN_NOT_FOUND"  # type: ignore[attr-defined]
        listed = second.workflows.ListRuns(workflow_pb2.ListRunsRequest(), timeout=10).runs
        assert [r.id for r in listed] == [newer.id]
    finally:
        (second or first).stop()
