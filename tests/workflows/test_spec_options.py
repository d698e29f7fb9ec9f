"""Spec options of docs/workflows.md that change what a run does, each run on a real host with
real agents: `retryable_only` retries, `follow_next_actions.allowed_agents`, what a reduce
stage receives with and without `include_failed`, and params checked against the action's
JSON schema when each task starts."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from ether.v1 import agent_io_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.host import HostProcess
from tests.workflows.runs import (
    events,
    run_to_end,
    stage_states,
    state,
    task_state,
    tasks,
    value,
)


@pytest.fixture(scope="module")
def suggester(host: HostProcess) -> str:
    """The `suggester` agent (tests/agents/suggester): proposes flow.echo and suggester.note."""
    return deploy(host, AGENTS / "suggester")


def completions(host: HostProcess, run_id: str) -> dict[str, list[str]]:
    """The states of every task_completed event of the run (one per attempt), by task id."""
    seen: dict[str, list[str]] = defaultdict(list)
    for event in events(host, run_id):
        if event.WhichOneof("event") == "task_completed":
            seen[event.task_completed.task.task_id].append(task_state(event.task_completed.task))
    return dict(seen)


def test_retryable_only_retries_only_errors_the_agent_marked_retryable(
    host: HostProcess, flow: str
) -> None:
    """With `retryable_only: true` a failure the agent marked retryable is tried up to
    max_attempts while one it did not mark fails after its first attempt; without it, both are
    retried. Each attempt is a `task_completed` event and counts as a task started."""
    run = run_to_end(
        host,
        """\
name: retryable-only
stages:
  - name: strict
    on_failure: continue
    retry: {max_attempts: 3, initial_backoff: 10ms, retryable_only: true}
    map:
      - {agent: flow, action: fail, params: {code: transient, retryable: true}}
      - {agent: flow, action: fail, params: {code: permanent, retryable: false}}
      - {agent: flow, action: flaky, params: {key: strict-flaky, failures: 2}}
  - name: lenient
    on_failure: continue
    retry: {max_attempts: 3, initial_backoff: 10ms}
    map:
      - {agent: flow, action: fail, params: {code: transient, retryable: true}}
      - {agent: flow, action: fail, params: {code: permanent, retryable: false}}
      - {agent: flow, action: flaky, params: {key: lenient-flaky, failures: 2}}
""",
    )
    assert state(run) == "PARTIAL", run.error
    listed = tasks(host, run.id)
    by_stage = {stage: [t for t in listed if t.stage == stage] for stage in ("strict", "lenient")}
    attempts = {stage: [t.attempts for t in found] for stage, found in by_stage.items()}
    ended = {stage: [task_state(t) for t in found] for stage, found in by_stage.items()}
    errors = {
        stage: [(t.output.error.code, t.output.error.retryable) for t in found[:2]]
        for stage, found in by_stage.items()
    }
    assert attempts == {"strict": [3, 1, 3], "lenient": [3, 3, 3]}
    assert ended == {
        "strict": ["FAILED", "FAILED", "SUCCEEDED"],
        "lenient": ["FAILED", "FAILED", "SUCCEEDED"],
    }
    assert errors == {
        "strict": [("transient", True), ("permanent", False)],
        "lenient": [("transient", True), ("permanent", False)],
    }
    seen = completions(host, run.id)
    assert [seen[t.task_id] for t in by_stage["strict"]] == [
        ["RETRYING", "RETRYING", "FAILED"],
        ["FAILED"],
        ["RETRYING", "RETRYING", "SUCCEEDED"],
    ]
    assert [seen[t.task_id] for t in by_stage["lenient"]] == [
        ["RETRYING", "RETRYING", "FAILED"],
        ["RETRYING", "RETRYING", "FAILED"],
        ["RETRYING", "RETRYING", "SUCCEEDED"],
    ]
    assert run.usage.tasks == 3 + 1 + 3 + 3 + 3 + 3


def test_allowed_agents_limits_which_next_actions_are_followed(
    host: HostProcess, flow: str, suggester: str
) -> None:
    """`follow_next_actions.allowed_agents: [flow]` runs the proposed flow.echo (with
    `proposed_by` naming its proposer) and not the proposed suggester.note, which stays only in
    the proposer's output; a stage without the list runs both. Followed tasks stay out of the
    stage data."""
    run = run_to_end(
        host,
        f"""\
name: allowed-agents
stages:
  - name: allowed
    agent: {suggester}
    action: suggest
    params: {{tag: first}}
    follow_next_actions: {{max_actions: 5, allowed_agents: [{flow}]}}
  - name: anyone
    agent: {suggester}
    action: suggest
    params: {{tag: second}}
    follow_next_actions: {{max_actions: 5}}
