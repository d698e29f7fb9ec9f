"""CreateRun rejects a bad spec with INVALID_ARGUMENT and field violations before anything runs."""

from __future__ import annotations

import grpc
import pytest

from ether.v1 import common_pb2, workflow_pb2
from tests.support.calls import details
from tests.support.host import HostProcess
from tests.workflows.runs import create, state


def rejected(
    host: HostProcess, spec_text: str = "", spec: workflow_pb2.WorkflowSpec | None = None
) -> dict[str, str]:
    """The field violations of a CreateRun that must fail INVALID_ARGUMENT, by field."""
    request = (
        workflow_pb2.CreateRunRequest(spec=spec)
        if spec is not None
        else workflow_pb2.CreateRunRequest(spec_text=spec_text)
    )
    with pytest.raises(grpc.RpcError) as error:
        host.workflows.CreateRun(request, timeout=30)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, error.value.details()
    found = details(error.value)
    assert found["ErrorInfo"].reason == "INVALID_WORKFLOW"
    return {v.field: v.description for v in found["BadRequest"].field_violations}


def no_runs(host: HostProcess) -> None:
    assert list(host.workflows.ListRuns(workflow_pb2.ListRunsRequest(), timeout=10).runs) == []


def test_every_problem_is_reported_with_its_field_and_position(
    host: HostProcess, flow: str
) -> None:
    """Unknown agent and action, a forward reference, a cycle and a negative budget: all at once, with
    line and column, and no run is created."""
    violations = rejected(
        host,
        """\
name: broken
budget: {max_cost: -1}
stages:
  - name: first
    agent: nobody
  - name: second
    agent: flow
    action: eho
    input_from: third.data
  - name: third
    agent: flow
    action: echo
    reduce: true
  - name: fourth
    agent: flow
    action: echo
    input_from: fifth.data
  - name: fifth
    agent: flow
    action: echo
""",
    )
    assert "unknown agent 'nobody'" in violations["stages[0].agent"]
    assert violations["stages[0].agent"].startswith("line 5, column 5:")
    assert (
        "no action 'eho'" in violations["stages[1].action"]
        and "did you mean 'echo'" in violations["stages[1].action"]
    )
    assert "cycle: second -> third -> second" in violations["stages[1].input_from"]
    assert violations["stages[1].input_from"].startswith("line 9, column 5:")
    assert "forward reference" in violations["stages[3].input_from"]
    assert "must not be negative" in violations["budget.max_cost"]
    no_runs(host)


def test_yaml_syntax_error_names_line_and_column(host: HostProcess, flow: str) -> None:
    """A YAML syntax error is one violation on spec_text with its line and column."""
    violations = rejected(
        host, "name: x\nstages:\n  - name: a\n    agent: [flow\n    action: echo\n"
    )
    assert list(violations) == ["spec_text"]
    assert violations["spec_text"].startswith("line 5, column 11:")


@pytest.mark.parametrize(
    ("where", "key", "read"),
    [
        ("stage", "on", "the boolean true"),
        ("params", "yes", "the boolean true"),
        ("inputs", "2", "a number"),
        ("top", "~", "null"),
    ],
)
def test_a_key_yaml_does_not_read_as_text_says_to_quote_it(
    host: HostProcess, flow: str, where: str, key: str, read: str
) -> None:
    """YAML 1.1 reads a bare `on`, `yes`, `2` or `~` as a boolean, a number or null, where every
    key of a spec is text: the error names the key as written, what YAML made of it, its line and
    column, and the fix (quote it) -- not `unknown field True` or `expected a mapping of
    parameter names to values, got a mapping`. Quoted, the same spec runs."""
    lines = {
        "stage": f"  - {{name: a, agent: flow, action: echo, {key}: x}}",
        "params": f"  - {{name: a, agent: flow, action: echo, params: {{{key}: 1}}}}",
        "inputs": f"  - {{name: a, agent: flow, action: echo, inputs: [{{{key}: 1}}]}}",
        "top": f"{key}: x",
    }
    text = "name: keys\nstages:\n  - {name: b, agent: flow, action: echo}\n" + lines[where] + "\n"
    violations = rejected(host, text)
    assert list(violations) == ["spec_text"]
    line = 4
    column = lines[where].rindex(f"{key}:") + 1
    assert violations["spec_text"] == (
        f"line {line}, column {column}: the key {key} is read by YAML as {read}, not as text: "
        f'quote it ("{key}"); every key in a spec is text'
    )


def test_paths_and_conditions_that_name_nothing(host: HostProcess, flow: str) -> None:
    """input_from must be <stage>.data[...] of an earlier stage; `when` must parse and name earlier stages."""
    violations = rejected(
        host,
        """\
name: paths
stages:
  - {name: a, agent: flow, action: echo}
  - {name: b, agent: flow, action: echo, input_from: a.result.items}
  - {name: c, agent: flow, action: echo, input_from: b.data, when: "a.status =="}
  - {name: d, agent: flow, action: echo, when: "z.status == SUCCEEDED"}
  - {name: e, agent: flow, action: echo, input_from: a.data, inputs: [1]}
  - {name: f, agent: flow, action: echo, input_from: f.data}
""",
    )
    assert "names nothing" in violations["stages[1].input_from"]
    assert "expected a value" in violations["stages[2].when"]
    assert "unknown stage 'z'" in violations["stages[3].when"]
    assert "exclusive" in violations["stages[4].input_from"]
    assert "reads its own data" in violations["stages[5].input_from"]


def test_spec_message_is_validated_the_same_way(host: HostProcess, flow: str) -> None:
    """A WorkflowSpec message gets the same checks: a negative stage budget and an unknown action."""
    spec = workflow_pb2.WorkflowSpec(
        name="msg",
        stages=[
            workflow_pb2.Stage(
                name="a", agent="flow", action="nope", budget=common_pb2.Budget(max_tasks=-3)
            ),
        ],
    )
    violations = rejected(host, spec=spec)
    assert "must not be negative" in violations["stages[0].budget.max_tasks"]
    assert "no action 'nope'" in violations["stages[0].action"]


def test_unknown_fields_and_wrong_types(host: HostProcess, flow: str) -> None:
    """Misspelled keys and values of the wrong kind are named, with a suggestion."""
    violations = rejected(
        host,
        """\
name: typo
stages:
  - name: a
    agent: flow
    action: echo
    paralel: true
    max_concurrency: many
    on_failure: maybe
    task_timeout: soon
""",
    )
    assert "did you mean 'parallel'" in violations["stages[0].paralel"]
    assert "expected an integer" in violations["stages[0].max_concurrency"]
    assert "stop or continue" in violations["stages[0].on_failure"]
    assert "expected a duration" in violations["stages[0].task_timeout"]


def test_validate_only_creates_nothing(host: HostProcess, flow: str) -> None:
    """validate_only returns the parsed run, PENDING with no id, and starts nothing."""
    run = create(
        host,
        "name: dry\nstages:\n  - {name: a, agent: flow, action: echo, inputs: [1, 2]}\n",
        validate_only=True,
    )
    assert run.id == "" and state(run) == "PENDING"
    assert run.spec.stages[0].on_failure == workflow_pb2.FAILURE_POLICY_STOP
    no_runs(host)
