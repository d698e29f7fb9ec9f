"""Call an Ether agent as an A2A agent with the official a2a-sdk client, over gRPC.

    .venv/bin/python clients/examples/python/a2a_send.py ADDRESS AGENT SKILL PARAMS_JSON

The agent's card comes from the host (GetExtendedAgentCard with the agent's name as tenant);
the client then streams the task: its states, and the output artifact when it comes. Set
ETHER_TOKEN when the host has auth on. Nothing here is Ether's: any A2A client does the same.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import grpc
from a2a.client import ClientCallContext, ClientConfig, ClientFactory, minimal_agent_card
from a2a.types import a2a_pb2
from a2a.utils.constants import TransportProtocol
from google.protobuf import json_format


async def send(address: str, agent: str, skill: str, params: dict[str, object]) -> int:
    token = os.environ.get("ETHER_TOKEN", "")
    context = ClientCallContext(
        timeout=60, service_parameters={"authorization": f"Bearer {token}"} if token else {}
    )
    factory = ClientFactory(
        ClientConfig(
            grpc_channel_factory=grpc.aio.insecure_channel,
            supported_protocol_bindings=[TransportProtocol.GRPC],
        )
    )
    bootstrap = factory.create(minimal_agent_card(address, [TransportProtocol.GRPC]))
    card = await bootstrap.get_extended_agent_card(
        a2a_pb2.GetExtendedAgentCardRequest(tenant=agent), context=context
    )
    await bootstrap.close()
    print(f"{card.name}: {card.description} (skills: {', '.join(s.id for s in card.skills)})")
    message = a2a_pb2.Message(role=a2a_pb2.ROLE_USER, message_id="readme-1")
    json_format.ParseDict(params, message.parts.add().data)
    message.metadata.update({"skill": skill})
    client = factory.create(card)
    state = a2a_pb2.TASK_STATE_UNSPECIFIED
    try:
        async for event in client.send_message(
            a2a_pb2.SendMessageRequest(message=message), context=context
        ):
            if event.HasField("task"):
                state = event.task.status.state
                print(f"task {event.task.id}:", a2a_pb2.TaskState.Name(state))
            elif event.HasField("status_update"):
                state = event.status_update.status.state
                print("status:", a2a_pb2.TaskState.Name(state))
            elif event.HasField("artifact_update"):
                for part in event.artifact_update.artifact.parts:
                    data = json_format.MessageToDict(part.data) if part.HasField("data") else None
                    print(part.text if part.text else json.dumps(data, indent=2))
    finally:
        await client.close()
    return 0 if state == a2a_pb2.TASK_STATE_COMPLETED else 1


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    address, agent, skill, params = sys.argv[1:]
    sys.exit(asyncio.run(send(address, agent, skill, json.loads(params))))
