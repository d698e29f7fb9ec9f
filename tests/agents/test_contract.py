"""AgentIOService end to end: the directory, Execute, ExecuteStream, Pipe, CancelTask, and
the status each kind of bad request gets."""

from __future__ import annotations

import json
from collections.abc import Iterator

import grpc
import pytest

from ether.v1 import agent_io_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input, budget, data, details, execute
from tests.support.host import HostProcess


@pytest.fixture(scope="module", autouse=True)
def worker(host: HostProcess) -> str:
    return deploy(host, AGENTS / "worker")


def test_directory_lists_actions_with_schemas(host: HostProcess) -> None:
    """GetAgent shows the actions the agent declared, with JSON schemas derived from type hints."""
    info = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name="worker"), timeout=10).agent
    actions = {a.name: a for a in info.actions}
    assert {"echo", "nap", "add", "relay"} <= set(actions)
    schema = dict(actions["add"].params_schema)
    assert schema["properties"]["a"]["type"] == "integer"
    assert set(schema["required"]) == {"a", "b"}
    assert actions["echo"].idempotent
    assert info.version == "2.0.0"
    assert info.state == agent_io_pb2.AGENT_STATE_RUNNING
    assert info.ready_replicas == 1
    assert info.max_concurrency == 4


def test_list_agents_filters_and_paginates(host: HostProcess) -> None:
    """ListAgents filters by capability and language and pages with tokens."""
    listed = host.agents.ListAgents(
        agent_io_pb2.ListAgentsRequest(capability="testing"), timeout=10
    )
    assert [a.name for a in listed.agents] == ["worker"]
    none = host.agents.ListAgents(
        agent_io_pb2.ListAgentsRequest(capability="no-such-tag"), timeout=10
    )
    assert list(none.agents) == []
    first = host.agents.ListAgents(agent_io_pb2.ListAgentsRequest(page_size=1), timeout=10)
    assert len(first.agents) == 1
    with pytest.raises(grpc.RpcError) as error:
        host.agents.ListAgents(agent_io_pb2.ListAgentsRequest(page_token="bogus"), timeout=10)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_execute_returns_data_and_provenance(host: HostProcess) -> None:
    """A successful task carries its data and the host's provenance metadata."""
    output = execute(host, "worker", "add", {"a": 2, "b": 40})
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS
    assert data(output) == {"sum": 42}
    assert output.metadata.pid > 0 and output.metadata.host
    assert output.metadata.duration.ToNanoseconds() > 0
    assert output.task_id.startswith("t-")


def test_params_and_data_as_json_bytes(host: HostProcess) -> None:
    """params_json in and DATA_ENCODING_JSON out carry the same values as Struct params and data:
    integers stay integers, nested values survive, and data stays unset."""
    params = {"a": 2, "b": 40}
    output = execute_json(host, "worker", "add", json.dumps(params).encode())
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS
    assert json.loads(output.data_json) == {"sum": 42}
    assert not output.HasField("data")
    nested = {"text": "héllo", "items": [1, 2.5, None, {"deep": [True]}]}
    echoed = execute_json(host, "worker", "echo", json.dumps(nested).encode())
    assert json.loads(echoed.data_json) == nested
    # Struct params with a JSON answer, and JSON params with the default (Struct) answer.
    mixed = execute(host, "worker", "add", params, output_encoding=agent_io_pb2.DATA_ENCODING_JSON)
    assert json.loads(mixed.data_json) == {"sum": 42}
    request = agent_io_pb2.ExecuteRequest(
        input=agent_io_pb2.AgentInput(
            agent="worker", action="add", params_json=json.dumps(params).encode()
        )
    )
    assert data(host.agents.Execute(request, timeout=30).output) == {"sum": 42}


