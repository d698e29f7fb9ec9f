"""Runs as resources: idempotent creation, reading, listing, waiting, and event streams that resume
from a sequence number, also after the run ended."""

from __future__ import annotations

import uuid
from pathlib import Path

import grpc
import pytest
from google.protobuf import duration_pb2

from ether.v1 import workflow_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import details
from tests.support.host import HostProcess
from tests.workflows.runs import (
    create,
    events,
    follow_until,
    kinds,
    run_to_end,
    started,
    state,
    tasks,
    value,
    wait,
)

HOLDING = """\
name: holding
stages:
  - {{name: first, agent: flow, action: step, inputs: [1, 2]}}
  - {{name: wait, agent: flow, action: step, inputs: [{{hold: {tag}}}]}}
"""


def test_create_run_is_idempotent_by_request_id(host: HostProcess, flow: str) -> None:
    """A repeated request_id returns the first run, whatever the spec says; a new one creates a new run."""
    request_id = str(uuid.uuid4())
    first = create(
        host,
        "name: once\nstages:\n  - {name: a, agent: flow, action: echo}\n",
        request_id=request_id,
    )
    again = create(
        host,
        "name: other\nstages:\n  - {name: b, agent: flow, action: echo}\n",
        request_id=request_id,
    )
    assert again.id == first.id and again.name == "once" and again.request_id == request_id
    other = create(
        host,
        "name: once\nstages:\n  - {name: a, agent: flow, action: echo}\n",
        request_id=str(uuid.uuid4()),
    )
    assert other.id != first.id
    assert state(wait(host, first.id)) == "SUCCEEDED"
    assert create(host, "name: x\nstages: []\n", request_id=request_id).id == first.id


def test_create_returns_pending_run_with_parsed_spec(host: HostProcess, flow: str) -> None:
    """CreateRun returns at once, PENDING, with the spec as parsed and the text as given."""
    text = "name: parsed\nbudget: {max_time: 1m30s}\nstages:\n  - {name: a, agent: flow, action: echo, inputs: [1]}\n"
    run = create(host, text)
    assert run.id.startswith("run-") and state(run) == "PENDING"
    assert run.spec_text == text
    assert run.spec.budget.max_time.seconds == 90
    assert [s.name for s in run.stages] == ["a"]
    assert run.creator == "local"
    ended = wait(host, run.id)
    assert state(ended) == "SUCCEEDED" and ended.HasField("ended_at") and ended.usage.tasks == 1
    got = host.workflows.GetRun(workflow_pb2.GetRunRequest(run_id=run.id), timeout=10).run
    assert got.id == run.id and got.last_sequence == ended.last_sequence


def test_resume_events_from_a_sequence_number_after_disconnect(
    host: HostProcess, flow: str
) -> None:
    """A client that drops the stream and reconnects with its last sequence gets every later event
    exactly once, the live ones included, and the stream ends with run_completed."""
    tag = f"resume-{uuid.uuid4().hex[:8]}"
    run = create(host, HOLDING.format(tag=tag))
    first_part = follow_until(host, run.id, started(1, "wait"))
    last = first_part[-1].sequence
    host.workflows.CancelRun(workflow_pb2.CancelRunRequest(run_id=run.id), timeout=10)
    rest = events(host, run.id, after=last)
    everything = first_part + rest
    assert [e.sequence for e in everything] == list(range(1, len(everything) + 1))
    assert kinds(everything)[0] == "run_started" and kinds(everything)[-1] == "run_completed"
    assert everything[-1].run_completed.state == workflow_pb2.RUN_STATE_CANCELLED
    assert all(e.run_id == run.id for e in everything)


def test_stream_of_an_ended_run_replays_and_ends(host: HostProcess, flow: str) -> None:
    """After the run ended the stream replays from any point and ends; past the end is OUT_OF_RANGE."""
    run = run_to_end(
        host, "name: replay\nstages:\n  - {name: a, agent: flow, action: echo, inputs: [1, 2, 3]}\n"
    )
    everything = events(host, run.id)
    assert len(everything) == run.last_sequence
    assert events(host, run.id, after=4) == everything[4:]
    assert events(host, run.id, after=run.last_sequence) == []
    with pytest.raises(grpc.RpcError) as error:
        events(host, run.id, after=run.last_sequence + 5)
    assert error.value.code() == grpc.StatusCode.OUT_OF_RANGE
    summary = events(host, run.id, exclude_task_details=True)
    assert {"task_started", "task_completed"} <= set(kinds(summary))


