"""More claims of docs/workflows.md (and the Workflow rows of docs/limits.md) that no other test
held, each seen as a user sees it: a real host, the `flow` test agent, gRPC clients.

- "Runs as resources": `stage_completed` comes "also for skipped and cancelled stages".
- "A spec": the duration forms (`30s`, `1.5s`, `500ms`, `2m`, `1h30m`, a number of seconds);
  a bad one is a violation naming its field.
- "How a stage runs" / "Settings and limits": a stage's concurrency defaults to 16, and
  `max_concurrency` (run and stage) is at most 10,000.
- "Retention": `keep_runs = 0` turns the count limit off.
- "Reports" / "Settings and limits": a report over 60 MiB is RESOURCE_EXHAUSTED.
- "Spec limits": each bound holds at its value and refuses one past it, with `limit` and `max`.

- "Spec limits": a spec nested to MAX_SPEC_DEPTH is a run like any other (at 64, the bound
  before, it could not be answered: INTERNAL), and a `when` past its limits carries `limit`
  and `max` like the other rows.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from ether.v1 import workflow_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import details
from tests.support.host import HostProcess
from tests.workflows.runs import create, events, follow_until, kinds, run_to_end, state, wait
from tests.workflows.test_retention import host_with
from tests.workflows.test_spec_limits import over_limit

STAGE = "  - {name: a, agent: flow, action: echo}\n"
# The bounds as docs/workflows.md ("Spec limits") states them, not read from the code: a test
# that took them from workflows/limits.py would follow a wrong constant.
MAX_SPEC_BYTES = 256 * 1024
MAX_SPEC_DEPTH = 32
MAX_SPEC_NODES = 100_000
MAX_SPEC_EXPANDED_CHARS = 1024 * 1024
MAX_WHEN_BYTES = 4 * 1024
MAX_WHEN_DEPTH = 64


def validated(host: HostProcess, **request: Any) -> workflow_pb2.Run:
    """The run a validate_only CreateRun answers (the spec passed every check)."""
    message = workflow_pb2.CreateRunRequest(validate_only=True, **request)
    return host.workflows.CreateRun(message, timeout=30).run


def refused(host: HostProcess, **request: Any) -> grpc.RpcError:
    """The INVALID_ARGUMENT of a validate_only CreateRun that must fail."""
    with pytest.raises(grpc.RpcError) as raised:
        validated(host, **request)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT, raised.value.details()
    return raised.value


def violations(error: grpc.RpcError) -> dict[str, str]:
    return {v.field: v.description for v in details(error)["BadRequest"].field_violations}


def test_skipped_and_cancelled_stages_end_with_stage_completed(
    host: HostProcess, flow: str
) -> None:
    """ "`stage_completed` (also for skipped and cancelled stages)": a stage whose `when` is false
    and a stage never reached after a failure each get one stage_completed with their state and
    why (and no stage_started); so does every stage after a CancelRun."""
    run = run_to_end(
        host,
        """\
name: closing-events
stages:
  - {name: first, agent: flow, action: echo}
  - {name: skipped, agent: flow, action: echo, when: "first.status == FAILED"}
  - {name: broken, agent: flow, action: fail}
  - {name: never, agent: flow, action: echo}
