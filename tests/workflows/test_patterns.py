"""The workflow patterns: serial chains, fan-out, map-reduce, conditions, failure policies,
retries and followed next actions, each run on a real host with a real agent."""

from __future__ import annotations

import json

from ether.v1 import agent_io_pb2, workflow_pb2
from tests.support.host import HostProcess
from tests.workflows.runs import (
    events,
    kinds,
    report,
    run_to_end,
    stage_states,
    state,
    task_state,
    tasks,
    value,
)


def test_serial_chain_with_input_from(host: HostProcess, flow: str) -> None:
    """Each stage reads the previous one's data through input_from (a list expands into one task
    per element) or gathers it with a reduce; the run's result is the last stage's data."""
    run = run_to_end(
        host,
        """\
name: chain
stages:
  - name: count
    agent: flow
    action: numbers
    params: {n: 3}
  - name: double
    agent: flow
    action: double
    input_from: count.data.items
  - name: sum
    agent: flow
    action: total
    reduce: true
""",
    )
    assert state(run) == "SUCCEEDED", run.error
    assert stage_states(run) == {"count": "SUCCEEDED", "double": "SUCCEEDED", "sum": "SUCCEEDED"}
    assert value(run.result) == {"total": 12, "count": 3}
    doubled = tasks(host, run.id, stage="double")
    assert [value(t.params) for t in doubled] == [{"input": 1}, {"input": 2}, {"input": 3}]
    assert [t.input_index for t in doubled] == [0, 1, 2]
    assert run.tasks.total == 5 and run.tasks.succeeded == 5


def test_fan_out_of_a_hundred(host: HostProcess, flow: str) -> None:
    """100 literal inputs run in parallel under a concurrency cap; every output is kept in input order."""
    inputs = json.dumps(list(range(100)))
    run = run_to_end(
        host,
        f"""\
name: fan-out
stages:
  - name: double
    agent: flow
    action: double
    inputs: {inputs}
    parallel: true
    max_concurrency: 25
""",
    )
    assert state(run) == "SUCCEEDED", run.error
    assert run.tasks.succeeded == 100
    assert value(run.result) == [{"value": 2 * i} for i in range(100)]
    seen = events(host, run.id)
    assert kinds(seen).count("task_started") == 100 and kinds(seen).count("task_completed") == 100
    assert [e.sequence for e in seen] == list(range(1, len(seen) + 1))


def test_map_reduce(host: HostProcess, flow: str) -> None:
    """A map runs every action for every input (input-major order), and a reduce gets them as one list."""
    run = run_to_end(
        host,
        """\
name: map-reduce
stages:
  - name: inputs
    agent: flow
    action: numbers
    params: {n: 4}
  - name: analyze
    agent: flow
    input_from: inputs.data.items
    parallel: true
    map:
      - action: double
      - action: charge
        params: {cost: 0.25}
  - name: combine
    agent: flow
    action: echo
    reduce: true
    input_param: results
""",
    )
    assert state(run) == "SUCCEEDED", run.error
    analyzed = tasks(host, run.id, stage="analyze")
    assert [(t.input_index, t.action_index, t.action) for t in analyzed] == [
        (i, a, name) for i in range(4) for a, name in enumerate(("double", "charge"))
    ]
    results = value(run.result)["results"]
    assert results[0] == {"value": 2} and results[1] == {"charged": 0.25, "input": 1}
    assert len(results) == 8
    assert run.usage.cost == 1.0 and run.usage.tasks == 10


def test_when_skips_a_stage(host: HostProcess, flow: str) -> None:
    """A false `when` skips its stage; a true one runs it; the result is the last stage that ran."""
    run = run_to_end(
        host,
        """\
name: conditions
stages:
  - {name: count, agent: flow, action: numbers, params: {n: 2}}
  - {name: big, agent: flow, action: echo, when: "len(count.data.items) > 5", params: {size: big}}
  - {name: small, agent: flow, action: echo, when: "big.status == SKIPPED and 2 in count.data.items",
     params: {size: small}}
  - {name: never, agent: flow, action: echo, when: "count.status != 'SUCCEEDED'"}
""",
    )
    assert state(run) == "SUCCEEDED"
    assert stage_states(run) == {
        "count": "SUCCEEDED",
        "big": "SKIPPED",
        "small": "SUCCEEDED",
        "never": "SKIPPED",
    }
    assert value(run.result) == {"size": "small"}


