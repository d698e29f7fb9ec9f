"""CreateRun bounds a spec before building anything of it: size, nesting, expanded nodes and
characters, `when` expressions; each bomb is INVALID_ARGUMENT naming the limit, and the host
keeps answering other calls (and keeps its memory) while bombs arrive."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format, struct_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ether.v1 import agent_io_pb2, workflow_pb2
from ether_host.workflows.limits import (
    MAX_SPEC_BYTES,
    MAX_SPEC_DEPTH,
    MAX_SPEC_EXPANDED_CHARS,
    MAX_SPEC_NODES,
    MAX_WHEN_BYTES,
    MAX_WHEN_DEPTH,
)
from tests.support.calls import details
from tests.support.host import HostProcess

DEADLINE = 30.0  # the bombs' own gRPC deadline: an answer must come before it
RSS_GROWTH = 200 * 1024 * 1024  # generous: a seven-level bomb used to take the host past 2.5 GB


def billion_laughs(levels: int) -> str:
    """`a: &a [x * 9]`, then each level nine aliases of the one before, `stages` the last."""
    names = "abcdefghij"
    lines = ["a: &a [x,x,x,x,x,x,x,x,x]"]
    for level in range(1, levels):
        name, below = names[level], names[level - 1]
        lines.append(f"{name}: &{name} [{','.join([f'*{below}'] * 9)}]")
    lines.append(f"stages: *{names[levels - 1]}")
    return "\n".join(lines) + "\n"


def refusal(host: HostProcess, request: workflow_pb2.CreateRunRequest) -> grpc.RpcError:
    """The error of a CreateRun that must fail INVALID_ARGUMENT, answered within DEADLINE."""
    request.validate_only = True
    with pytest.raises(grpc.RpcError) as raised:
        host.workflows.CreateRun(request, timeout=DEADLINE)
    error = raised.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (error.code(), error.details())
    return error


def refused_text(host: HostProcess, spec_text: str) -> grpc.RpcError:
    return refusal(host, workflow_pb2.CreateRunRequest(spec_text=spec_text))


def over_limit(error: grpc.RpcError, limit: str, field: str = "spec_text") -> str:
    """Assert the refusal names ``limit`` (message, ErrorInfo, the violation); its message."""
    found = details(error)
    assert found["ErrorInfo"].reason == "INVALID_WORKFLOW"
    assert found["ErrorInfo"].metadata["limit"] == limit
    violation = found["BadRequest"].field_violations[0]
    assert violation.field == field and limit in violation.description
    message = str(error.details())
    assert limit in message
    return message


def violations(error: grpc.RpcError) -> dict[str, str]:
    return {v.field: v.description for v in details(error)["BadRequest"].field_violations}


def rss(host: HostProcess) -> int:
    """The host's resident memory in bytes, from /proc/<pid>/status."""
    for line in Path(f"/proc/{host.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS line")


def while_responsive(host: HostProcess, bad: Callable[[], Any], times: int = 6) -> list[Any]:
    """Run ``bad`` ``times`` over, from two threads at once, while this thread keeps calling
    Health.Check and ListAgents: each of those must answer within its own deadline, and the
    host's memory must not grow by more than RSS_GROWTH. Returns what ``bad`` returned."""
    health = health_pb2_grpc.HealthStub(host.channel)
    before = rss(host)
    answered = 0
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(bad) for _ in range(times)]
        while True:
            status = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=DEADLINE)
            assert status.status == health_pb2.HealthCheckResponse.SERVING
            host.agents.ListAgents(agent_io_pb2.ListAgentsRequest(), timeout=DEADLINE)
            answered += 1
            if all(f.done() for f in futures):
                break
        results = [f.result() for f in futures]
    assert answered >= 1
    assert rss(host) - before < RSS_GROWTH, f"the host's RSS grew from {before} to {rss(host)}"
    return results


def test_a_billion_laughs_is_refused_at_the_node_limit_and_the_host_keeps_answering(
    host: HostProcess,
) -> None:
    """Aliases nine wide and seven deep (4.7 million nodes) stop at MAX_SPEC_NODES, counted
    while composing: INVALID_ARGUMENT naming the limit and where it was passed, while health
    checks and ListAgents answer and the host's memory stays put."""
    text = billion_laughs(7)
    assert len(text) < 300
    for error in while_responsive(host, lambda: refused_text(host, text)):
        message = over_limit(error, "MAX_SPEC_NODES")
        assert str(MAX_SPEC_NODES) in message and "aliases expanded" in message
        assert "line " in message and "column " in message
    over_limit(refused_text(host, billion_laughs(6)), "MAX_SPEC_NODES")