""",
    )
    assert state(run) == "FAILED", run.error
    seen = events(host, run.id)
    started = [e.stage_started.stage for e in seen if e.WhichOneof("event") == "stage_started"]
    assert started == ["first", "broken"]
    completed = {
        e.stage_completed.stage: e.stage_completed
        for e in seen
        if e.WhichOneof("event") == "stage_completed"
    }
    assert list(completed) == ["first", "skipped", "broken", "never"]
    assert completed["skipped"].state == workflow_pb2.STAGE_STATE_SKIPPED
    assert completed["skipped"].error.code == "skipped"
    assert "was false" in completed["skipped"].error.message
    assert completed["never"].state == workflow_pb2.STAGE_STATE_CANCELLED
    assert completed["never"].error.message.startswith("not run:")
    assert kinds(seen)[-1] == "run_completed"

    tag = f"closing-{uuid.uuid4().hex[:8]}"
    held = create(
        host,
        "name: closing-cancel\nstages:\n"
        f"  - {{name: wait, agent: flow, action: hold, params: {{tag: {tag}}}}}\n"
        "  - {name: later, agent: flow, action: echo}\n",
    )
    follow_until(host, held.id, lambda s: any(e.WhichOneof("event") == "task_started" for e in s))
    host.workflows.CancelRun(workflow_pb2.CancelRunRequest(run_id=held.id), timeout=10)
    assert state(wait(host, held.id)) == "CANCELLED"
    closing = [
        (e.stage_completed.stage, e.stage_completed.state)
        for e in events(host, held.id)
        if e.WhichOneof("event") == "stage_completed"
    ]
    assert closing == [
        ("wait", workflow_pb2.STAGE_STATE_CANCELLED),
        ("later", workflow_pb2.STAGE_STATE_CANCELLED),
    ]


def test_durations_take_every_documented_form_and_a_bad_one_names_its_field(
    host: HostProcess, flow: str
) -> None:
    """ "Durations are `30s`, `1.5s`, `500ms`, `2m`, `1h30m` or a number of seconds": each, as a
    run's max_time, comes back as that many seconds; a duration that is none of these is a
    violation of the very field it was given in (budget, retry, task_timeout)."""
    forms = {"30s": 30, "1.5s": 1.5, "500ms": 0.5, "2m": 120, "1h30m": 5400, "45": 45, "2.5": 2.5}
    for text, seconds in forms.items():
        run = validated(host, spec_text=f"name: d\nbudget: {{max_time: {text}}}\nstages:\n{STAGE}")
        assert run.spec.budget.max_time.ToNanoseconds() == int(seconds * 1e9), text
    error = refused(
        host,
        spec_text="""\
name: bad-durations
budget: {max_time: 5 minutes}
default_retry: {initial_backoff: 1x}
stages:
  - {name: a, agent: flow, action: echo, task_timeout: 1h30, budget: {max_time: soon}}