def test_failing_task_under_stop_policy(host: HostProcess, flow: str) -> None:
    """A failed task under STOP cancels the stage's other tasks and ends the run FAILED; later
    stages never run."""
    run = run_to_end(
        host,
        """\
name: stop
stages:
  - name: work
    agent: flow
    parallel: true
    map:
      - action: fail
        params: {code: bad_input}
      - action: hold
        params: {tag: stop-policy}
  - {name: after, agent: flow, action: echo}
""",
    )
    assert state(run) == "FAILED"
    assert run.error.code == "stage_failed" and "bad_input" in run.error.message
    assert stage_states(run) == {"work": "FAILED", "after": "CANCELLED"}
    by_action = {t.action: t for t in tasks(host, run.id)}
    assert task_state(by_action["fail"]) == "FAILED"
    assert task_state(by_action["hold"]) == "CANCELLED"
    assert not run.HasField("result")


def test_failing_task_under_continue_policy(host: HostProcess, flow: str) -> None:
    """Under CONTINUE the other tasks finish, later stages get the successful outputs, and the run
    ends PARTIAL; the reports carry the error, with the traceback of an uncaught exception."""
    run = run_to_end(
        host,
        """\
name: continue
stages:
  - name: work
    agent: flow
    inputs: [1, 2, 3, 4]
    parallel: true
    on_failure: continue
    map:
      - action: double
      - action: explode
  - name: sum
    agent: flow
    action: total
    reduce: true
""",
    )
    assert state(run) == "PARTIAL", run.error
    assert run.error.code == "tasks_failed"
    assert stage_states(run) == {"work": "PARTIAL", "sum": "SUCCEEDED"}
    assert value(run.result) == {"total": 20, "count": 4}
    failed = tasks(host, run.id, state=workflow_pb2.RUN_TASK_STATE_FAILED)
    assert len(failed) == 4 and {t.output.status for t in failed} == {
        agent_io_pb2.TASK_STATUS_ERROR
    }
    document = json.loads(report(host, run.id, workflow_pb2.REPORT_FORMAT_JSON).content)
    assert document["summary"]["tasks"]["failed"] == 4
    assert (
        len(document["errors"]) == 4 and "ZeroDivisionError" in document["errors"][0]["traceback"]
    )
    assert len(document["tasks"]) == 9
    markdown = report(host, run.id, workflow_pb2.REPORT_FORMAT_MARKDOWN)
    assert markdown.content_type == "text/markdown; charset=utf-8"
    assert "| `" + run.id + "` | **PARTIAL** | 9 | 5 | 4 | 0 |" in markdown.content
    assert "## Errors" in markdown.content and "ZeroDivisionError" in markdown.content


def test_retries_idempotent_actions_with_backoff(host: HostProcess, flow: str) -> None:
    """An idempotent action is retried per the retry policy; each failed attempt is an event."""
    run = run_to_end(
        host,
        """\
name: retry
default_retry: {max_attempts: 3, initial_backoff: 10ms, multiplier: 2}
stages:
  - {name: flaky, agent: flow, action: flaky, params: {key: retry-test, failures: 2}}
""",
    )
    assert state(run) == "SUCCEEDED", run.error
    assert value(run.result) == {"key": "retry-test", "attempts": 3}
    (task,) = tasks(host, run.id)
    assert task.attempts == 3 and run.usage.tasks == 3
    completed = [
        e.task_completed.task
        for e in events(host, run.id)
        if e.WhichOneof("event") == "task_completed"
    ]
    assert [task_state(t) for t in completed] == ["RETRYING", "RETRYING", "SUCCEEDED"]


def test_non_idempotent_actions_are_not_retried(host: HostProcess, flow: str) -> None:
    """`explode` is not idempotent: one attempt, whatever the retry policy says."""
    run = run_to_end(
        host,
        """\
name: no-retry
stages:
  - {name: boom, agent: flow, action: explode, retry: {max_attempts: 5, initial_backoff: 1ms}}
""",
    )
    assert state(run) == "FAILED"
    (task,) = tasks(host, run.id)
    assert task.attempts == 1


