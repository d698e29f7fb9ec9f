"""A2A under the host's auth: the credentials and rights of the gRPC services, on every A2A
method; running a skill needs agent.execute for the agent, as Execute does, and a caller sees
only the A2A tasks it sent."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from a2a.client import A2AClientError
from a2a.types import a2a_pb2, a2a_pb2_grpc
from a2a.utils.errors import TaskNotFoundError

from tests.interop.a2a_support import call_context, data_message, events, grpc_client, send_request
from tests.support.agents import AGENTS, deploy
from tests.support.host import HostProcess

ADMIN = "a2a-admin-token-0123456789"
READER = "a2a-reader-token-0123456789"
FLOW_ONLY = "a2a-flow-only-token-0123456789"
OTHER = "a2a-other-admin-token-0123456789"


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    folder = tmp_path_factory.mktemp("a2a-auth")
    tokens = folder / "tokens"
    tokens.write_text(
        f"admin {ADMIN}\nreader {READER} agent.read\nflowonly {FLOW_ONLY} agent.execute:flow\n"
        f"other {OTHER}\n"
    )
    tokens.chmod(0o600)
    process = HostProcess(folder / "state", "--auth-tokens-file", str(tokens))
    try:
        process.wait_serving()
        admin = (("authorization", f"Bearer {ADMIN}"),)
        for name in ("flow", "worker"):
            deploy(process, AGENTS / name, metadata=admin)
        yield process
    finally:
        process.stop()


def _send(host: HostProcess, tenant: str, metadata: Any) -> a2a_pb2.SendMessageResponse:
    async def main() -> a2a_pb2.SendMessageResponse:
        async with grpc.aio.insecure_channel(host.address) as channel:
            request = send_request(data_message({"x": 1}, "echo"))
            request.tenant = tenant
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            response: a2a_pb2.SendMessageResponse = await stub.SendMessage(
                request, metadata=metadata, timeout=30
            )
            return response

    return asyncio.run(main())


def test_without_a_token_a2a_is_unauthenticated(host: HostProcess) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        _send(host, "flow", ())
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "missing bearer token" in str(caught.value.details())


def test_without_the_execute_right_a2a_is_permission_denied(host: HostProcess) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        _send(host, "flow", (("authorization", f"Bearer {READER}"),))
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "agent.execute" in str(caught.value.details())


def test_execute_for_one_agent_runs_that_agent_only(host: HostProcess) -> None:
    only = (("authorization", f"Bearer {FLOW_ONLY}"),)
    answer = _send(host, "flow", only)
    assert answer.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        _send(host, "worker", only)
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "agent.execute:worker" in str(caught.value.details())


def test_the_sdk_client_carries_the_token_and_tasks_stay_their_senders(host: HostProcess) -> None:
    """The a2a-sdk client with the token as a service parameter discovers the card and runs a
    skill; another identity cannot read that task, nor list it, nor cancel it."""

    async def main() -> tuple[a2a_pb2.Task, Exception, list[str]]:
        async with grpc_client(host, "flow", ADMIN, streaming=False) as (client, card):
            assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
            [sent] = await events(client, send_request(data_message({"y": 2}, "echo")), ADMIN)
        async with grpc_client(host, "flow", OTHER, streaming=False) as (client, _):
            try:
                await client.get_task(
                    a2a_pb2.GetTaskRequest(id=sent.task.id), context=call_context(OTHER)
                )
            except Exception as error:
                refused = error
            listed = await client.list_tasks(
                a2a_pb2.ListTasksRequest(), context=call_context(OTHER)
            )
        return sent.task, refused, [t.id for t in listed.tasks]

    task, refused, others = asyncio.run(main())
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert isinstance(refused, TaskNotFoundError)
    assert task.id not in others


def test_the_sdk_client_without_a_token_is_refused_at_discovery(host: HostProcess) -> None:
    async def main() -> None:
        async with grpc_client(host, "flow", ""):
            pass

    with pytest.raises(A2AClientError, match="UNAUTHENTICATED"):
        asyncio.run(main())