""",
    )
    found = violations(error)
    for field in (
        "budget.max_time",
        "default_retry.initial_backoff",
        "stages[0].task_timeout",
        "stages[0].budget.max_time",
    ):
        assert "expected a duration" in found[field], (field, found)
    assert len(found) == 4, found


def test_max_concurrency_is_at_most_ten_thousand(host: HostProcess, flow: str) -> None:
    """`max_concurrency` of the run and of each stage are "both at most 10,000": 10,000 is kept
    as given, 10,001 is a violation of that field."""
    at = "name: c\nmax_concurrency: 10000\nstages:\n  - {name: a, agent: flow, action: echo, parallel: true, max_concurrency: 10000}\n"
    run = validated(host, spec_text=at)
    assert run.spec.max_concurrency == 10000 and run.spec.stages[0].max_concurrency == 10000
    found = violations(refused(host, spec_text=at.replace("10000", "10001")))
    assert set(found) == {"max_concurrency", "stages[0].max_concurrency"}, found
    assert all("out of range 0 to 10000" in v for v in found.values()), found


def test_a_stage_runs_sixteen_tasks_at_once_by_default(host: HostProcess) -> None:
    """A stage's `max_concurrency` defaults to 16: a parallel stage without one, whose first
    task returns once 15 holds run, starts that task and 15 holds; the 16th hold starts only
    after it ended (read in order: the events never show more than 16 running)."""
    agent = deploy(host, AGENTS / "flow", name=f"flow-{uuid.uuid4().hex[:6]}")
    holds = [{"hold": f"h{i}"} for i in range(16)]
    run = create(
        host,
        f"name: default-window\nstages:\n  - {{name: s, agent: {agent}, action: step, "
        f"parallel: true, inputs: {json.dumps([{'after_holds': 15}, *holds])}}}\n",
    )
    seen = follow_until(
        host, run.id, lambda s: sum(1 for k in kinds(s) if k == "task_started") == 17
    )
    host.workflows.CancelRun(workflow_pb2.CancelRunRequest(run_id=run.id), timeout=10)
    assert state(wait(host, run.id)) == "CANCELLED"
    order = kinds(seen)
    assert "task_completed" in order, "all 17 tasks started before one ended: more than 16 ran"
    first_end = order.index("task_completed")
    assert order[:first_end].count("task_started") == 16
    ended = next(e for e in seen if e.WhichOneof("event") == "task_completed")
    assert ended.task_completed.task.input_index == 0


def test_keep_runs_zero_keeps_every_ended_run(tmp_path: Path) -> None:
    """ "0 turns a limit off": with `keep_runs = 0` (keep_days left at 30) a host keeps all its
    recent ended runs; only the ones aged past 30 days go. Two runs of four are aged in the
    stopped host's store; the next start deletes exactly those two and the others stay."""
    first = host_with(tmp_path, "[workflows]\nkeep_runs = 0\n")
    ids = [run_to_end(first, f"name: k{i}\nstages:\n{STAGE}").id for i in range(4)]
    assert first.stop() == 0
    store = tmp_path / "state" / "workflows" / "runs.sqlite3"
    with sqlite3.connect(store) as db:
        aged = time.time() - 60 * 86400
        db.executemany("UPDATE runs SET created_at = ? WHERE id = ?", [(aged, i) for i in ids[:2]])
    again = host_with(tmp_path, "[workflows]\nkeep_runs = 0\n")
    try:
        record = again.wait_for_log(lambda r: r.get("event") == "ended runs deleted")
        assert record["count"] == 2 and record["keep_runs"] == 0
        listed = again.workflows.ListRuns(workflow_pb2.ListRunsRequest(), timeout=10).runs
        assert sorted(r.id for r in listed) == sorted(ids[2:])
        newest = run_to_end(again, f"name: k4\nstages:\n{STAGE}")
        assert state(newest) == "SUCCEEDED"
        listed = again.workflows.ListRuns(workflow_pb2.ListRunsRequest(), timeout=10).runs
        assert [r.id for r in listed] == [newest.id, ids[3], ids[2]]
    finally:
        again.stop()


def test_a_report_over_60_mib_is_resource_exhausted(host: HostProcess, flow: str) -> None:
    """ "a report over 60 MiB is `RESOURCE_EXHAUSTED` (page through `ListRunTasks` instead)":
    108 tasks each echoing 200,000 characters make a JSON report of about 62 MiB (each task's
    params and data, and the run's result), refused with reason REPORT_TOO_LARGE (under the
    host's 64 MiB message size: only the report bound refuses it); the Markdown report, whose
    long values are cut, is served."""
    text = "r" * 200_000
    created = create(
        host,
        f"""\
name: huge-report
stages:
  - {{name: count, agent: flow, action: numbers, params: {{n: 108}}}}
  - {{name: echo, agent: flow, action: echo, input_from: count.data.items, parallel: true,
     params: {{text: {text}}}}}
""",
    )
    run = wait(host, created.id, timeout=300)
    assert state(run) == "SUCCEEDED", run.error
    with pytest.raises(grpc.RpcError) as raised:
        host.workflows.GetRunReport(
            workflow_pb2.GetRunReportRequest(run_id=run.id, format=workflow_pb2.REPORT_FORMAT_JSON),
            timeout=120,
        )
    assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, raised.value.details()
    assert details(raised.value)["ErrorInfo"].reason == "REPORT_TOO_LARGE"
    assert "ListRunTasks" in str(raised.value.details())
    markdown = host.workflows.GetRunReport(
        workflow_pb2.GetRunReportRequest(run_id=run.id, format=workflow_pb2.REPORT_FORMAT_MARKDOWN),
        timeout=120,
    ).content
    assert run.id in markdown and len(markdown) < 60 * 1024 * 1024