def test_bad_params_json_is_invalid_argument(host: HostProcess) -> None:
    """params_json that is not JSON, not an object, or set along with params is refused with
    a field violation naming input.params_json; schema checks apply to it as to params. An
    output_encoding this host does not know is refused too, not taken for the default."""
    for raw, words, reason in (
        (b"{not json", "not valid JSON", "INVALID_PARAMS_JSON"),
        (b"[1, 2]", "must be a JSON object", "INVALID_PARAMS_JSON"),
        (b'{"a": "two", "b": 1}', "input.params.a", "INVALID_PARAMS"),
    ):
        with pytest.raises(grpc.RpcError) as error:
            execute_json(host, "worker", "add", raw)
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        found = details(error.value)
        fields = [v.field for v in found["BadRequest"].field_violations]
        assert words in error.value.details() or words in fields
        assert found["ErrorInfo"].reason == reason, (raw, found["ErrorInfo"].reason)
    with pytest.raises(grpc.RpcError) as twice:
        execute(host, "worker", "add", {"a": 1, "b": 2}, params_json=b'{"a": 1, "b": 2}')
    assert twice.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not both" in twice.value.details()
    assert details(twice.value)["ErrorInfo"].reason == "PARAMS_TWICE"
    with pytest.raises(grpc.RpcError) as encoding:
        execute(host, "worker", "add", {"a": 1, "b": 2}, output_encoding=7)
    assert encoding.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "DATA_ENCODING_JSON" in encoding.value.details()
    found = details(encoding.value)
    assert [v.field for v in found["BadRequest"].field_violations] == ["input.output_encoding"]
    assert found["ErrorInfo"].reason == "INVALID_FIELD"  # an enum number the enum lacks


def execute_json(
    host: HostProcess, agent: str, action: str, params_json: bytes
) -> agent_io_pb2.AgentOutput:
    task = agent_io_pb2.AgentInput(
        agent=agent,
        action=action,
        params_json=params_json,
        output_encoding=agent_io_pb2.DATA_ENCODING_JSON,
    )
    response = host.agents.Execute(agent_io_pb2.ExecuteRequest(input=task), timeout=30)
    return response.output  # type: ignore[no-any-return]


def test_agent_reported_cost_and_model(host: HostProcess) -> None:
    """Cost and model reported by the agent land in the metadata; max_cost is enforced."""
    output = execute(host, "worker", "costly", {"cost": 0.25})
    assert output.metadata.cost == pytest.approx(0.25)
    assert output.metadata.model == "test-model-1"
    over = execute(
        host,
        "worker",
        "costly",
        {"cost": 0.25},
        context=agent_io_pb2.TaskContext(budget=budget(max_cost=0.1)),
    )
    assert over.status == agent_io_pb2.TASK_STATUS_PARTIAL
    assert over.error.code == "budget_exceeded"


def test_agent_errors_are_outputs_not_rpc_errors(host: HostProcess) -> None:
    """An error raised in the agent is an AgentOutput with status ERROR and its message."""
    output = execute(host, "worker", "broken", {"message": "disk on fire"})
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR
    assert output.error.code == "broken" and output.error.message == "disk on fire"
    crash = execute(host, "worker", "explode", {})
    assert crash.status == agent_io_pb2.TASK_STATUS_ERROR
    assert crash.error.code == "internal"
    assert "ZeroDivisionError" in crash.error.details["traceback"]


def test_unknown_agent_is_not_found(host: HostProcess) -> None:
    with pytest.raises(grpc.RpcError) as error:
        execute(host, "nobody", "echo", {})
    assert error.value.code() == grpc.StatusCode.NOT_FOUND
    assert "nobody" in error.value.details()
    assert details(error.value)["ErrorInfo"].reason == "AGENT_NOT_FOUND"


def test_unknown_action_lists_the_actions(host: HostProcess) -> None:
    with pytest.raises(grpc.RpcError) as error:
        execute(host, "worker", "fly", {})
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "echo" in error.value.details() and "add" in error.value.details()


def test_params_failing_the_schema_get_field_violations(host: HostProcess) -> None:
    with pytest.raises(grpc.RpcError) as error:
        execute(host, "worker", "add", {"a": "two"})
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    violations = {v.field for v in details(error.value)["BadRequest"].field_violations}
    assert "input.params.a" in violations
    assert any(
        "required" in v.description for v in details(error.value)["BadRequest"].field_violations
    )


def test_negative_budget_is_invalid(host: HostProcess) -> None:
    with pytest.raises(grpc.RpcError) as error:
        execute(
            host,
            "worker",
            "echo",
            {},
            context=agent_io_pb2.TaskContext(budget=budget(max_cost=-1.0)),
        )
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_deadline_reaches_the_agent_and_is_enforced(host: HostProcess) -> None:
    """budget.max_time becomes the task deadline: DEADLINE_EXCEEDED, and the agent keeps serving."""
    with pytest.raises(grpc.RpcError) as error:
        execute(
            host,
            "worker",
            "nap",
            {"ms": 60000},
            context=agent_io_pb2.TaskContext(budget=budget(max_time=0.5)),
        )
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    with pytest.raises(grpc.RpcError) as error:
        execute(host, "worker", "nap", {"ms": 60000}, timeout=0.5)
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert data(execute(host, "worker", "echo", {"still": "alive"})) == {"still": "alive"}


