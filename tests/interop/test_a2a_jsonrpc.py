"""A2A over JSON-RPC on the HTTP listener, under the host's auth: the cards at their well-known
URLs, and the same agents and tasks as over gRPC, driven by the a2a-sdk client's JSON-RPC
transport (the binding most A2A clients default to)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client import A2AClientError
from a2a.types import a2a_pb2
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    TaskNotCancelableError,
)
from google.protobuf import json_format

from tests.interop.a2a_support import (
    call_context,
    data_message,
    events,
    jsonrpc_client,
    logged,
    output,
    send_request,
    state,
    text_message,
)
from tests.support.agents import AGENTS, deploy
from tests.support.host import HostProcess

ADMIN = "jsonrpc-admin-token-0123456789"
READER = "jsonrpc-reader-token-0123456789"
FLOW_ONLY = "jsonrpc-flow-only-token-0123456789"


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    folder = tmp_path_factory.mktemp("a2a-jsonrpc")
    tokens = folder / "tokens"
    tokens.write_text(
        f"admin {ADMIN}\nreader {READER} agent.read\nflowonly {FLOW_ONLY} agent.execute:flow\n"
    )
    tokens.chmod(0o600)
    process = HostProcess(folder / "state", "--auth-tokens-file", str(tokens), http=True)
    try:
        process.wait_serving()
        admin = (("authorization", f"Bearer {ADMIN}"),)
        for name in ("flow", "worker", "seed"):
            deploy(process, AGENTS / name, metadata=admin)
        yield process
    finally:
        process.stop()


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def _get(url: str, token: str = "") -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.get(url, headers=headers, timeout=30)


def test_the_directory_card_lists_each_agent_with_its_card(host: HostProcess) -> None:
    answer = _get(f"{host.http_address}/.well-known/agent-card.json", READER)
    assert answer.status_code == 200, answer.text
    card = answer.json()
    assert card["name"] == "ether"
    assert {"flow", "worker", "seed"} <= {skill["id"] for skill in card["skills"]}
    [directory] = [e for e in card["capabilities"]["extensions"] if "directory" in e["uri"]]
    by_name = {entry["name"]: entry for entry in directory["params"]["agents"]}
    assert by_name["flow"]["card"] == f"{host.http_address}/a2a/flow/.well-known/agent-card.json"
    agent = _get(by_name["flow"]["card"], ADMIN).json()
    bindings = {i["protocolBinding"]: i for i in agent["supportedInterfaces"]}
    assert bindings["JSONRPC"]["url"] == f"{host.http_address}/a2a/flow"
    assert bindings["GRPC"]["url"] == host.address
    assert {i["tenant"] for i in agent["supportedInterfaces"]} == {"flow"}
    assert agent["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"


def test_send_stream_get_list_and_subscribe_over_jsonrpc(host: HostProcess) -> None:
    async def main() -> tuple[Any, ...]:
        url = f"{host.http_address}/a2a/flow"
        async with jsonrpc_client(url, ADMIN, streaming=False) as (client, card):
            assert card.name == "flow"
            extended = await client.get_extended_agent_card(
                a2a_pb2.GetExtendedAgentCardRequest(), context=call_context()
            )
            status = json_format.MessageToDict(extended.capabilities.extensions[-1].params)
            assert (status["state"], status["replicas"]) == ("RUNNING", 1)
            [sent] = await events(client, send_request(data_message({"input": 4}, "double")))
            context = call_context()
            got = await client.get_task(a2a_pb2.GetTaskRequest(id=sent.task.id), context=context)
            listed = await client.list_tasks(a2a_pb2.ListTasksRequest(), context=context)
        async with jsonrpc_client(url, ADMIN) as (client, _):
            streamed = await events(client, send_request(data_message({"k": "v"}, "echo")))
            subscribed = [
                e
                async for e in client.subscribe(
                    a2a_pb2.SubscribeToTaskRequest(id=sent.task.id), context=context
                )
            ]
        return sent.task, got, listed, streamed, subscribed

    sent, got, listed, streamed, subscribed = run(main())
    assert state(sent) == "COMPLETED" and output(sent) == {"value": 8}
    assert got.id == sent.id and output(got) == {"value": 8}
    assert sent.id in [task.id for task in listed.tasks]
    assert streamed[0].WhichOneof("payload") == "task"
    [artifact] = [e.artifact_update for e in streamed if e.HasField("artifact_update")]
    assert json_format.MessageToDict(artifact.artifact.parts[0].data) == {"k": "v"}
    assert streamed[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    [final] = subscribed
    assert final.task.id == sent.id and state(final.task) == "COMPLETED"


def test_text_and_cancel_over_jsonrpc(host: HostProcess) -> None:
    async def main() -> tuple[a2a_pb2.Task, a2a_pb2.Task, Exception]:
        async with jsonrpc_client(f"{host.http_address}/a2a/seed", ADMIN, streaming=False) as (
            client,
            _,
        ):
            [texted] = await events(client, send_request(text_message("loud")))
        async with jsonrpc_client(f"{host.http_address}/a2a/flow", ADMIN, streaming=False) as (
            client,
            _,
        ):
            request = send_request(
                data_message({"tag": "jsonrpc"}, "hold"), return_immediately=True
            )
            [held] = await events(client, request)
            await asyncio.to_thread(logged, host, "flow", "holding", "jsonrpc", ADMIN)
            context = call_context()
            cancelled = await client.cancel_task(
                a2a_pb2.CancelTaskRequest(id=held.task.id), context=context
            )
            try:
                await client.cancel_task(
                    a2a_pb2.CancelTaskRequest(id=held.task.id), context=context
                )
            except Exception as error:
                again = error
        return texted.task, cancelled, again

    texted, cancelled, again = run(main())
    assert output(texted) == {"upper": "LOUD"}
    assert state(cancelled) == "CANCELED"
    assert isinstance(again, TaskNotCancelableError)
    assert logged(host, "flow", "saw cancel", "jsonrpc", ADMIN)["run_task"] == cancelled.id


def test_bad_input_over_jsonrpc_gets_the_a2a_errors(host: HostProcess) -> None:
    async def main() -> dict[str, Exception]:
        caught: dict[str, Exception] = {}
        async with jsonrpc_client(f"{host.http_address}/a2a/flow", ADMIN, streaming=False) as (
            client,
            _,
        ):
            cases = {
                "unknown skill": send_request(data_message({}, "fly")),
                "no parts": send_request(a2a_pb2.Message(role=a2a_pb2.ROLE_USER, message_id="x")),
                "text to a skill without text": send_request(text_message("2", "double")),
            }
            for name, request in cases.items():
                try:
                    await events(client, request)
                except Exception as error:
                    caught[name] = error
            other = send_request(data_message({}, "echo"))
            other.tenant = "worker"  # not the agent of the URL
            try:
                await events(client, other)
            except Exception as error:
                caught["tenant off the URL"] = error
        return caught

    caught = run(main())
    assert isinstance(caught["unknown skill"], InvalidParamsError)
    assert "has no action 'fly'" in str(caught["unknown skill"])
    assert isinstance(caught["no parts"], InvalidParamsError)
    assert isinstance(caught["text to a skill without text"], ContentTypeNotSupportedError)
    assert isinstance(caught["tenant off the URL"], InvalidParamsError)
    # An unknown agent: its card is not found, and JSON-RPC to it is InvalidParams.
    assert (
        _get(f"{host.http_address}/a2a/nobody/.well-known/agent-card.json", ADMIN).status_code
        == 404
    )
    answer = httpx.post(
        f"{host.http_address}/a2a/nobody",
        headers={"authorization": f"Bearer {ADMIN}", "A2A-Version": "1.0"},
        json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}},
        timeout=30,
    )
    assert answer.json()["error"]["code"] == -32001  # TaskNotFound: nobody has no tasks
    sent = httpx.post(
        f"{host.http_address}/a2a/nobody",
        headers={"authorization": f"Bearer {ADMIN}", "A2A-Version": "1.0"},
        json={
            "jsonrpc": "2.0",
            "id": 2,
            "method": "SendMessage",
            "params": {
                "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
            },
        },
        timeout=30,
    ).json()
    assert sent["error"]["code"] == -32602, sent
    assert "unknown tenant 'nobody'" in sent["error"]["message"]


def test_an_unsupported_version_is_refused_over_jsonrpc(host: HostProcess) -> None:
    answer = httpx.post(
        f"{host.http_address}/a2a/flow",
        headers={"authorization": f"Bearer {ADMIN}", "A2A-Version": "0.3"},
        json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}},
        timeout=30,
    ).json()
    assert answer["error"]["code"] == -32009, answer  # VersionNotSupportedError
    assert "'0.3' is not supported" in answer["error"]["message"]


def test_jsonrpc_and_cards_need_the_token_and_the_right(host: HostProcess) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}
    headers = {"A2A-Version": "1.0"}
    flow = f"{host.http_address}/a2a/flow"
    anonymous = httpx.post(flow, json=body, headers=headers, timeout=30)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["reason"] == "INVALID_CREDENTIALS"
    reader = httpx.post(
        flow, json=body, headers=headers | {"authorization": f"Bearer {READER}"}, timeout=30
    )
    assert reader.status_code == 403 and "agent.execute" in reader.json()["error"]["message"]
    assert _get(f"{flow}/.well-known/agent-card.json", READER).status_code == 403
    assert _get(f"{host.http_address}/.well-known/agent-card.json").status_code == 401
    only = {"authorization": f"Bearer {FLOW_ONLY}"} | headers
    worker = httpx.post(f"{host.http_address}/a2a/worker", json=body, headers=only, timeout=30)
    assert worker.status_code == 403
    assert "agent.execute:worker" in worker.json()["error"]["message"]
    mine = httpx.post(flow, json=body, headers=only, timeout=30).json()
    assert mine["error"]["code"] == -32001  # let in: no task t of flowonly's

    async def main() -> None:
        async with jsonrpc_client(flow, ""):
            pass

    with pytest.raises((A2AClientError, httpx.HTTPStatusError, Exception)) as refused:
        run(main())
    assert "401" in str(refused.value)
