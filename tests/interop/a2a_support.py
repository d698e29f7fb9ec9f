"""The a2a-sdk client as a test drives it: over gRPC on the host's port (cards from
GetExtendedAgentCard) or over JSON-RPC on the HTTP listener (cards from their URLs)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import httpx
from a2a.client import Client, ClientCallContext, ClientConfig, ClientFactory, minimal_agent_card
from a2a.types import a2a_pb2
from a2a.utils.constants import TransportProtocol
from google.protobuf import json_format, struct_pb2

from ether.v1 import supervisor_pb2
from tests.support.host import HostProcess


def call_context(token: str = "") -> ClientCallContext:
    parameters = {"authorization": f"Bearer {token}"} if token else {}
    return ClientCallContext(timeout=60, service_parameters=parameters)


@asynccontextmanager
async def grpc_client(
    host: HostProcess, tenant: str, token: str = "", *, streaming: bool = True
) -> AsyncIterator[tuple[Client, a2a_pb2.AgentCard]]:
    """A client of agent ``tenant`` over gRPC, made from the card the host gives for it."""
    config = ClientConfig(
        streaming=streaming,
        grpc_channel_factory=grpc.aio.insecure_channel,
        supported_protocol_bindings=[TransportProtocol.GRPC],
    )
    factory = ClientFactory(config)
    bootstrap = factory.create(minimal_agent_card(host.address, [TransportProtocol.GRPC]))
    try:
        card = await bootstrap.get_extended_agent_card(
            a2a_pb2.GetExtendedAgentCardRequest(tenant=tenant), context=call_context(token)
        )
    finally:
        await bootstrap.close()
    client = factory.create(card)
    try:
        yield client, card
    finally:
        await client.close()


@asynccontextmanager
async def jsonrpc_client(
    agent_url: str, token: str = "", *, streaming: bool = True
) -> AsyncIterator[tuple[Client, a2a_pb2.AgentCard]]:
    """A client over JSON-RPC, made from the card under ``agent_url`` (its
    /.well-known/agent-card.json, where a2a-sdk looks by default)."""
    headers = {"authorization": f"Bearer {token}"} if token else {}
    http = httpx.AsyncClient(headers=headers, timeout=60)
    config = ClientConfig(
        streaming=streaming,
        httpx_client=http,
        supported_protocol_bindings=[TransportProtocol.JSONRPC],
    )
    try:
        client = await ClientFactory(config).create_from_url(agent_url)
        try:
            yield client, client._card  # type: ignore[attr-defined] # BaseClient keeps it
        finally:
            await client.close()
    finally:
        await http.aclose()


def data_message(params: dict[str, Any], skill: str = "", **fields: Any) -> a2a_pb2.Message:
    value = struct_pb2.Value()
    json_format.ParseDict(params, value)
    message = a2a_pb2.Message(role=a2a_pb2.ROLE_USER, message_id="m-" + skill, **fields)
    message.parts.add(data=value)
    if skill:
        message.metadata.update({"skill": skill})
    return message


def text_message(text: str, skill: str = "") -> a2a_pb2.Message:
    message = a2a_pb2.Message(role=a2a_pb2.ROLE_USER, message_id="m-text")
    message.parts.add(text=text)
    if skill:
        message.metadata.update({"skill": skill})
    return message


def send_request(message: a2a_pb2.Message, **configuration: Any) -> a2a_pb2.SendMessageRequest:
    return a2a_pb2.SendMessageRequest(
        message=message, configuration=a2a_pb2.SendMessageConfiguration(**configuration)
    )


def state(task: a2a_pb2.Task) -> str:
    return a2a_pb2.TaskState.Name(task.status.state).removeprefix("TASK_STATE_")


def output(task: a2a_pb2.Task) -> Any:
    """The data (or text) of the task's output artifact."""
    [artifact] = task.artifacts
    [part] = artifact.parts
    if part.WhichOneof("content") == "text":
        return part.text
    return json_format.MessageToDict(part.data)


async def events(client: Client, request: a2a_pb2.SendMessageRequest, token: str = "") -> list[Any]:
    """Every StreamResponse of a send, in order."""
    return [event async for event in client.send_message(request, context=call_context(token))]


def logged(
    host: HostProcess, agent: str, message: str, tag: str, token: str = ""
) -> dict[str, Any]:
    """Follow the agent's log (StreamLogs, with ``token``) until it logs ``message`` with field
    ``tag``: the flow agent's hold action logs "holding" once it runs and "saw cancel" when the
    cancel reaches it. The line's fields."""
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    stream = host.supervisor.StreamLogs(
        supervisor_pb2.StreamLogsRequest(agent=agent, tail_lines=10000, follow=True),
        timeout=60,
        metadata=metadata,
    )
    try:
        for line in stream:
            fields = json_format.MessageToDict(line.fields)
            if line.message == message and fields.get("tag") == tag:
                return fields
    finally:
        stream.cancel()
    raise AssertionError(f"the log of {agent} ended before {message!r} for {tag}")