def padded_text(size: int) -> str:
    """A valid spec of exactly ``size`` UTF-8 bytes (a comment fills it up)."""
    head = f"name: x\nstages:\n{STAGE}# "
    return head + "p" * (size - len(head) - 1) + "\n"


def padded_message(size: int) -> workflow_pb2.WorkflowSpec:
    """A valid spec message whose encoded size is exactly ``size`` bytes."""
    for fill in range(size - 120, size):
        spec = workflow_pb2.WorkflowSpec(
            name="x", stages=[workflow_pb2.Stage(name="a", agent="flow", action="echo")]
        )
        spec.stages[0].params["p"] = "m" * fill
        if spec.ByteSize() == size:
            return spec
    raise AssertionError(f"no message of {size} bytes")


def nodes_text(total: int) -> str:
    """A valid spec of exactly ``total`` nodes with aliases expanded (keys included): 14 of the
    frame (top mapping, name, stages, stage with name/agent/action, params), then l, m, p with
    their lists: a list of 1,000 nodes (itself and 999 scalars), 98 aliases of it, and ``rest``
    scalars."""
    rest = total - 14 - (1 + 1000) - (2 + 98 * 1000) - 2
    assert rest > 0
    return (
        f"name: x\nstages:\n  - name: a\n    agent: flow\n    action: echo\n    params:\n"
        f"      l: &l [{', '.join(['0'] * 999)}]\n"
        f"      m: [{', '.join(['*l'] * 98)}]\n"
        f"      p: [{', '.join(['0'] * rest)}]\n"
    )


def chars_text(total: int) -> str:
    """A valid spec whose scalars (keys included) hold exactly ``total`` characters with
    aliases expanded: 41 of the frame, keys s, t, u, a 200,000-character `s` aliased 4 times
    in `t`, and `u` filling up."""
    frame = len("namexstagesnameaagentflowactionechoparamsstu")
    rest = total - frame - 5 * 200_000
    return (
        f"name: x\nstages:\n  - name: a\n    agent: flow\n    action: echo\n    params:\n"
        f"      s: &s {'c' * 200_000}\n      t: [*s, *s, *s, *s]\n      u: {'u' * rest}\n"
    )


def when_text(condition: str) -> str:
    return f"name: x\nstages:\n{STAGE}  - name: b\n    agent: flow\n    action: echo\n    when: '{condition}'\n"


def long_when(size: int) -> str:
    return 'a.status != "' + "w" * (size - len('a.status != ""')) + '"'


def test_spec_limits_hold_at_their_bound_and_refuse_one_past(host: HostProcess, flow: str) -> None:
    """ "Spec limits": a spec exactly at MAX_SPEC_BYTES (as text and as a message),
    MAX_SPEC_NODES, MAX_SPEC_EXPANDED_CHARS, MAX_WHEN_BYTES and MAX_WHEN_DEPTH validates; one
    past each is INVALID_ARGUMENT INVALID_WORKFLOW with `limit` and `max` in ErrorInfo and the
    violation on spec_text / spec (stages[1].when for a `when`). One past MAX_SPEC_DEPTH too."""
    bounds = {
        "MAX_SPEC_BYTES": (padded_text, MAX_SPEC_BYTES),
        "MAX_SPEC_NODES": (nodes_text, MAX_SPEC_NODES),
        "MAX_SPEC_EXPANDED_CHARS": (chars_text, MAX_SPEC_EXPANDED_CHARS),
    }
    for limit, (make, bound) in bounds.items():
        assert len(make(bound).encode()) <= MAX_SPEC_BYTES
        assert validated(host, spec_text=make(bound)).spec.name == "x", limit
        error = refused(host, spec_text=make(bound + 1))
        over_limit(error, limit)
        assert details(error)["ErrorInfo"].metadata["max"] == str(bound)
    assert validated(host, spec=padded_message(MAX_SPEC_BYTES)).spec.name == "x"
    error = refused(host, spec=padded_message(MAX_SPEC_BYTES + 1))
    over_limit(error, "MAX_SPEC_BYTES", field="spec")
    assert details(error)["ErrorInfo"].metadata["max"] == str(MAX_SPEC_BYTES)

    error = refused(host, spec_text=deep_text(MAX_SPEC_DEPTH + 1))
    over_limit(error, "MAX_SPEC_DEPTH")
    assert details(error)["ErrorInfo"].metadata["max"] == str(MAX_SPEC_DEPTH)

    whens = {
        "MAX_WHEN_BYTES": (long_when, MAX_WHEN_BYTES),
        "MAX_WHEN_DEPTH": (lambda n: "(" * n + "a.status == SUCCEEDED" + ")" * n, MAX_WHEN_DEPTH),
    }
    for limit, (condition, bound) in whens.items():
        assert validated(host, spec_text=when_text(condition(bound))).spec.stages[1].when
        found = violations(refused(host, spec_text=when_text(condition(bound + 1))))
        assert list(found) == ["stages[1].when"] and limit in found["stages[1].when"], found
    nots = "not " * MAX_WHEN_DEPTH + "a.status == FAILED"
    assert validated(host, spec_text=when_text(nots)).spec.stages[1].when == nots
    refused(host, spec_text=when_text("not " + nots))