def test_stage_progress_and_task_events_carry_the_task(host: HostProcess, flow: str) -> None:
    """task_started has the task's place and params; task_completed its output; stage events counts."""
    run = run_to_end(
        host, "name: ev\nstages:\n  - {name: a, agent: flow, action: double, inputs: [21]}\n"
    )
    seen = {e.WhichOneof("event"): e for e in events(host, run.id)}
    started_task = seen["task_started"].task_started.task
    assert (
        started_task.stage == "a" and started_task.action == "double" and started_task.attempts == 1
    )
    assert dict(started_task.params) == {"input": 21}
    assert value(seen["task_completed"].task_completed.task.output.data) == {"value": 42}
    assert seen["stage_started"].stage_started.tasks == 1
    # Counted as it moved: none left pending or running once it succeeded, in the stage or run.
    for counts in (seen["stage_completed"].stage_completed.tasks, run.tasks):
        assert (counts.total, counts.succeeded, counts.pending, counts.running) == (1, 1, 0, 0)
    assert seen["run_completed"].run_completed.state == workflow_pb2.RUN_STATE_SUCCEEDED


def test_wait_run_with_timeout_returns_the_run_as_it_is(host: HostProcess, flow: str) -> None:
    """WaitRun with a timeout returns a running run as it is; then the run can still be cancelled."""
    tag = f"wait-{uuid.uuid4().hex[:8]}"
    run = create(host, HOLDING.format(tag=tag))
    follow_until(host, run.id, started(1, "wait"))
    timeout = duration_pb2.Duration(nanos=50_000_000)
    waited = host.workflows.WaitRun(
        workflow_pb2.WaitRunRequest(run_id=run.id, timeout=timeout), timeout=30
    ).run
    assert state(waited) == "RUNNING"
    with pytest.raises(grpc.RpcError) as error:
        host.workflows.WaitRun(workflow_pb2.WaitRunRequest(run_id=run.id), timeout=0.2)
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    host.workflows.CancelRun(workflow_pb2.CancelRunRequest(run_id=run.id), timeout=10)
    assert state(wait(host, run.id)) == "CANCELLED"
    with pytest.raises(grpc.RpcError) as error:
        host.workflows.ResumeRun(workflow_pb2.ResumeRunRequest(run_id=run.id), timeout=10)
    assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_list_runs_pages_and_filters(host: HostProcess, flow: str) -> None:
    """ListRuns is newest first, pages with tokens, and filters by state and name."""
    name = f"listed-{uuid.uuid4().hex[:6]}"
    ids = [
        run_to_end(host, f"name: {name}\nstages:\n  - {{name: a, agent: flow, action: echo}}\n").id
        for _ in range(3)
    ]
    failed = run_to_end(
        host, f"name: {name}\nstages:\n  - {{name: a, agent: flow, action: fail}}\n"
    ).id
    page = host.workflows.ListRuns(workflow_pb2.ListRunsRequest(name=name, page_size=2), timeout=10)
    assert [r.id for r in page.runs] == [failed, ids[2]] and page.next_page_token
    rest = host.workflows.ListRuns(
        workflow_pb2.ListRunsRequest(name=name, page_size=2, page_token=page.next_page_token),
        timeout=10,
    )
    assert [r.id for r in rest.runs] == [ids[1], ids[0]] and not rest.next_page_token
    only_failed = host.workflows.ListRuns(
        workflow_pb2.ListRunsRequest(name=name, states=[workflow_pb2.RUN_STATE_FAILED]), timeout=10
    )
    assert [r.id for r in only_failed.runs] == [failed]
    assert only_failed.runs[0].spec.stages[0].action == "fail"
    with pytest.raises(grpc.RpcError) as error:
        host.workflows.ListRuns(workflow_pb2.ListRunsRequest(page_token="nope"), timeout=10)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_list_run_tasks_filters_by_stage_and_state(host: HostProcess, flow: str) -> None:
    """ListRunTasks pages in creation order and filters; an unknown stage or run is NOT_FOUND."""
    run = run_to_end(
        host,
        """\
name: listing
stages:
  - {name: a, agent: flow, action: double, inputs: [1, 2, 3, 4, 5]}
  - {name: b, agent: flow, action: fail, on_failure: continue}
""",
    )
    assert len(tasks(host, run.id)) == 6
    first = host.workflows.ListRunTasks(
        workflow_pb2.ListRunTasksRequest(run_id=run.id, stage="a", page_size=2), timeout=10
    )
    assert [t.input_index for t in first.tasks] == [0, 1] and first.next_page_token
    failed = tasks(host, run.id, state=workflow_pb2.RUN_TASK_STATE_FAILED)
    assert [t.stage for t in failed] == ["b"] and failed[0].output.error.code == "broken"
    with pytest.raises(grpc.RpcError) as error:
        tasks(host, run.id, stage="zzz")
    assert error.value.code() == grpc.StatusCode.NOT_FOUND


