"""Edge claims of docs/interop.md and of docs/limits.md's interop rows that no other test asserts,
as a user of the official a2a-sdk client (gRPC and JSON-RPC) and of the host's gRPC services
sees them against one real host (HTTP listener on, no auth):

- docs/limits.md, "nesting of what an agent answered" (A2A data parts): an output nested past
  90 protobuf levels reaches the A2A client as a text note in place of the value, on both
  bindings, as the output artifact, in GetTask and in a failed task's status message; one level
  less arrives as it is. A proposal's params that deep (Task.metadata.ether.next_actions) should
  do the same (they made the task unreadable before: a fault, mended).
- docs/limits.md, "events an A2A task keeps for subscribers while it runs" (256): a subscriber
  that stops reading while the task reports thousands of progress events gets, once it reads
  on, the task as it stands (its final state and output) in place of the events it missed.
- docs/interop.md, "MCP servers as agents" / "Bad input": an unmodified MCP server that never
  answers initialize is retried per `start_retries` (each start a failure naming
  `start_timeout`), then FATAL with its stderr tail in the event and in `AgentStatus.reason`.
- docs/interop.md, "MCP servers as agents": the server's `ping` request is answered `{}`, any
  other request of the server (sampling) JSON-RPC error -32601.
- docs/interop.md, "A2A" / "A task out": Task.metadata.ether carries the model, the cost and
  the next actions the agent proposed.
"""

from __future__ import annotations

import asyncio
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.types import a2a_pb2
from google.protobuf import duration_pb2, json_format

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.interop.a2a_support import (
    call_context,
    data_message,
    events,
    grpc_client,
    send_request,
    state,
)
from tests.interop.test_a2a_doc_claims import BINDINGS, client_of
from tests.interop.test_mcp_doc_claims import deploy_server
from tests.support.agents import AGENTS, deploy, events_until, state_name
from tests.support.calls import data, execute, nested
from tests.support.host import HostProcess

PY_SERVERS = Path(__file__).resolve().parent / "mcp_servers_py"
STDERR_LINE = "silent server: reading requests, answering none"  # silent.py's only line
NOTE = (  # what a data part holds in place of a value nested too deep (struct_values.py)
    "this value is not shown here: it nests objects and lists deeper than a protobuf Value "
    "can carry"
)

# A Python SDK agent: "burst", once the test opens its gate (a file), reports `count` progress
# events of `size` characters each, then answers; "propose" proposes a next action whose params
# nest `levels` lists under a key.
SURGE = """
import asyncio
from pathlib import Path
from ether_agent import Agent, NextAction, Output, TaskContext

agent = Agent("surge", version="1.0.0", description="Reports progress in bursts.")


@agent.action(description="Wait for the gate file, then report `count` progress events.")
async def burst(gate: str, count: int, size: int, ctx: TaskContext) -> dict:
    while not Path(gate).exists():
        await asyncio.sleep(0.02)
    pad = "x" * size
    for n in range(1, count + 1):
        ctx.progress(n, count, pad)
    return {"sent": count}


@agent.action(description="Answer {} and propose flow's echo with params nesting `levels` lists.")
def propose(levels: int) -> Output:
    value = []
    for _ in range(levels - 1):
        value = [value]
    return Output({}, next_actions=[NextAction("flow", "echo", {"deep": value}, reason="deep")])


if __name__ == "__main__":
    agent.run()
"""

# An MCP stdio server written by hand to the protocol: its tool "ask" sends the host a request
# of the given method and answers the call with what the host answered it.
ASKER = """
import json, sys
def send(message):
    print(json.dumps(message), flush=True)
asking = None  # the id of the tools/call waiting for the host's answer
for line in sys.stdin:
    message = json.loads(line)
    method, rid, params = message.get("method"), message.get("id"), message.get("params") or {}
    if method is None and rid == "asked":
        send({"jsonrpc": "2.0", "id": asking,
              "result": {"content": [], "structuredContent": {"answer": message}}})
        continue
    if rid is None or method is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "asker", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "ask", "description": "ask the host",
                             "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        asking = rid
        send({"jsonrpc": "2.0", "id": "asked", "method": params["arguments"]["method"]})
        continue
    send({"jsonrpc": "2.0", "id": rid, "result": result})
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Shared with the agents: the surge agent's folder and the gates the test opens."""
    made = tmp_path_factory.mktemp("interop-edge")
    surge = made / "surge"
    surge.mkdir()
    (surge / "agent.py").write_text(textwrap.dedent(SURGE))
    (surge / "agent.toml").write_text('language = "python"\nstop_grace = 1\n')
    (made / "asker.py").write_text(textwrap.dedent(ASKER))
    return made


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory, folder: Path) -> Iterator[HostProcess]:
    process = HostProcess(tmp_path_factory.mktemp("interop-edge-host"), shared=(folder,), http=True)
    try:
        process.wait_serving()
        deploy(process, AGENTS / "flow")
        deploy(process, folder / "surge")
        event = deploy_server(process, folder, "asker", "asker.py")
        assert state_name(event.state) == "RUNNING", event.reason
        yield process
    finally:
        process.stop()


