"""Persistence: runs, events and results survive a host restart; a run cut short is INTERRUPTED
with what had finished, and ResumeRun continues it, running again only idempotent tasks. The
agents deployed before the restart come back by themselves (docs/agents.md)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from ether.v1 import supervisor_pb2, workflow_pb2
from tests.support.agents import AGENTS, deploy, watch_until
from tests.support.calls import details
from tests.support.host import ETHER, HostProcess
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


def gated(marker: Path) -> str:
    """A run that holds in stage `wait` until a host restart: `gate` (idempotent) and `gate_once`
    (not idempotent) wait on first sight of their marker file and pass once it exists."""
    return f"""\
name: restartable
stages:
  - {{name: first, agent: flow, action: double, inputs: [1, 2]}}
  - name: wait
    agent: flow
    inputs: [{json.dumps(str(marker))}]
    input_param: marker
    parallel: true
    on_failure: continue
    map:
      - {{action: gate, params: {{suffix: .a}}}}
      - {{action: gate_once, params: {{suffix: .b}}}}
  - {{name: after, agent: flow, action: total, input_from: first.data.*.value, reduce: true}}
"""


def holding(
    host: HostProcess, run_id: str, marker: Path
) -> list[workflow_pb2.StreamRunEventsResponse]:
    """Wait until both gates of the run hold (the agent logged it); the events seen by then."""
    seen = follow_until(host, run_id, started(2, "wait"))
    logged(host, "flow", "gate waiting", {f"{marker}.a", f"{marker}.b"})
    return seen


def flow_back(host: HostProcess) -> None:
    """Wait until the restarted host runs `flow` again (deployed before the restart)."""
    watch_until(host, "flow", {"RUNNING"})


def restart(host: HostProcess, *, kill: bool = False) -> HostProcess:
    """Stop (or SIGKILL) the host and start a new one on the same state directory."""
    if kill:
        host.process.kill()
        host.process.wait()
        host.stop()
    else:
        assert host.stop() == 0
    again = HostProcess(host.state_dir, shared=host.shared)
    again.wait_serving()
    return again


def test_restart_mid_run_interrupts_and_resume_continues(tmp_path: Path) -> None:
    """A graceful stop ends a running run INTERRUPTED; after the restart the finished run and the
    interrupted one are readable with their events and reports; ResumeRun needs the agents (an
    agent removed after the restart is FAILED_PRECONDITION until deployed again), reruns the
    idempotent task, fails the other with "interrupted", and sequence numbers continue."""
    first = HostProcess(tmp_path / "state", shared=(tmp_path,))
    second: HostProcess | None = None
    try:
        first.wait_serving()
        deploy(first, AGENTS / "flow")
        finished = run_to_end(
            first, "name: done\nstages:\n  - {name: a, agent: flow, action: double, inputs: [5]}\n"
        )
        run = create(first, gated(tmp_path / "marker"))
        before = holding(first, run.id, tmp_path / "marker")
        second = restart(first)

        old = second.workflows.GetRun(
            workflow_pb2.GetRunRequest(run_id=finished.id), timeout=10
        ).run
        assert state(old) == "SUCCEEDED" and value(old.result) == [{"value": 10}]
        assert kinds(events(second, finished.id))[-1] == "run_completed"
        assert (
            "**SUCCEEDED**"
            in report(second, finished.id, workflow_pb2.REPORT_FORMAT_MARKDOWN).content
        )

        cut = second.workflows.GetRun(workflow_pb2.GetRunRequest(run_id=run.id), timeout=10).run
        assert state(cut) == "INTERRUPTED" and cut.error.code == "interrupted"
        assert stage_states(cut)["first"] == "SUCCEEDED"
        assert [task_state(t) for t in tasks(second, run.id)] == [
            "SUCCEEDED",
            "SUCCEEDED",
            "PENDING",
            "PENDING",
        ]
        replay = events(second, run.id)
        assert replay[: len(before)] == before
        assert replay[-1].run_completed.state == workflow_pb2.RUN_STATE_INTERRUPTED
        assert json.loads(report(second, run.id, workflow_pb2.REPORT_FORMAT_JSON).content)[
            "summary"
        ]["state"] == ("INTERRUPTED")

        second.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name="flow"), timeout=60)
        with pytest.raises(grpc.RpcError) as error:
            second.workflows.ResumeRun(workflow_pb2.ResumeRunRequest(run_id=run.id), timeout=10)
        assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert details(error.value)["ResourceInfo"].resource_name == "flow"

        deploy(second, AGENTS / "flow")
        request_id = str(uuid.uuid4())
        resumed = second.workflows.ResumeRun(
            workflow_pb2.ResumeRunRequest(run_id=run.id, request_id=request_id), timeout=10
        ).run
        assert resumed.resume_count == 1
        ended = wait(second, run.id)
        assert state(ended) == "PARTIAL", ended.error
        assert stage_states(ended) == {
            "first": "SUCCEEDED",
            "wait": "PARTIAL",
            "after": "SUCCEEDED",
        }
        assert value(ended.result) == {"total": 6, "count": 2}
        waited = {t.action: t for t in tasks(second, run.id, stage="wait")}
        assert task_state(waited["gate"]) == "SUCCEEDED" and waited["gate"].attempts == 2
        assert task_state(waited["gate_once"]) == "FAILED"
        assert waited["gate_once"].output.error.code == "interrupted"

        everything = events(second, run.id)
        assert [e.sequence for e in everything] == list(range(1, len(everything) + 1))
        resumed_at = kinds(everything).index("run_resumed")
        assert everything[resumed_at].run_resumed.tasks_rerun == 1
        assert everything[resumed_at].run_resumed.tasks_failed == 1
        again = second.workflows.ResumeRun(
            workflow_pb2.ResumeRunRequest(run_id=run.id, request_id=request_id), timeout=10
        ).run
        assert again.resume_count == 1
    finally:
        (second or first).stop()


def test_killed_host_leaves_runs_interrupted_and_resumable(tmp_path: Path) -> None:
    """After a SIGKILL of the host, the next start marks the run INTERRUPTED (its events end with
    run_completed, without gaps); resuming with include_non_idempotent reruns every unfinished task."""
    first = HostProcess(tmp_path / "state", shared=(tmp_path,))
    second: HostProcess | None = None
    try:
        first.wait_serving()
        deploy(first, AGENTS / "flow")
        run = create(first, gated(tmp_path / "marker"))
        holding(first, run.id, tmp_path / "marker")
        second = restart(first, kill=True)

        cut = second.workflows.GetRun(workflow_pb2.GetRunRequest(run_id=run.id), timeout=10).run
        assert state(cut) == "INTERRUPTED"
        replay = events(second, run.id)
        assert [e.sequence for e in replay] == list(range(1, len(replay) + 1))
        assert replay[-1].run_completed.state == workflow_pb2.RUN_STATE_INTERRUPTED
        listed = second.workflows.ListRuns(
            workflow_pb2.ListRunsRequest(states=[workflow_pb2.RUN_STATE_INTERRUPTED]), timeout=10
        )
        assert [r.id for r in listed.runs] == [run.id]

        flow_back(second)  # deployed by DeployAgent before the kill: no redeploy
        second.workflows.ResumeRun(
            workflow_pb2.ResumeRunRequest(run_id=run.id, include_non_idempotent=True), timeout=10
        )
        ended = wait(second, run.id)
        assert state(ended) == "SUCCEEDED", ended.error
        assert {task_state(t) for t in tasks(second, run.id)} == {"SUCCEEDED"}
    finally:
        (second or first).stop()


def test_a_run_resumes_after_a_restart_with_its_deployed_agent(tmp_path: Path) -> None:
    """An agent deployed with DeployAgent (not from the config) is running again after a
    SIGTERM of the host, with no redeploy: ResumeRun of the interrupted run finds it and the
    run ends with every task done."""
    with interrupted(tmp_path) as (second, run):
        flow_back(second)
        resumed = second.workflows.ResumeRun(
            workflow_pb2.ResumeRunRequest(run_id=run.id, include_non_idempotent=True), timeout=10
        ).run
        assert resumed.resume_count == 1
        ended = wait(second, run.id)
        assert state(ended) == "SUCCEEDED", ended.error
        assert {task_state(t) for t in tasks(second, run.id)} == {"SUCCEEDED"}


@contextlib.contextmanager
def interrupted(tmp_path: Path) -> Iterator[tuple[HostProcess, workflow_pb2.Run]]:
    """A host restarted while a gated run held: the new host and the now INTERRUPTED run."""
    first = HostProcess(tmp_path / "state", shared=(tmp_path,))
    second: HostProcess | None = None
    try:
        first.wait_serving()
        deploy(first, AGENTS / "flow")
        run = create(first, gated(tmp_path / "marker"))
        holding(first, run.id, tmp_path / "marker")
        second = restart(first)
        yield second, run
    finally:
        (second or first).stop()


def test_cancel_an_interrupted_run(tmp_path: Path) -> None:
    """An interrupted run that will not be resumed can be cancelled; it is then final."""
    with interrupted(tmp_path) as (second, run):
        cancelled = second.workflows.CancelRun(
            workflow_pb2.CancelRunRequest(run_id=run.id, reason="abandoned"), timeout=10
        ).run
        assert state(cancelled) == "CANCELLED" and cancelled.error.message == "abandoned"
        assert events(second, run.id)[-1].run_completed.state == workflow_pb2.RUN_STATE_CANCELLED
        with pytest.raises(grpc.RpcError) as error:
            second.workflows.ResumeRun(workflow_pb2.ResumeRunRequest(run_id=run.id), timeout=10)
        assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_resume_from_the_command_line(tmp_path: Path) -> None:
    """`ether workflow resume` continues an interrupted run, follows it to its end on stderr and
    exits with its outcome; --include-non-idempotent runs the non-idempotent task again too."""
    with interrupted(tmp_path) as (second, run):
        flow_back(second)
        listed = subprocess.run(
            [str(ETHER), "workflow", "ls", "--state", "interrupted", "--address", second.address],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.id in listed.stdout and "INTERRUPTED" in listed.stdout, listed.stdout
        resumed = subprocess.run(
            [
                *(str(ETHER), "workflow", "resume", run.id, "--include-non-idempotent"),
                *("--address", second.address, "--no-report"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert resumed.returncode == 0, resumed.stderr
        assert f"resumed run {run.id}" in resumed.stderr
        assert "SUCCEEDED" in resumed.stderr
        ended = wait(second, run.id)
        assert state(ended) == "SUCCEEDED" and ended.resume_count == 1
