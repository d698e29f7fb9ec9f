"""docs/interop.md's A2A claims that no other test showed, each as a user of the a2a-sdk client
sees it against a real host: a client that goes away comes back to its task with GetTask and
SubscribeToTask; a task no replica ever started ends TASK_STATE_REJECTED (a full queue, a
deadline that passed in the queue); ListTasks filters by status_timestamp_after."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.client import Client
from a2a.types import a2a_pb2
from google.protobuf import json_format

from tests.interop.a2a_support import (
    call_context,
    data_message,
    events,
    grpc_client,
    jsonrpc_client,
    send_request,
    state,
)
from tests.support.agents import AGENTS, deploy
from tests.support.host import HostProcess

BINDINGS = ("grpc", "jsonrpc")


@pytest.fixture(scope="module")
def gates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the tally agent leaves its files in and waits for its gates in (a file the
    test writes): a task that runs until the test says so, without a sleep on either side."""
    return tmp_path_factory.mktemp("a2a-gates")


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory, gates: Path) -> Iterator[HostProcess]:
    process = HostProcess(tmp_path_factory.mktemp("a2a-claims"), shared=(gates,), http=True)
    try:
        process.wait_serving()
        deploy(process, AGENTS / "tally")
        # tally deployed under a name starting "narrow" runs two tasks at once (its agent.py);
        # with one queued task allowed, a fourth finds the queue full.
        deploy(process, AGENTS / "tally", name="narrow", max_queue=1)
        yield process
    finally:
        process.stop()


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def client_of(host: HostProcess, binding: str, tenant: str) -> Any:
    """A streaming client of ``tenant`` over ``binding``, made from the agent's card."""
    if binding == "grpc":
        return grpc_client(host, tenant)
    return jsonrpc_client(f"{host.http_address}/a2a/{tenant}")


def gated(gates: Path) -> tuple[a2a_pb2.Message, Path]:
    """A tally message whose task runs until its gate file exists; the gate's path."""
    gate = f"gate-{secrets.token_hex(4)}"
    return data_message({"folder": str(gates), "gate": gate}, "mark"), gates / gate


def state_of(event: a2a_pb2.StreamResponse) -> int:
    if event.HasField("task"):
        return event.task.status.state
    if event.HasField("status_update"):
        return event.status_update.status.state
    return a2a_pb2.TASK_STATE_UNSPECIFIED


async def until_working(client: Client, request: a2a_pb2.SendMessageRequest) -> str:
    """Stream a send until a replica runs its task, then leave (close the stream): the task's
    id."""
    stream = client.send_message(request, context=call_context())
    task_id = ""
    try:
        async for event in stream:
            task_id = task_id or event.task.id
            if state_of(event) == a2a_pb2.TASK_STATE_WORKING:
                return task_id
    finally:
        await stream.aclose()  # type: ignore[attr-defined] # an async generator
    raise AssertionError(f"the stream of {task_id} ended before its task ran")


async def open_gate(gate: Path) -> None:
    await asyncio.to_thread(gate.write_text, "open\n")


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_client_that_goes_away_comes_back_with_get_and_subscribe(
    host: HostProcess, gates: Path, binding: str
) -> None:
    """The doc: "a client that goes away does not cancel it (CancelTask does), and can come
    back with GetTask or SubscribeToTask"; "a subscriber always starts from the task as it
    stands", then its updates until a final state. The first client streams the task until it
    runs and goes away; a second client finds it still running, subscribes, and follows it to
    its end once the test opens the gate."""
    message, gate = gated(gates)

    async def main() -> tuple[str, a2a_pb2.Task, list[a2a_pb2.StreamResponse]]:
        async with client_of(host, binding, "tally") as (first, _):
            task_id = await until_working(first, send_request(message))
        # The first client is closed: its stream and connection are gone.
        async with client_of(host, binding, "tally") as (second, _):
            context = call_context()
            got = await second.get_task(a2a_pb2.GetTaskRequest(id=task_id), context=context)
            request = a2a_pb2.SubscribeToTaskRequest(id=task_id)
            subscribed = []
            async for event in second.subscribe(request, context=context):
                subscribed.append(event)
                if len(subscribed) == 1:  # the task as it stands has come: let it end
                    await open_gate(gate)
            return task_id, got, subscribed

    task_id, got, subscribed = run(main())
    assert (got.id, state(got)) == (task_id, "WORKING")
    first = subscribed[0]
    assert first.HasField("task"), first  # the task as it stands, before any update
    assert (first.task.id, state(first.task)) == (task_id, "WORKING")
    [artifact] = [e.artifact_update for e in subscribed if e.HasField("artifact_update")]
    result = json_format.MessageToDict(artifact.artifact.parts[0].data)
    assert result["task_id"] == task_id  # the Ether task is the A2A task
    last = subscribed[-1]
    assert last.status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED, last
    # It ran once: neither cancelled when the first client left nor run again.
    assert len(list(gates.glob(f"{task_id}.*.ran"))) == 1