def part_value(part: a2a_pb2.Part) -> Any:
    assert part.WhichOneof("content") == "data", part
    return json_format.MessageToDict(part.data)


# -- docs/limits.md: nesting of what an agent answered, in A2A data parts ------------------------


@pytest.mark.parametrize("binding", BINDINGS)
def test_an_output_too_deep_for_a_value_reaches_the_a2a_client_as_a_note(
    host: HostProcess, binding: str
) -> None:
    """limits.md: A2A data parts holding what an agent answered nested past 90 protobuf levels
    show a text note in its place ("... is not shown here: it nests objects and lists deeper
    than a protobuf Value can carry ..."), not an error. flow's nest answers 46 lists (92
    levels): the streamed artifact, the finished task and GetTask carry the note, the task
    COMPLETED; 45 lists (90 levels) arrive as they are."""

    async def main() -> tuple[list[Any], a2a_pb2.Task, list[Any]]:
        async with client_of(host, binding, "flow") as (client, _):
            deep = await events(client, send_request(data_message({"levels": 46}, "nest")))
            got = await client.get_task(
                a2a_pb2.GetTaskRequest(id=deep[0].task.id), context=call_context()
            )
            edge = await events(client, send_request(data_message({"levels": 45}, "nest")))
        return deep, got, edge

    deep, got, edge = asyncio.run(main())
    assert deep[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED, deep[-1]
    [artifact] = [e.artifact_update.artifact for e in deep if e.HasField("artifact_update")]
    for shown in (artifact, *got.artifacts):
        [part] = shown.parts
        note = part_value(part)
        assert isinstance(note, str) and note.startswith(NOTE), note
    assert state(got) == "COMPLETED"
    [edge_artifact] = [e.artifact_update.artifact for e in edge if e.HasField("artifact_update")]
    assert part_value(edge_artifact.parts[0]) == nested(45)


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_failed_tasks_details_too_deep_leave_its_message_readable(
    host: HostProcess, binding: str
) -> None:
    """The same for a failed task's status message, whose data part is `{"error": {code,
    message, details, retryable}}`: error details nesting 44 lists come as TASK_STATE_FAILED
    with the error's message as text and the note as data, rather than a stream the client
    cannot decode."""

    async def main() -> list[Any]:
        async with client_of(host, binding, "flow") as (client, _):
            message = data_message({"levels": 44, "where": "details"}, "nest")
            return await events(client, send_request(message))

    streamed = asyncio.run(main())
    final = streamed[-1].status_update.status
    assert final.state == a2a_pb2.TASK_STATE_FAILED, streamed[-1]
    text, data = final.message.parts
    assert text.text == "44 lists"
    note = part_value(data)
    assert isinstance(note, str) and note.startswith(NOTE), note


def test_a_proposal_too_deep_leaves_the_a2a_task_readable(host: HostProcess) -> None:
    """limits.md: "a proposal's params" past 90 levels become a Struct of one field, `not_shown`,
    and every other reply showing what an agent wrote does the same; A2A shows an agent's
    proposals in Task.metadata.ether.next_actions. surge's propose answers {} and proposes
    flow's echo with params {deep: 44 lists} (91 levels): SendMessage (not streaming) answers
    the COMPLETED task and GetTask reads it back, the proposal's params replaced by the note."""

    async def main() -> tuple[a2a_pb2.Task, a2a_pb2.Task]:
        async with grpc_client(host, "surge", streaming=False) as (client, _):
            message = data_message({"levels": 44}, "propose")
            [answered] = await events(client, send_request(message))
            got = await client.get_task(
                a2a_pb2.GetTaskRequest(id=answered.task.id), context=call_context()
            )
        return answered.task, got

    answered, got = asyncio.run(main())
    for task in (answered, got):
        assert state(task) == "COMPLETED", task.status
        [proposal] = json_format.MessageToDict(task.metadata)["ether"]["next_actions"]
        assert (proposal["agent"], proposal["action"]) == ("flow", "echo")
        assert list(proposal["params"]) == ["not_shown"], proposal
        assert "not shown here: it nests objects and lists" in proposal["params"]["not_shown"]


# -- docs/limits.md: events an A2A task keeps for subscribers while it runs -----------------------

HELD = 256  # docs/limits.md: the events a running A2A task keeps for its subscribers


def progress_of(event: a2a_pb2.StreamResponse) -> int | None:
    """The step of a progress update (its status message's data part), else None."""
    if not event.HasField("status_update") or not event.status_update.status.HasField("message"):
        return None
    _text, data = event.status_update.status.message.parts
    return int(part_value(data)["progress"])


def test_a_subscriber_far_behind_gets_the_task_as_it_stands(
    host: HostProcess, folder: Path
) -> None:
    """limits.md: "events an A2A task keeps for subscribers while it runs": 256; a subscriber
    further behind gets the task as it stands instead of the events it missed (among them an
    artifact's appended chunks, without which its artifacts would be wrong). A task waits for a
    gate; a second client subscribes to it, reads the task as it stands and then reads nothing
    while surge reports 4000 progress events of 8 KB (far more than a stream's flow-control
    window holds); the sender's own stream follows the task to its end. Then the subscriber
    reads on: steps in order, and wherever it had fallen behind, the task as it stands before
    the next step it gets -- never a silent gap -- up to COMPLETED, with the output artifact
    (as an event or in the task). (Before, it got the task's last 256 events after a silent
    gap.)"""
    count = 4000
    gate = folder / f"gate-{uuid.uuid4().hex[:8]}"
    message = data_message({"gate": str(gate), "count": count, "size": 8192}, "burst")

    async def main() -> tuple[list[Any], list[Any]]:
        async with (
            grpc_client(host, "surge") as (sender, _),
            grpc_client(host, "surge") as (
                subscriber,
                _,
            ),
        ):
            sent = sender.send_message(send_request(message), context=call_context())
            first = await anext(sent)
            request = a2a_pb2.SubscribeToTaskRequest(id=first.task.id)
            followed = subscriber.subscribe(request, context=call_context())
            seen = [await anext(followed)]  # the task as it stands; then nothing is read
            gate.write_text("open")
            kept = [first] + [event async for event in sent]
            seen += [event async for event in followed]
        return kept, seen

    kept, seen = asyncio.run(main())
    # The sender reads as fast as it can, and may fall behind too: its last event is then the
    # task as it stands rather than the final status update.
    ended = kept[-1].task.status if kept[-1].HasField("task") else kept[-1].status_update.status
    assert ended.state == a2a_pb2.TASK_STATE_COMPLETED, kept[-1]
    assert seen[0].HasField("task") and seen[0].task.id == kept[0].task.id
    # Read on, the subscriber is behind, perhaps more than once (it catches up a little between
    # two falls): every jump in the steps comes right after a Task -- the task as it stands --
    # and never silently.
    last_step, snapshot, skipped, artifacts = 0, False, 0, []
    for event in seen[1:]:
        if event.HasField("task"):
            snapshot = True
            artifacts += [part_value(a.parts[0]) for a in event.task.artifacts]
            continue
        if event.HasField("artifact_update"):
            artifacts.append(part_value(event.artifact_update.artifact.parts[0]))
        step = progress_of(event)
        if step is None:
            continue
        if step != last_step + 1:
            assert snapshot and step > last_step, f"step {last_step}, then {step} silently"
            skipped += 1
        last_step, snapshot = step, False
    if last_step < count:  # the steps after the last one it got came as the task, at the end
        assert snapshot, f"steps after {last_step} missing, and no task in their place"
        skipped += 1
    assert skipped, "the subscriber never fell behind: nothing was checked"
    last = seen[-1]
    ended = last.task.status if last.HasField("task") else last.status_update.status
    assert ended.state == a2a_pb2.TASK_STATE_COMPLETED, last
    assert {"sent": count} in artifacts, artifacts


# -- docs/interop.md: an MCP server that never answers initialize --------------------------------


def test_a_silent_mcp_server_is_retried_per_start_retries_then_fatal(host: HostProcess) -> None:
    """Bad input: "no answer to `initialize` within `start_timeout`: a start failure (...),
    retried per `start_retries`, then FATAL with the server's stderr tail in the event and in
    `AgentStatus.reason`". An unmodified server that reads its requests and answers none,
    deployed with start_timeout 1 s and start_retries 2, is started three times (each failure
    naming start_timeout, each process a new one), then FATAL; its process counts 2 restarts."""
    host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(
                name="mute",
                path=str(PY_SERVERS),
                protocol=supervisor_pb2.LINK_PROTOCOL_MCP,
                command=["python", "silent.py"],
                start_timeout=duration_pb2.Duration(seconds=1),
                start_retries=2,
                backoff_base=duration_pb2.Duration(nanos=100_000_000),
            )
        ),
        timeout=30,
    )
    seen = events_until(host, "mute", after=0, last=lambda e: state_name(e.state) == "FATAL")
    assert [state_name(e.state) for e in seen] == [
        "INSTALLING",
        *("STARTING", "BACKOFF") * 2,
        "STARTING",
        "FATAL",
    ], [(state_name(e.state), e.reason) for e in seen]
    silence = "no answer to MCP initialize and tools/list within 1s (start_timeout)"
    starts = [e for e in seen if state_name(e.state) == "STARTING"]
    assert len({e.pid for e in starts}) == 3 and all(e.pid > 0 for e in starts)
    for failed in (e for e in seen if state_name(e.state) == "BACKOFF"):
        assert failed.reason.startswith(silence), failed.reason
    fatal = seen[-1]
    assert fatal.reason.startswith(f"failed to start 3 times; last: {silence}"), fatal.reason
    assert STDERR_LINE in fatal.stderr_tail
    # ScaleAgent to the replicas it has changes nothing and answers the AgentStatus.
    scaled = supervisor_pb2.ScaleAgentRequest(name="mute", replicas=1)
    status = host.supervisor.ScaleAgent(scaled, timeout=30).agent
    assert state_name(status.info.state) == "FATAL"
    assert status.reason.startswith(fatal.reason) and STDERR_LINE in status.reason, status.reason
    assert [p.restarts for p in status.processes] == [2]