def test_deep_nesting_is_refused_at_the_depth_limit(host: HostProcess) -> None:
    """20,000 nested lists, as YAML or as JSON, and a shallow alias of a deep list: refused at
    MAX_SPEC_DEPTH (no RecursionError), while the host keeps answering."""
    yaml_lists = "name: deep\nstages: " + "[" * 20000 + "]" * 20000 + "\n"
    json_lists = '{"name": "deep", "stages": ' + "[" * 20000 + "]" * 20000 + "}"
    for text in (yaml_lists, json_lists):
        for error in while_responsive(host, partial(refused_text, host, text)):
            assert str(MAX_SPEC_DEPTH) in over_limit(error, "MAX_SPEC_DEPTH")
    inner = "[" * (MAX_SPEC_DEPTH - 1) + "]" * (MAX_SPEC_DEPTH - 1)
    aliased = f"deep: &deep {inner}\nstages: [*deep]\n"  # 1 + 1 + 63 levels once expanded
    over_limit(refused_text(host, aliased), "MAX_SPEC_DEPTH")


def test_large_text_and_repeated_large_scalars_are_refused(host: HostProcess) -> None:
    """Text over MAX_SPEC_BYTES is refused before it is parsed; a large scalar repeated by
    aliases is refused at MAX_SPEC_EXPANDED_CHARS; a message over MAX_SPEC_BYTES before it is
    decoded."""
    big = "name: big\ndescription: " + "x" * MAX_SPEC_BYTES + "\nstages: []\n"
    assert str(MAX_SPEC_BYTES) in over_limit(refused_text(host, big), "MAX_SPEC_BYTES")
    scalar = "y" * (MAX_SPEC_BYTES // 2)
    repeated = f"big: &big {scalar}\nstages: [{', '.join(['*big'] * 20)}]\n"
    for error in while_responsive(host, lambda: refused_text(host, repeated)):
        assert str(MAX_SPEC_EXPANDED_CHARS) in over_limit(error, "MAX_SPEC_EXPANDED_CHARS")
    message = workflow_pb2.WorkflowSpec(
        name="big", description="z" * MAX_SPEC_BYTES, stages=[workflow_pb2.Stage(name="a")]
    )
    error = refusal(host, workflow_pb2.CreateRunRequest(spec=message))
    over_limit(error, "MAX_SPEC_BYTES", field="spec")


def test_when_expressions_are_bounded_in_length_and_nesting(host: HostProcess) -> None:
    """3,000 nested parentheses and 2,000 `not`s are over MAX_WHEN_BYTES; 100 nested
    parentheses or `not`s within it are over MAX_WHEN_DEPTH: each a violation of that stage's
    `when`, without a RecursionError."""
    conditions = {
        "MAX_WHEN_BYTES": ["(" * 3000 + "a.status" + ")" * 3000, "not " * 2000 + "a.status"],
        "MAX_WHEN_DEPTH": ["(" * 100 + "a.status" + ")" * 100, "not " * 100 + "a.status"],
    }
    for limit, texts in conditions.items():
        for text in texts:
            spec = (
                "name: cond\nstages:\n  - {name: a, agent: nobody}\n"
                f"  - name: b\n    agent: nobody\n    when: '{text}'\n"
            )
            found = violations(refused_text(host, spec))
            assert limit in found["stages[1].when"], found
    sizes = str(MAX_WHEN_BYTES), str(MAX_WHEN_DEPTH)
    assert all(size.isdigit() for size in sizes)


def test_unreadable_characters_are_invalid_argument_with_line_and_column(
    host: HostProcess,
) -> None:
    """A control character in spec_text (a YAML reader error), or a scalar its tag cannot read
    (a date with month 13, `!!bool maybe`), is INVALID_ARGUMENT naming the line and column,
    not INTERNAL."""
    error = refused_text(host, "name: x\nstages:\n  - name: a\x01b\n")
    description = violations(error)["spec_text"]
    assert description.startswith("line 3, column 12:"), description
    assert "U+0001" in description
    for scalar in ("2001-13-45", "!!bool maybe"):
        text = f"name: x\nstages:\n  - {{name: a, agent: nobody, params: {{v: {scalar}}}}}\n"
        description = violations(refused_text(host, text))["spec_text"]
        assert description.startswith("line 3, column 42:") and "not a valid" in description


def test_an_alias_inside_its_own_anchor_is_refused(host: HostProcess) -> None:
    """`&x [*x]` would be a list containing itself: refused while composing, not a
    RecursionError later."""
    description = violations(refused_text(host, "name: x\nstages: &x [*x]\n"))["spec_text"]
    assert "cycle" in description and "line 2" in description


def test_infinite_and_nan_numbers_and_huge_integers_are_refused(host: HostProcess) -> None:
    """Params and inputs travel as JSON: .inf, -.inf and .nan are field violations naming the
    value's path; so is an integer past 64 bits; NaN in a spec message is INVALID_ARGUMENT."""
    found = violations(
        refused_text(
            host,
            """\
name: numbers
stages:
  - name: a
    agent: nobody
    params: {limit: .inf, nested: {low: -.inf}}
    inputs: [1, .nan]
    task_timeout: .inf
""",
        )
    )
    assert "finite" in found["stages[0].params.limit"]
    assert "finite" in found["stages[0].params.nested.low"]
    assert "finite" in found["stages[0].inputs[1]"]
    assert "finite" in found["stages[0].task_timeout"]
    huge = "name: x\nstages:\n  - {name: a, agent: nobody, params: {n: " + "9" * 5000 + "}}\n"
    assert "out of range" in violations(refused_text(host, huge))["spec_text"]
    for value in (float("nan"), float("inf")):
        stage = workflow_pb2.Stage(name="a", agent="nobody")
        stage.params["n"] = value
        error = refusal(
            host,
            workflow_pb2.CreateRunRequest(spec=workflow_pb2.WorkflowSpec(name="x", stages=[stage])),
        )
        assert "finite" in violations(error)["spec"]
        # In a stage's inputs (read apart from the rest of the message), named by its place.
        stage = workflow_pb2.Stage(name="a", agent="nobody", inputs=[struct_pb2.Value()] * 2)
        stage.inputs[1].list_value.values.add().number_value = value
        error = refusal(
            host,
            workflow_pb2.CreateRunRequest(spec=workflow_pb2.WorkflowSpec(name="x", stages=[stage])),
        )
        assert "finite" in violations(error)["stages[0].inputs[1][0]"]


def test_many_stages_are_validated_in_near_linear_time(host: HostProcess) -> None:
    """5,000 stages each naming the next (forward references, then one cycle through all of
    them) are reported within the deadline while the host keeps answering; every message
    stays short."""
    count = 5000
    chain = "name: chain\nstages:\n" + "".join(
        f"- {{name: s{i}, agent: n, input_from: s{i + 1}.data}}\n" for i in range(count)
    )
    ring = chain.replace(f"s{count}.data", "s0.data")
    assert len(ring.encode()) < MAX_SPEC_BYTES
    for text, word in ((chain, "forward reference"), (ring, "cycle")):
        for error in while_responsive(host, partial(refused_text, host, text), times=2):
            found = details(error)["BadRequest"].field_violations
            assert word in found[0].description
            assert sum(len(v.description) for v in found) < 1_000_000


def test_a_spec_with_anchors_and_merge_keys_within_the_limits_still_validates(
    host: HostProcess, flow: str
) -> None:
    """Anchors, aliases and merge keys as real specs use them still validate: a merged stage
    overrides what it inherits, and aliased params come out expanded in the canonical spec."""
    text = f"""\
name: shared
stages:
  - &first
    name: first
    agent: {flow}
    action: echo
    params: &params {{text: hello, tags: [a, b]}}
  - <<: *first
    name: second
    params: {{copy: *params}}
    when: first.status == "SUCCEEDED" and not (first.data.text == "x")
"""
    request = workflow_pb2.CreateRunRequest(spec_text=text, validate_only=True)
    run = host.workflows.CreateRun(request, timeout=DEADLINE).run
    first, second = run.spec.stages
    assert (first.name, second.name) == ("first", "second")
    assert second.agent == flow and second.action == "echo"
    assert json_format.MessageToDict(second.params)["copy"]["tags"] == ["a", "b"]