""",
    )
    assert state(run) == "SUCCEEDED", run.error
    listed = tasks(host, run.id)
    allowed = [t for t in listed if t.stage == "allowed"]
    root = allowed[0]
    assert not root.proposed_by
    assert [(p.agent, p.action) for p in root.output.next_actions] == [
        (flow, "echo"),
        (suggester, "note"),
    ]
    followed = [(t.proposed_by, t.agent, t.action, task_state(t)) for t in allowed[1:]]
    assert followed == [(root.task_id, flow, "echo", "SUCCEEDED")]
    assert value(allowed[1].output.data) == {"tag": "first", "by": "flow"}
    assert not [
        t for t in listed if t.agent == suggester and t.action == "note" and t.stage == "allowed"
    ]

    anyone = [t for t in listed if t.stage == "anyone"]
    assert sorted((t.proposed_by, t.agent, t.action) for t in anyone[1:]) == [
        (anyone[0].task_id, flow, "echo"),
        (anyone[0].task_id, suggester, "note"),
    ]
    assert all(task_state(t) == "SUCCEEDED" for t in anyone)
    assert value(run.result) == {"suggested": "second"}
    assert run.tasks.total == 2 + 3


def test_include_failed_adds_failed_outputs_to_a_reduce(host: HostProcess, flow: str) -> None:
    """A map stage whose failures are tolerated passes on only its successes: `reduce: true`
    gets their data, `reduce: {outputs: true}` their whole outputs; with `include_failed: true`
    the failed tasks' outputs (status ERROR, their error code and message) join them, in the
    map's task order."""
    run = run_to_end(
        host,
        """\
name: include-failed
stages:
  - name: work
    inputs: [1, 2]
    on_failure: continue
    map:
      - {agent: flow, action: double}
      - {agent: flow, action: fail, params: {code: no_good, message: refused}}
  - {name: data, agent: flow, action: echo, input_from: work.data, reduce: true}
  - {name: outputs, agent: flow, action: echo, input_from: work.data, reduce: {outputs: true}}
  - name: everything
    agent: flow
    action: echo
    input_from: work.data
    reduce: {outputs: true, include_failed: true}
""",
    )
    assert state(run) == "PARTIAL", run.error
    assert stage_states(run) == {
        "work": "PARTIAL",
        "data": "SUCCEEDED",
        "outputs": "SUCCEEDED",
        "everything": "SUCCEEDED",
    }
    work = tasks(host, run.id, stage="work")
    assert [(t.action, task_state(t)) for t in work] == [
        ("double", "SUCCEEDED"),
        ("fail", "FAILED"),
        ("double", "SUCCEEDED"),
        ("fail", "FAILED"),
    ]

    def received(stage: str) -> Any:
        """What the stage's one reduce task was given as its input."""
        (task,) = tasks(host, run.id, stage=stage)
        return value(task.params)["input"]

    def summary(output: dict[str, Any]) -> tuple[Any, ...]:
        error = output.get("error") or {}
        return (
            output["task_id"],
            output["action"],
            output["status"],
            output.get("data"),
            error.get("code"),
            error.get("message"),
        )

    assert received("data") == [{"value": 2}, {"value": 4}]
    successes = [
        (work[0].task_id, "double", "TASK_STATUS_SUCCESS", {"value": 2}, None, None),
        (work[2].task_id, "double", "TASK_STATUS_SUCCESS", {"value": 4}, None, None),
    ]
    assert [summary(o) for o in received("outputs")] == successes
    assert [summary(o) for o in received("everything")] == [
        successes[0],
        (work[1].task_id, "fail", "TASK_STATUS_ERROR", None, "no_good", "refused (input 1)"),
        successes[1],
        (work[3].task_id, "fail", "TASK_STATUS_ERROR", None, "no_good", "refused (input 2)"),
    ]


def test_params_breaking_the_action_schema_fail_that_task(host: HostProcess, flow: str) -> None:
    """`flow.double` takes a number: the task given a string is accepted by CreateRun, then
    FAILED when it starts, after one attempt (a retry policy does not send it again: it would
    fail the same way), with an error naming the params and the schema mismatch; under `on_failure: continue` the other tasks succeed and the run goes on
    (PARTIAL); under the default policy (stop) the run ends FAILED with that error, the stage's
    remaining task is cancelled and later stages do not run."""
    spec = """\
name: bad-params-{policy}
stages:
  - name: double
    agent: flow
    action: double
    inputs: [1, "two", 3]
    on_failure: {policy}
    retry: {{max_attempts: 3}}
  - {{name: sum, agent: flow, action: total, reduce: true}}
"""
    tolerant = run_to_end(host, spec.format(policy="continue"))
    assert state(tolerant) == "PARTIAL", tolerant.error
    assert stage_states(tolerant) == {"double": "PARTIAL", "sum": "SUCCEEDED"}
    doubled = tasks(host, tolerant.id, stage="double")
    assert [task_state(t) for t in doubled] == ["SUCCEEDED", "FAILED", "SUCCEEDED"]
    bad = doubled[1]
    assert value(bad.params) == {"input": "two"}
    assert bad.attempts == 1
    assert bad.output.status == agent_io_pb2.TASK_STATUS_ERROR
    assert bad.output.error.code == "invalid_params"
    assert not bad.output.error.retryable
    message = bad.output.error.message
    assert "params of flow.double do not match its schema" in message, message
    assert "input.params.input" in message and "'two' is not of type 'number'" in message, message
    assert value(tolerant.result) == {"total": 8, "count": 2}

    strict = run_to_end(host, spec.format(policy="stop"))
    assert state(strict) == "FAILED"
    assert strict.error.code == "stage_failed"
    assert "invalid_params" in strict.error.message, strict.error.message
    assert "'two' is not of type 'number'" in strict.error.message, strict.error.message
    assert stage_states(strict) == {"double": "FAILED", "sum": "CANCELLED"}
    doubled = tasks(host, strict.id, stage="double")
    assert [task_state(t) for t in doubled] == ["SUCCEEDED", "FAILED", "CANCELLED"]
    assert doubled[1].output.error.code == "invalid_params"
    assert tasks(host, strict.id, stage="sum") == []