@pytest.mark.parametrize(
    ("method", "answer"),
    [
        ("ping", {"result": {}}),
        (
            "sampling/createMessage",
            {"error": {"code": -32601, "message": "Method not found: sampling/createMessage"}},
        ),
    ],
    ids=["ping", "other"],
)
def test_the_host_answers_a_servers_requests(
    host: HostProcess, method: str, answer: dict[str, Any]
) -> None:
    """MCP servers as agents: "the server's `ping` request: answered `{}`"; "any other request
    of the server ... JSON-RPC error -32601: the host declares no client capabilities" (here
    sampling, which Ether does not use). asker's tool sends the host the request in the middle
    of a tools/call and answers the call with the host's reply."""
    output = execute(host, "asker", "ask", {"method": method})
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error.message
    assert data(output)["answer"] == {"jsonrpc": "2.0", "id": "asked", **answer}


# -- docs/interop.md: A2A, a task out ------------------------------------------------------------


def test_task_metadata_carries_the_model_cost_and_proposals(host: HostProcess) -> None:
    """A task out: "duration, cost, model, pid, attempt, next actions -> Task.metadata.ether":
    flow's charge reports cost 0.25 and model flow-model, flow's propose two next actions; the
    finished tasks carry them under metadata.ether (cost, model, next_actions with agent,
    action, params and reason, as the agent wrote them)."""

    async def main() -> tuple[a2a_pb2.Task, a2a_pb2.Task]:
        async with grpc_client(host, "flow", streaming=False) as (client, _):
            charge = data_message({"cost": 0.25, "input": "x"}, "charge")
            [charged] = await events(client, send_request(charge))
            propose = data_message({"count": 2, "depth": 1, "tag": "t"}, "propose")
            [proposed] = await events(client, send_request(propose))
        return charged.task, proposed.task

    charged, proposed = asyncio.run(main())
    ether = json_format.MessageToDict(charged.metadata)["ether"]
    assert (ether["cost"], ether["model"]) == (0.25, "flow-model"), ether
    assert "next_actions" not in ether
    ether = json_format.MessageToDict(proposed.metadata)["ether"]
    assert "model" not in ether
    assert ether["next_actions"] == [
        {
            "agent": "flow",
            "action": "propose",
            "params": {"count": 0, "depth": 0, "tag": f"t/{i}"},
            "reason": "follow up",
        }
        for i in range(2)
    ]