def test_execute_stream_sends_started_progress_log_output(host: HostProcess) -> None:
    """ExecuteStream: started first, the agent's progress and log records as they happen, the
    output last, numbered 1, 2, 3..."""
    request = agent_io_pb2.ExecuteStreamRequest(input=agent_input("worker", "nap", {"ms": 50}))
    events = list(host.agents.ExecuteStream(request, timeout=30))
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[0] == "started" and kinds[-1] == "output"
    assert "progress" in kinds
    logged = next(e.log for e in events if e.WhichOneof("event") == "log")
    assert (logged.level, logged.message, dict(logged.fields)) == ("info", "napping", {"ms": 50})
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert data(events[-1].output) == {"slept": 50}


def test_pipe_runs_many_tasks_in_completion_order(host: HostProcess) -> None:
    """Pipe answers every input, matched by task id, including in-stream errors for bad inputs."""

    def requests() -> Iterator[agent_io_pb2.PipeRequest]:
        yield agent_io_pb2.PipeRequest(
            input=agent_input("worker", "nap", {"ms": 300}, task_id="slow"), max_in_flight=8
        )
        for i in range(20):
            yield agent_io_pb2.PipeRequest(
                input=agent_input("worker", "add", {"a": i, "b": 1}, task_id=f"add-{i}")
            )
        yield agent_io_pb2.PipeRequest(input=agent_input("ghost", "echo", {}, task_id="bad"))
        yield agent_io_pb2.PipeRequest(
            input=agent_io_pb2.AgentInput(
                agent="worker", action="add", params_json=b"{oops", task_id="bad-json"
            )
        )

    outputs = [response.output for response in host.agents.Pipe(requests(), timeout=60)]
    by_id = {o.task_id: o for o in outputs}
    assert len(outputs) == 23
    assert all(data(by_id[f"add-{i}"]) == {"sum": i + 1} for i in range(20))
    assert by_id["bad"].status == agent_io_pb2.TASK_STATUS_ERROR
    assert by_id["bad"].error.code == "agent_not_found"
    assert by_id["bad-json"].error.code == "invalid_params_json"
    # Sent first, finished late: outputs come in completion order, not input order.
    assert outputs.index(by_id["slow"]) > 0


def test_cancel_task_reaches_the_agent(host: HostProcess) -> None:
    """CancelTask ends a running task: its caller gets CANCELLED and the agent keeps working."""
    request = agent_io_pb2.ExecuteStreamRequest(
        input=agent_input("worker", "nap", {"ms": 60000}, task_id="to-cancel")
    )
    stream = host.agents.ExecuteStream(request, timeout=30)
    first = next(stream)
    assert first.WhichOneof("event") == "started"
    reply = host.agents.CancelTask(
        agent_io_pb2.CancelTaskRequest(task_id="to-cancel", reason="test"), timeout=10
    )
    assert reply.cancelled
    with pytest.raises(grpc.RpcError) as error:
        list(stream)
    assert error.value.code() == grpc.StatusCode.CANCELLED
    with pytest.raises(grpc.RpcError) as missing:
        host.agents.CancelTask(agent_io_pb2.CancelTaskRequest(task_id="to-cancel"), timeout=10)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND


def test_client_disconnect_cancels_the_task(host: HostProcess) -> None:
    """Callers that go away free the agent's slots: with all max_concurrency (4) slots taken
    by long tasks whose callers then disconnect, new tasks run at once."""
    streams = [
        host.agents.ExecuteStream(
            agent_io_pb2.ExecuteStreamRequest(input=agent_input("worker", "nap", {"ms": 60000})),
            timeout=60,
        )
        for _ in range(4)
    ]
    for stream in streams:
        assert next(stream).WhichOneof("event") == "started"  # each holds a slot now
    for stream in streams:
        stream.cancel()
    outputs = [execute(host, "worker", "add", {"a": i, "b": i}, timeout=30) for i in range(4)]
    assert [data(o)["sum"] for o in outputs] == [0, 2, 4, 6]


def test_seed_envelope_agent_works_as_single_action(host: HostProcess) -> None:
    """A child speaking only {"id","type":"task","payload"} is an agent with one action."""
    deploy(host, AGENTS / "seed")
    info = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name="seed"), timeout=10).agent
    assert [a.name for a in info.actions] == ["run"]
    output = execute(host, "seed", "", {"text": "quiet"})
    assert data(output) == {"upper": "QUIET"}
    failed = execute(host, "seed", "run", {"fail": True})
    assert failed.status == agent_io_pb2.TASK_STATUS_ERROR
    assert failed.error.message == "asked to fail"