def test_follows_next_actions_within_bounds(host: HostProcess, flow: str) -> None:
    """Proposed next actions run in the stage when the spec allows it, up to max_actions and max_depth."""
    run = run_to_end(
        host,
        """\
name: follow
stages:
  - name: plan
    agent: flow
    action: propose
    params: {count: 3, depth: 3}
    follow_next_actions: {max_actions: 4, max_depth: 2}
""",
    )
    assert state(run) == "SUCCEEDED", run.error
    listed = tasks(host, run.id)
    root = listed[0]
    followed = [t for t in listed if t.proposed_by]
    assert len(followed) == 4
    assert sum(1 for t in followed if t.proposed_by == root.task_id) == 3
    assert all(t.proposed_by in {x.task_id for x in listed} for t in followed)
    assert value(run.result) == {"proposed": 3, "depth": 3}


def test_next_actions_are_not_followed_by_default(host: HostProcess, flow: str) -> None:
    """Without follow_next_actions the proposals are recorded in the output only."""
    run = run_to_end(
        host,
        "name: nofollow\nstages:\n  - {name: plan, agent: flow, action: propose, params: {count: 2}}\n",
    )
    (task,) = tasks(host, run.id)
    assert len(task.output.next_actions) == 2 and run.tasks.total == 1


def test_input_from_path_missing_at_run_time(host: HostProcess, flow: str) -> None:
    """A path that names nothing in the actual data fails the stage and the run, saying where."""
    run = run_to_end(
        host,
        """\
name: missing
stages:
  - {name: count, agent: flow, action: numbers, params: {n: 2}}
  - {name: use, agent: flow, action: echo, input_from: count.data.rows}
""",
    )
    assert state(run) == "FAILED"
    assert run.error.code == "invalid_input" and "no key 'rows'" in run.error.message


def test_wildcard_paths_pick_a_field_of_every_element(host: HostProcess, flow: str) -> None:
    """`stage.data.*.key` is the list of each element's key."""
    run = run_to_end(
        host,
        """\
name: wildcard
stages:
  - {name: one, agent: flow, action: double, inputs: [1, 2, 3]}
  - {name: two, agent: flow, action: total, input_from: one.data.*.value, reduce: true}
""",
    )
    assert state(run) == "SUCCEEDED", run.error
    assert value(run.result) == {"total": 12, "count": 3}


def test_input_placeholders_place_the_input_in_params(host: HostProcess, flow: str) -> None:
    """ "${input}" and "${input.key}" in params are replaced by the element (or a part of it), which is
    then not also set under input_param."""
    run = run_to_end(
        host,
        """\
name: placeholders
stages:
  - name: shape
    agent: flow
    action: echo
    inputs: [{dir: src, depth: 2}]
    params: {paths: ["${input.dir}"], copy: "${input}", literal: "x ${input}"}
""",
    )
    assert state(run) == "SUCCEEDED", run.error
    assert value(run.result) == [
        {"paths": ["src"], "copy": {"dir": "src", "depth": 2}, "literal": "x ${input}"}
    ]


def test_reduce_can_pass_whole_outputs(host: HostProcess, flow: str) -> None:
    """reduce.outputs passes each task's AgentOutput (agent, action, status, data, metadata)."""
    run = run_to_end(
        host,
        """\
name: outputs
stages:
  - {name: work, agent: flow, action: double, inputs: [1, 2], on_failure: continue}
  - {name: gather, agent: flow, action: echo, reduce: {outputs: true}, input_param: results}
""",
    )
    assert state(run) == "SUCCEEDED", run.error
    results = value(run.result)["results"]
    assert [r["data"] for r in results] == [{"value": 2}, {"value": 4}]
    assert {r["status"] for r in results} == {"TASK_STATUS_SUCCESS"}
    assert {r["agent"] + "." + r["action"] for r in results} == {"flow.double"}
    assert all(r["metadata"]["duration"].endswith("s") for r in results)
