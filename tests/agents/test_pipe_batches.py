"""Pipe batches: many inputs in one PipeRequest (``inputs``), many outputs in one PipeResponse
(``outputs``). Each task of a batch runs, is checked and fails on its own; answers still come in
completion order; ``max_in_flight`` counts tasks, not messages; a stream of one input per message
is answered one output per message, as before batches."""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import json_format

from ether.v1 import agent_io_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input, data, details
from tests.support.host import HostProcess

DEADLINE = 120  # generous: the machine is shared and loaded


@pytest.fixture(scope="module", autouse=True)
def flow(host: HostProcess) -> str:
    return deploy(host, AGENTS / "flow")


class Requests:
    """A request stream the test feeds while it reads the answers; ``close`` half-closes it."""

    def __init__(self) -> None:
        self._queue: queue.Queue[agent_io_pb2.PipeRequest | None] = queue.Queue()

    def send(self, request: agent_io_pb2.PipeRequest) -> None:
        self._queue.put(request)

    def close(self) -> None:
        self._queue.put(None)

    def __iter__(self) -> Iterator[agent_io_pb2.PipeRequest]:
        while (request := self._queue.get()) is not None:
            yield request


def _in_flight(host: HostProcess, agent: str) -> int:
    info = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name=agent), timeout=30).agent
    return int(info.in_flight)


def _wait_in_flight(host: HostProcess, agent: str, count: int) -> None:
    """Until the agent runs ``count`` tasks (polled with a budget; no timing is asserted)."""
    budget = time.monotonic() + DEADLINE
    while _in_flight(host, agent) != count:
        assert time.monotonic() < budget, f"{agent} never ran {count} tasks at once"
        time.sleep(0.05)


def _cancel(host: HostProcess, task_id: str) -> None:
    """Cancel a task the test knows is running (it is not answered until it was)."""
    request = agent_io_pb2.CancelTaskRequest(task_id=task_id, reason="test done with it")
    budget = time.monotonic() + DEADLINE
    while True:
        try:
            host.agents.CancelTask(request, timeout=30)
            return
        except grpc.RpcError as error:  # sent, not started by the agent yet
            if error.code() != grpc.StatusCode.NOT_FOUND or time.monotonic() > budget:
                raise
            time.sleep(0.05)


def test_a_batch_is_answered_in_batches_in_completion_order(host: HostProcess) -> None:
    """One request carrying a hold and 20 echoes gets 21 outputs, in ``outputs`` (``output``
    unset), every echo's data matched by task id, and the hold -- first in the batch -- answered
    last, after it was cancelled: completion order, not input order."""
    requests = Requests()
    batch = [agent_input("flow", "hold", {"tag": "batch-first"}, task_id="hold")]
    batch += [agent_input("flow", "echo", {"n": i}, task_id=f"echo-{i}") for i in range(20)]
    requests.send(agent_io_pb2.PipeRequest(inputs=batch))
    answers = host.agents.Pipe(iter(requests), timeout=DEADLINE)
    outputs: list[agent_io_pb2.AgentOutput] = []
    messages = 0
    for response in answers:
        messages += 1
        assert not response.HasField("output")
        assert len(response.outputs) >= 1
        outputs += response.outputs
        if len(outputs) == 20:  # every echo answered: now end the hold
            _cancel(host, "hold")
            requests.close()
    assert len(outputs) == 21 and messages <= 21
    by_id = {o.task_id: o for o in outputs}
    assert all(data(by_id[f"echo-{i}"]) == {"n": i} for i in range(20))
    assert outputs[-1].task_id == "hold"
    assert outputs[-1].error.code == "task_cancelled"


def test_one_failing_task_of_a_batch_fails_alone(host: HostProcess) -> None:
    """A batch mixing good inputs with an agent error, an unknown action, params that fail the
    schema, an unknown agent and inputs that break the field rules answers each on its own: the
    good ones succeed, each bad one has its own error code, a rule broken is named by the index
    of its input (``inputs[5].agent``) with Execute's wording, and the stream goes on."""
    batch = [
        agent_input("flow", "echo", {"ok": 1}, task_id="ok-1"),
        agent_input("flow", "fail", {"code": "broken"}, task_id="agent-error"),
        agent_input("flow", "no-such-action", {}, task_id="unknown-action"),
        agent_input("flow", "double", {"input": "not a number"}, task_id="bad-params"),
        agent_input("ghost", "echo", {}, task_id="unknown-agent"),
        agent_input("", "echo", {}, task_id="no-agent"),
        agent_input("flow", "echo", {"ok": 2}, task_id="ok-2"),
        agent_input("x" * 257, "echo", {}, task_id="long-name"),
    ]
    second = agent_io_pb2.PipeRequest(
        inputs=[agent_input("flow", "echo", {"after": True}, task_id="after")]
    )
    requests = [agent_io_pb2.PipeRequest(inputs=batch), second]
    outputs = [o for r in host.agents.Pipe(iter(requests), timeout=DEADLINE) for o in r.outputs]
    by_id = {o.task_id: o for o in outputs}
    assert len(outputs) == 9 and len(by_id) == 9
    assert data(by_id["ok-1"]) == {"ok": 1}
    assert data(by_id["ok-2"]) == {"ok": 2}
    assert data(by_id["after"]) == {"after": True}
    codes = {k: by_id[k].error.code for k in by_id if by_id[k].status != 1}
    assert codes == {
        "agent-error": "broken",
        "unknown-action": "unknown_action",
        "bad-params": "invalid_params",
        "unknown-agent": "agent_not_found",
        "no-agent": "invalid_argument",
        "long-name": "invalid_argument",
    }
    for task_id, index in (("no-agent", 5), ("long-name", 7)):
        error = by_id[task_id].error
        violations = json_format.MessageToDict(error.details)["field_violations"]
        assert [v["field"] for v in violations] == [f"inputs[{index}].agent"]
        assert error.message.startswith(f"inputs[{index}].agent ")
    assert by_id["no-agent"].error.message == "inputs[5].agent is required"