def test_a_task_no_replica_started_is_rejected(host: HostProcess, gates: Path) -> None:
    """The doc: "TASK_STATE_REJECTED when no replica ever started it", with "the error's
    message as text and {"error": {code, message}} (code: the reason, lower case) as data":
    narrow's two slots are held, one task waits in its queue until its deadline passes, and a
    task sent while that one waits finds the queue full. The held tasks, which did start,
    complete."""
    holding = [gated(gates) for _ in range(2)]
    waiting, _ = gated(gates)

    async def main() -> tuple[list[a2a_pb2.Task], a2a_pb2.Task, list[Any], list[Any]]:
        async with grpc_client(host, "narrow", streaming=False) as (client, _):
            held = []
            for message, _gate in holding:
                # Answered once the dispatcher took the task: it holds a slot by then.
                request = send_request(message, return_immediately=True)
                [event] = await events(client, request)
                held.append(event.task)
            # The call's deadline is the task's: 5 s, spent in the queue (no slot frees).
            short = call_context()
            short.timeout = 5
            request = send_request(waiting, return_immediately=True)
            [queued] = [e async for e in client.send_message(request, context=short)]
            [full] = await events(client, send_request(gated(gates)[0]))
        async with grpc_client(host, "narrow") as (streaming, _):
            subscribe = a2a_pb2.SubscribeToTaskRequest(id=queued.task.id)
            followed = [e async for e in streaming.subscribe(subscribe, context=call_context())]
            for _message, gate in holding:
                await open_gate(gate)
            ended = []
            for task in held:
                followed_held = streaming.subscribe(
                    a2a_pb2.SubscribeToTaskRequest(id=task.id), context=call_context()
                )
                ended.append([e async for e in followed_held][-1])
        return held, full.task, followed, ended

    held, full, followed, ended = run(main())
    assert {state(task) for task in held} <= {"SUBMITTED", "WORKING"}
    assert state(full) == "REJECTED", full.status
    text, data = full.status.message.parts
    error = json_format.MessageToDict(data.data)["error"]
    assert error["code"] == "agent_queue_full"
    assert error["message"] == text.text and "tasks queued (limit 1)" in text.text
    # The queued task: SUBMITTED as it stood, then REJECTED when its deadline passed.
    assert followed[0].HasField("task") and state(followed[0].task) == "SUBMITTED"
    final = followed[-1].status_update.status
    assert final.state == a2a_pb2.TASK_STATE_REJECTED, final
    error = json_format.MessageToDict(final.message.parts[1].data)["error"]
    assert error["code"] == "deadline_waiting_for_agent"
    assert "waited for a free slot on agent narrow" in final.message.parts[0].text
    assert [state_of(e) for e in ended] == [a2a_pb2.TASK_STATE_COMPLETED] * 2


def test_list_tasks_filters_by_status_timestamp_after(host: HostProcess, gates: Path) -> None:
    """ListTasks "filtered by ... status_timestamp_after": the tasks whose status changed after
    that time, whenever they were sent. A held task sent first, then A and B, each finished
    before the next is sent: after A's status time only B is listed; once the held task ends,
    it is listed too, although it is the oldest."""
    context_id = f"ts-{secrets.token_hex(4)}"  # this test's tasks alone
    held_message, gate = gated(gates)
    held_message.context_id = context_id

    async def listed(client: Client, after: Any = None) -> list[str]:
        request = a2a_pb2.ListTasksRequest(context_id=context_id)
        if after is not None:
            request.status_timestamp_after.CopyFrom(after)
        return [
            task.id for task in (await client.list_tasks(request, context=call_context())).tasks
        ]

    async def main() -> tuple[list[str], dict[str, list[str]]]:
        # All of one agent's (the client names its tenant in ListTasks): tally's mark without a
        # gate answers at once.
        async with grpc_client(host, "tally") as (streaming, _):
            held = await until_working(streaming, send_request(held_message))
        async with grpc_client(host, "tally", streaming=False) as (tally, _):
            done = []
            for n in (1, 2):
                message = data_message({"folder": str(gates), "n": n}, "mark")
                message.context_id = context_id
                [event] = await events(tally, send_request(message))
                done.append(event.task)
            a, b = done
            seen = {
                "all": await listed(tally),
                "after a": await listed(tally, a.status.timestamp),
                "after b": await listed(tally, b.status.timestamp),
            }
            await open_gate(gate)
            async with grpc_client(host, "tally") as (streaming, _):
                request = a2a_pb2.SubscribeToTaskRequest(id=held)
                [_ async for _ in streaming.subscribe(request, context=call_context())]
            seen["after a, held ended"] = await listed(tally, a.status.timestamp)
            seen["after b, held ended"] = await listed(tally, b.status.timestamp)
            return [held, a.id, b.id], seen

    (held, a, b), seen = run(main())
    assert seen["all"] == [b, a, held]  # newest first
    assert seen["after a"] == [b]
    assert seen["after b"] == []
    assert seen["after a, held ended"] == [b, held]
    assert seen["after b, held ended"] == [held]
