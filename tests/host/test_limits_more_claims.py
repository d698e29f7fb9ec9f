"""Claims of docs/limits.md (and docs/errors.md's rule for them) that no other test held: the
value at a bound is accepted, one past it refused with the documented status, reason and field.

- "Agents and tasks", `max_queue` "(1 to 100000)" and `max_frame` "(1 KiB to 256 MiB)" of an
  `AgentSpec`: DeployAgent at each bound deploys, one past it is INVALID_ARGUMENT naming
  `spec.max_queue` / `spec.max_frame` (errors.md, "After the checks": a spec that fails its
  checks, one violation per problem).
- "Agents and tasks", `Pipe` "at most 1024" in flight, and "Lists and strings in requests",
  `PipeRequest.inputs` of 1,000 items: a stream at both bounds runs every task (one past each is
  refused in tests/host/test_request_rules.py and tests/agents/test_pipe_batches.py).
- "Terminals", input queued for the program "(one `WriteInput`, and what waits unread)": one
  WriteInput of exactly `input_queue` bytes is queued, one byte more is refused; while it waits
  unread, more is RESOURCE_EXHAUSTED `INPUT_QUEUE_FULL`, with a QuotaFailure naming the terminal
  and RetryInfo, and the host goes on serving.
- "Terminals", `TerminalInput.repeat` "1 to 1000": 1000 is typed in full, 1001 is
  INVALID_ARGUMENT `INVALID_REPEAT` naming `input.repeat`.
- "Gateway", a condition expression "1000 characters, nesting 64 levels": a `when` at both
  bounds is accepted and runs its step, one past either is INVALID_ARGUMENT `INVALID_PIPELINE`
  naming the trigger's field.
- The opening rule: a quota's ErrorInfo metadata carries the `limit` "and, for host settings,
  the `setting`": for terminals per owner and for the host's `mailbox_size` too.

One real host whose config sets the terminal and gateway limits small, real agents (tests/agents
flow, chatter, stepper, toolbox) and the generated gRPC stubs; every wait is on an answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from ether.v1 import agent_io_pb2, gateway_pb2, supervisor_pb2
from ether.v1 import terminal_pb2 as pb
from tests.gateway._support import Conversation, close_session, open_session
from tests.gateway.test_pipeline import step, steps_run
from tests.support.agents import AGENTS, deploy, remove_agent, until
from tests.support.calls import agent_input, details, nested
from tests.support.host import HostProcess, sandbox_grants
from tests.terminals.support import close, create, wait_output, write

INPUT_QUEUE = 1024 * 1024  # [terminals] input_queue here, in bytes
PER_OWNER = 2  # [terminals] max_terminals_per_owner here
MAILBOX = 2  # [gateway] mailbox_size here
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """A host with small terminal and gateway limits, chatter, stepper and flow deployed."""
    folder = tmp_path_factory.mktemp("limits-more")
    config = folder / "host.toml"
    config.write_text(
        sandbox_grants()
        + f"[terminals]\nmax_terminals_per_owner = {PER_OWNER}\ninput_queue = {INPUT_QUEUE}\n"
        + f"close_grace = 1.0\n[gateway]\nmailbox_size = {MAILBOX}\n"
    )
    process = HostProcess(folder / "state", "--config", str(config))
    try:
        process.wait_serving()
        for agent in ("chatter", "stepper", "flow"):
            deploy(process, AGENTS / agent)
        yield process
    finally:
        process.stop()


def _refused(call: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value


def _fields(error: grpc.RpcError) -> list[str]:
    return [v.field for v in details(error)["BadRequest"].field_violations]


# -- Agents and tasks ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "at_bound", "past_bound"),
    [
        ("max_queue", 100_000, 100_001),
        ("max_queue", 1, -1),
        ("max_frame", 256 * MIB, 256 * MIB + 1),
        ("max_frame", 1024, 1023),
    ],
)
def test_agent_spec_max_queue_and_max_frame_hold_at_their_bounds(
    host: HostProcess, field: str, at_bound: int, past_bound: int
) -> None:
    """DeployAgent of tests/agents/flow with `max_queue` / `max_frame` at a documented bound is
    answered with that value in the resolved spec (the upper bounds also run a task); one past
    it is INVALID_ARGUMENT, reason INVALID_AGENT_SPEC, one violation naming `spec.<field>`."""
    name = f"bound-{field.replace('_', '-')}-{at_bound}"
    spec = supervisor_pb2.AgentSpec(name=name, path=str(AGENTS / "flow"))
    setattr(spec, field, at_bound)
    response = host.supervisor.DeployAgent(supervisor_pb2.DeployAgentRequest(spec=spec), timeout=30)
    try:
        assert getattr(response.agent.spec, field) == at_bound
        if at_bound > 1024:  # a 1 KiB link cannot carry the SDK's hello: deploying is the claim
            until(host, response.agent, {"RUNNING"})
            request = agent_io_pb2.ExecuteRequest(input=agent_input(name, "echo", {"n": 1}))
            output = host.agents.Execute(request, timeout=30).output
            assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    finally:
        remove_agent(host, name)

    spec = supervisor_pb2.AgentSpec(path=str(AGENTS / "flow"))
    setattr(spec, field, past_bound)
    error = _refused(
        lambda: host.supervisor.DeployAgent(
            supervisor_pb2.DeployAgentRequest(spec=spec), timeout=30
        )
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    assert details(error)["ErrorInfo"].reason == "INVALID_AGENT_SPEC"
    assert _fields(error) == [f"spec.{field}"]
    assert str(past_bound) in (error.details() or "")


def test_a_pipe_at_1024_in_flight_with_a_batch_of_1000_runs_every_task(host: HostProcess) -> None:
    """`PipeRequest.max_in_flight` 1024 (the most) and one batch of 1,000 inputs (the most) are
    accepted: every task of the batch is answered SUCCESS, each by its own task id."""
    batch = [agent_input("flow", "echo", {"k": k}, task_id=f"e-{k}") for k in range(1000)]
    request = agent_io_pb2.PipeRequest(inputs=batch, max_in_flight=1024)
    outputs = [o for r in host.agents.Pipe(iter([request]), timeout=120) for o in r.outputs]
    assert sorted(o.task_id for o in outputs) == sorted(f"e-{k}" for k in range(1000))
    failed = [
        (o.task_id, o.error.code) for o in outputs if o.status != agent_io_pb2.TASK_STATUS_SUCCESS
    ]
    assert not failed, failed[:5]


# -- Terminals ----------------------------------------------------------------------------


def test_the_input_queue_takes_its_size_in_one_call_and_refuses_more_while_unread(
    host: HostProcess,
) -> None:
    """`sleep` never reads its terminal: one WriteInput of exactly `input_queue` bytes (lines,
    so the PTY stops taking them) is queued whole; one of a byte more, on another terminal, is
    INPUT_TOO_LARGE; more on the first while its input waits is RESOURCE_EXHAUSTED
    INPUT_QUEUE_FULL, with a QuotaFailure naming the terminal and RetryInfo; the host goes on
    serving (the terminal answers GetTerminal)."""
    lines = b"y\n" * (INPUT_QUEUE // 2)
    first = create(host, ["sleep", "600"])
    other = create(host, ["sleep", "600"])
    try:
        accepted = write(host, first.id, data=lines)
        assert accepted.bytes_queued == INPUT_QUEUE

        too_large = _refused(lambda: write(host, other.id, data=lines + b"y"))
        assert too_large.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert details(too_large)["ErrorInfo"].reason == "INPUT_TOO_LARGE"

        full = _refused(lambda: write(host, first.id, data=lines))
        assert full.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, full.details()
        found = details(full)
        assert found["ErrorInfo"].reason == "INPUT_QUEUE_FULL"
        assert [v.subject for v in found["QuotaFailure"].violations] == [f"terminal:{first.id}"]
        assert found["RetryInfo"].retry_delay.ToTimedelta().total_seconds() > 0
        got = host.terminals.GetTerminal(pb.GetTerminalRequest(terminal_id=first.id), timeout=10)
        assert got.terminal.state == pb.TERMINAL_STATE_RUNNING
    finally:
        close(host, first.id)
        close(host, other.id)


def test_repeat_takes_1000_and_refuses_1001_naming_the_field(host: HostProcess) -> None:
    """`wc -c` counts what is typed: "x" with repeat 1000, then Ctrl-D twice (repeat 2), and it
    prints 1000 (after the echoed x's). repeat 1001 is INVALID_ARGUMENT, reason INVALID_REPEAT, naming `input.repeat`."""
    terminal = create(host, command="wc -c")
    try:
        assert write(host, terminal.id, "x", repeat=1000).bytes_queued == 1000
        write(host, terminal.id, ctrl="d", repeat=2)
        found = wait_output(host, terminal.id, r"(?m)(\d+)\s*$", after=0)
        assert list(found.groups) == ["1000"]

        error = _refused(lambda: write(host, terminal.id, "x", repeat=1001))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert details(error)["ErrorInfo"].reason == "INVALID_REPEAT"
        assert _fields(error) == ["input.repeat"]
    finally:
        close(host, terminal.id)


# -- Gateway --------------------------------------------------------------------------------

WHEN = "pipeline.steps[0].trigger.when"


def _long_when(length: int) -> str:
    """A condition ``length`` characters long that holds on turn 1."""
    head, tail = "turn == 1 and '", "' != ''"
    return head + "x" * (length - len(head) - len(tail)) + tail


def _deep_when(levels: int) -> str:
    """A condition whose leaves are ``levels`` deep (nots, the comparison, its operands) that
    holds on turn 1 when ``levels`` is even."""
    return "not " * (levels - 2) + "turn == 1"


@pytest.mark.parametrize(
    ("at_bound", "past_bound"),
    [(_long_when(1000), _long_when(1001)), (_deep_when(64), _deep_when(65))],
    ids=["length", "nesting"],
)
def test_a_when_condition_holds_at_its_bounds(
    host: HostProcess, at_bound: str, past_bound: str
) -> None:
    """A step whose `when` is 1000 characters, or nests 64 levels, is accepted by OpenSession
    and runs on the turn it holds for; one character or one level more is INVALID_ARGUMENT,
    reason INVALID_PIPELINE, naming the trigger's `when`."""
    pipeline = gateway_pb2.PipelineSpec(steps=[step("bounded", trigger={"when": at_bound})])
    session = open_session(host, agent="chatter", pipeline=pipeline)
    talk = Conversation(host, session.id)
    try:
        assert "bounded" in steps_run(talk.turn("hello"))
    finally:
        talk.close()
        close_session(host, session.id)

    pipeline = gateway_pb2.PipelineSpec(steps=[step("bounded", trigger={"when": past_bound})])
    error = _refused(lambda: open_session(host, agent="chatter", pipeline=pipeline))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details(error)["ErrorInfo"].reason == "INVALID_PIPELINE"
    assert WHEN in _fields(error)


# -- the setting a quota names ----------------------------------------------------------------


def test_the_owner_terminal_quota_names_its_setting(host: HostProcess) -> None:
    """docs/limits.md: a quota's ErrorInfo "metadata carries the `limit` (and, for host
    settings, the `setting`)". With `max_terminals_per_owner` 2, the third terminal is
    RESOURCE_EXHAUSTED TERMINAL_OWNER_LIMIT with limit "2" and setting naming the key."""
    made = [create(host, ["sleep", "600"]) for _ in range(PER_OWNER)]
    try:
        error = _refused(lambda: create(host, ["sleep", "600"]))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        info = details(error)["ErrorInfo"]
        assert (info.reason, info.metadata["limit"]) == ("TERMINAL_OWNER_LIMIT", str(PER_OWNER))
        assert info.metadata.get("setting") == "terminals.max_terminals_per_owner", info
    finally:
        for terminal in made:
            close(host, terminal.id)


def test_a_mailbox_full_by_the_hosts_mailbox_size_names_the_setting(host: HostProcess) -> None:
    """The same rule for "mailbox messages": toolbox sets no mailbox size of its own, so the
    host's `[gateway] mailbox_size` (2) is its limit; the third SendMessage is MAILBOX_FULL with
    limit "2" and setting `mailbox_size`."""
    agent = deploy(host, AGENTS / "toolbox", name="quota-box")
    try:
        request = gateway_pb2.SendMessageRequest(agent=agent, type="job")
        for _ in range(MAILBOX):
            host.gateway.SendMessage(request, timeout=10)
        error = _refused(lambda: host.gateway.SendMessage(request, timeout=10))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        info = details(error)["ErrorInfo"]
        assert (info.reason, info.metadata["limit"]) == ("MAILBOX_FULL", str(MAILBOX))
        assert info.metadata.get("setting") == "mailbox_size", info
    finally:
        remove_agent(host, agent)


def test_data_too_deep_for_a_value_is_an_error_and_answered_as_json(host: HostProcess) -> None:
    """docs/limits.md, "Agents and tasks": data answered as a protobuf Value nests at most 30
    objects or 45 lists (protobuf decoders stop at 100 levels; the host keeps to 90: 3 for an
    object, 2 for a list). flow echoes its params: with 43 lists under one key (3 + 86 levels)
    Execute and Pipe answer the data; one list more (3 + 88) is `TASK_STATUS_ERROR`, code
    `data_too_deep`, naming the JSON encoding -- and
    asked for as JSON, the same data is answered in data_json. (Before, the host answered a
    message the client could not decode.)"""
    for levels, answered in ((43, True), (44, False)):
        params = json.dumps({"deep": nested(levels)}).encode()
        task = agent_io_pb2.AgentInput(agent="flow", action="echo", params_json=params)
        executed = host.agents.Execute(agent_io_pb2.ExecuteRequest(input=task), timeout=30).output
        [piped] = list(host.agents.Pipe(iter([agent_io_pb2.PipeRequest(input=task)])))
        for output in (executed, piped.output):
            if answered:
                assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
                assert json_format.MessageToDict(output.data) == {"deep": nested(levels)}
            else:
                assert output.status == agent_io_pb2.TASK_STATUS_ERROR
                assert output.error.code == "data_too_deep", output.error
                assert "DATA_ENCODING_JSON" in output.error.message
                assert not output.HasField("data")
    task.output_encoding = agent_io_pb2.DATA_ENCODING_JSON
    output = host.agents.Execute(agent_io_pb2.ExecuteRequest(input=task), timeout=30)
    assert output.output.status == agent_io_pb2.TASK_STATUS_SUCCESS
    assert json.loads(output.output.data_json) == {"deep": nested(44)}


@pytest.mark.parametrize("where", ["extra", "details"])
def test_an_agents_metadata_extra_or_error_details_too_deep_are_a_note_in_their_place(
    host: HostProcess, where: str
) -> None:
    """docs/limits.md, same row: the agent's `metadata.extra` (ctx.cost's fields) or an error's
    `details` nested past the bound is answered as a Struct whose one field, `not_shown`, says
    why -- the rest of the output as the agent gave it. (Before, Execute answered INTERNAL.)"""
    for levels, shown in ((43, True), (50, False)):
        params = json.dumps({"levels": levels, "where": where}).encode()
        task = agent_io_pb2.AgentInput(agent="flow", action="nest", params_json=params)
        output = host.agents.Execute(agent_io_pb2.ExecuteRequest(input=task), timeout=30).output
        if where == "extra":
            assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
            assert json_format.MessageToDict(output.data) == {"nested": levels}
            struct = output.metadata.extra
        else:
            assert output.status == agent_io_pb2.TASK_STATUS_ERROR
            assert (output.error.code, output.error.message) == ("nested", f"{levels} lists")
            struct = output.error.details
        got = json_format.MessageToDict(struct)
        if shown:
            assert got == {"deep": nested(levels)}
        else:
            assert list(got) == ["not_shown"], got
            assert "deeper than a protobuf Value can carry" in got["not_shown"]


def test_a_log_line_whose_fields_are_too_deep_keeps_the_agents_logs_readable(
    host: HostProcess,
) -> None:
    """docs/limits.md, same row: an agent's JSON log line whose fields nest past the bound is
    answered by StreamLogs with `fields` holding one `not_shown` note, and the lines around it
    as they were. (Before, StreamLogs answered INTERNAL for any tail holding that line: the
    agent's logs could not be read.)"""
    for levels in (43, 50):
        params = json.dumps({"levels": levels, "where": "log"}).encode()
        task = agent_io_pb2.AgentInput(agent="flow", action="nest", params_json=params)
        output = host.agents.Execute(agent_io_pb2.ExecuteRequest(input=task), timeout=30).output
        assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    request = supervisor_pb2.StreamLogsRequest(agent="flow", tail_lines=10_000)
    lines = {
        line.message: json_format.MessageToDict(line.fields)
        for line in host.supervisor.StreamLogs(request, timeout=30)
    }
    assert lines["nested 43"]["deep"] == nested(43)
    assert list(lines["nested 50"]) == ["not_shown"], lines["nested 50"]
    assert "deeper than a protobuf Value can carry" in lines["nested 50"]["not_shown"]