def test_the_window_counts_tasks_not_messages(host: HostProcess) -> None:
    """With max_in_flight 3, a batch of three holds and an echo runs the three holds and
    holds the echo back: the echo starts only once a hold is answered, so it is answered after
    it. Then a second batch waits for slots too."""
    requests = Requests()
    holds = [agent_input("flow", "hold", {"tag": f"w-{i}"}, task_id=f"w-{i}") for i in range(3)]
    late = agent_input("flow", "echo", {"late": True}, task_id="late")
    requests.send(agent_io_pb2.PipeRequest(inputs=[*holds, late], max_in_flight=3))
    answers = host.agents.Pipe(iter(requests), timeout=DEADLINE)
    try:
        _wait_in_flight(host, "flow", 3)
        _cancel(host, "w-0")
        order = []
        for response in answers:
            order += [o.task_id for o in response.outputs]
            if "late" in order:
                break
        assert order == ["w-0", "late"]
        assert _in_flight(host, "flow") == 2  # the two holds left; the echo took w-0's slot
        requests.send(
            agent_io_pb2.PipeRequest(
                inputs=[agent_input("flow", "echo", {"k": k}, task_id=f"e-{k}") for k in range(5)]
            )
        )
        seen = []
        for response in answers:
            seen += [o.task_id for o in response.outputs]
            if len(seen) == 5:
                break
        assert sorted(seen) == [f"e-{k}" for k in range(5)]
    finally:
        for task_id in ("w-1", "w-2"):
            _cancel(host, task_id)
        requests.close()
    rest = [o for r in answers for o in r.outputs]
    assert sorted(o.task_id for o in rest) == ["w-1", "w-2"]


def test_one_input_per_message_is_answered_one_output_per_message(host: HostProcess) -> None:
    """A stream that starts with ``input`` (every client before batches) gets ``output`` in
    each response and never ``outputs``, even when a later request carries a batch."""
    requests = [
        agent_io_pb2.PipeRequest(input=agent_input("flow", "echo", {"i": i}, task_id=f"s-{i}"))
        for i in range(5)
    ]
    requests.append(
        agent_io_pb2.PipeRequest(
            inputs=[agent_input("flow", "echo", {"b": b}, task_id=f"b-{b}") for b in range(3)]
        )
    )
    responses = list(host.agents.Pipe(iter(requests), timeout=DEADLINE))
    assert len(responses) == 8
    assert all(r.HasField("output") and not r.outputs for r in responses)
    by_id = {r.output.task_id: r.output for r in responses}
    assert {k: data(v) for k, v in by_id.items()} == {
        **{f"s-{i}": {"i": i} for i in range(5)},
        **{f"b-{b}": {"b": b} for b in range(3)},
    }


def test_a_batch_over_the_bound_ends_the_stream(host: HostProcess) -> None:
    """A request carrying more than 1,000 inputs concerns the stream as a whole: INVALID_ARGUMENT
    naming ``inputs``, with a message that says to split it."""
    batch = [agent_input("flow", "echo", {}) for _ in range(1001)]
    with pytest.raises(grpc.RpcError) as caught:
        list(host.agents.Pipe(iter([agent_io_pb2.PipeRequest(inputs=batch)]), timeout=DEADLINE))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "split the batch" in (caught.value.details() or "")
    violations = details(caught.value)["BadRequest"].field_violations
    assert [v.field for v in violations] == ["inputs"]


def test_a_batch_with_json_params_and_json_output(host: HostProcess) -> None:
    """The fast path inside a batch: params_json in, DATA_ENCODING_JSON out, per input."""
    batch = [
        agent_io_pb2.AgentInput(
            agent="flow",
            action="echo",
            params_json=json.dumps({"j": j}).encode(),
            output_encoding=agent_io_pb2.DATA_ENCODING_JSON,
            task_id=f"j-{j}",
        )
        for j in range(50)
    ]
    responses = host.agents.Pipe(iter([agent_io_pb2.PipeRequest(inputs=batch)]), timeout=DEADLINE)
    outputs = [o for r in responses for o in r.outputs]
    assert {o.task_id: json.loads(o.data_json) for o in outputs} == {
        f"j-{j}": {"j": j} for j in range(50)
    }


def test_a_batch_beyond_the_agents_concurrency_waits_in_the_host_and_all_is_answered(
    host: HostProcess,
) -> None:
    """600 tasks at a window of 600 to an agent that runs 64 at once: the rest wait for a slot
    in the host (each freed slot goes to one waiting task), and every task is answered once."""
    batch = [agent_input("flow", "echo", {"q": q}, task_id=f"q-{q}") for q in range(600)]
    request = agent_io_pb2.PipeRequest(inputs=batch, max_in_flight=600)
    outputs = [o for r in host.agents.Pipe(iter([request]), timeout=DEADLINE) for o in r.outputs]
    assert sorted(o.task_id for o in outputs) == sorted(f"q-{q}" for q in range(600))
    assert all(data(o) == {"q": int(o.task_id[2:])} for o in outputs)