def deep_text(depth: int) -> str:
    """A valid spec nesting ``depth`` levels: the top mapping (1), stages (2), the stage (3),
    its params (4), then lists in params."""
    lists = depth - 4
    return (
        f"name: deep\nstages:\n  - name: a\n    agent: flow\n    action: echo\n"
        f"    params: {{deep: {'[' * lists}{']' * lists}}}\n"
    )


def test_a_spec_nested_to_the_depth_limit_is_a_run_like_any_other(tmp_path: Path) -> None:
    """MAX_SPEC_DEPTH "32 | nesting of mappings and lists, the top-level mapping being level 1":
    a spec nested exactly that deep (its params holding the levels) is within the limits, so
    CreateRun answers it with its run, ListRuns lists it and it ends SUCCEEDED with its params
    echoed back. (At 64, the bound before, such a run was stored and run, and CreateRun, then
    ListRuns, answered INTERNAL: its Run message passed protobuf's 100 levels.) A host of its
    own, as a failing CreateRun here would leave a run behind that ListRuns cannot answer for."""
    own = HostProcess(tmp_path / "state")
    try:
        own.wait_serving()
        deploy(own, AGENTS / "flow")
        run = create(own, deep_text(MAX_SPEC_DEPTH))
        listed = own.workflows.ListRuns(workflow_pb2.ListRunsRequest(name="deep"), timeout=10)
        assert [r.id for r in listed.runs] == [run.id]
        ended = wait(own, run.id)
        assert state(ended) == "SUCCEEDED", ended.error
        assert "deep" in json_format.MessageToDict(ended.result)
    finally:
        own.stop()


def test_when_limits_carry_limit_and_max_in_error_info(host: HostProcess, flow: str) -> None:
    """ "the first one passed is INVALID_ARGUMENT with reason INVALID_WORKFLOW, ErrorInfo.metadata
    `limit` (the name below) and `max`": MAX_WHEN_BYTES and MAX_WHEN_DEPTH are rows of that
    table, so a `when` one past either carries them like the other limits do."""
    cases = {
        "MAX_WHEN_BYTES": (long_when(MAX_WHEN_BYTES + 1), MAX_WHEN_BYTES),
        "MAX_WHEN_DEPTH": ("(" * 65 + "a.status == SUCCEEDED" + ")" * 65, MAX_WHEN_DEPTH),
    }
    for limit, (condition, bound) in cases.items():
        info = details(refused(host, spec_text=when_text(condition)))["ErrorInfo"]
        assert info.reason == "INVALID_WORKFLOW"
        assert dict(info.metadata) == {"limit": limit, "max": str(bound)}