def test_unknown_run_is_not_found(host: HostProcess, flow: str) -> None:
    """Every run RPC answers NOT_FOUND with ResourceInfo for an unknown run id."""
    calls = [
        lambda: host.workflows.GetRun(
            workflow_pb2.GetRunRequest(run_id="run-0000000000000000"), timeout=10
        ),
        lambda: host.workflows.CancelRun(
            workflow_pb2.CancelRunRequest(run_id="run-0000000000000000"), timeout=10
        ),
        lambda: host.workflows.WaitRun(
            workflow_pb2.WaitRunRequest(run_id="run-0000000000000000"), timeout=10
        ),
        lambda: events(host, "run-0000000000000000"),
        lambda: host.workflows.GetRunReport(
            workflow_pb2.GetRunReportRequest(
                run_id="run-0000000000000000", format=workflow_pb2.REPORT_FORMAT_JSON
            ),
            timeout=10,
        ),
    ]
    for call in calls:
        with pytest.raises(grpc.RpcError) as error:
            call()
        assert error.value.code() == grpc.StatusCode.NOT_FOUND
        assert details(error.value)["ResourceInfo"].resource_name == "run-0000000000000000"


def test_report_needs_a_format(host: HostProcess, flow: str) -> None:
    """GetRunReport with no format is INVALID_ARGUMENT."""
    run = run_to_end(host, "name: fmt\nstages:\n  - {name: a, agent: flow, action: echo}\n")
    with pytest.raises(grpc.RpcError) as error:
        host.workflows.GetRunReport(workflow_pb2.GetRunReportRequest(run_id=run.id), timeout=10)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_too_many_active_runs(tmp_path: Path) -> None:
    """Past [workflows] max_active_runs, CreateRun is RESOURCE_EXHAUSTED with RetryInfo."""
    config = tmp_path / "ether.toml"
    config.write_text("[workflows]\nmax_active_runs = 1\n")
    own = HostProcess(tmp_path / "state", "--config", str(config))
    try:
        own.wait_serving()
        deploy(own, AGENTS / "flow")
        tag = f"busy-{uuid.uuid4().hex[:8]}"
        busy = create(own, HOLDING.format(tag=tag))
        with pytest.raises(grpc.RpcError) as error:
            create(own, "name: second\nstages:\n  - {name: a, agent: flow, action: echo}\n")
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        found = details(error.value)
        assert found["RetryInfo"].retry_delay.seconds == 5
        # The quota's subject, limit and setting, as every quota carries them (docs/limits.md).
        assert [v.subject for v in found["QuotaFailure"].violations] == ["host"]
        assert dict(found["ErrorInfo"].metadata) == {"limit": "1", "setting": "max_active_runs"}
        own.workflows.CancelRun(workflow_pb2.CancelRunRequest(run_id=busy.id), timeout=10)
        assert state(wait(own, busy.id)) == "CANCELLED"
        assert state(
            run_to_end(own, "name: third\nstages:\n  - {name: a, agent: flow, action: echo}\n")
        ) == ("SUCCEEDED")
    finally:
        own.stop()
