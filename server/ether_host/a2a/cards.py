"""Agent cards derived from the directory: one per Ether agent, and the host's own.

An agent's card names it, lists its actions as skills (the JSON Schema of each skill's params
is in the ``SCHEMAS_URI`` extension: AgentSkill has no field for it), and its interfaces: the
host's gRPC port and, with the HTTP listener, JSON-RPC at ``/a2a/<agent>``, both with the
agent's name as ``tenant``. The extended card (GetExtendedAgentCard, for callers that may run
the agent) adds the live state A2A has no place for: replicas, load and health, in the
``STATUS_URI`` extension. The host's card (the directory at /.well-known/agent-card.json) has
one skill per agent, whose card is at ``/a2a/<agent>/.well-known/agent-card.json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2a.types import a2a_pb2
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_CURRENT

from ether_host import __version__
from ether_host.a2a.messages import JSON_MODE, TEXT_MODE, takes_text
from ether_host.supervisor import ManagedAgent

SCHEMAS_URI = "urn:ether:a2a:action-schemas:v1"
STATUS_URI = "urn:ether:a2a:agent-status:v1"
DIRECTORY_URI = "urn:ether:a2a:directory:v1"
A2A_PATH = "/a2a"  # JSON-RPC of agent NAME at /a2a/NAME, its card below it
BEARER = "bearer"


@dataclass(frozen=True)
class Endpoints:
    """Where the host answers A2A: its gRPC address (host:port or unix:PATH), the HTTP
    listener's base URL ('' without one), and whether callers must bring a bearer token."""

    grpc: str = ""
    http: str = ""
    auth: bool = False

    def agent_url(self, name: str) -> str:
        return f"{self.http}{A2A_PATH}/{name}"

    def card_url(self, name: str) -> str:
        return f"{self.agent_url(name)}{AGENT_CARD_WELL_KNOWN_PATH}"


def agent_card(agent: ManagedAgent, endpoints: Endpoints) -> a2a_pb2.AgentCard:
    """The public card of one agent."""
    card = _card(agent.name, agent.description or f"Ether agent {agent.name}", endpoints)
    card.version = agent.version or "0"
    interfaces = []
    if endpoints.grpc:
        interfaces.append(_interface(endpoints.grpc, "GRPC", agent.name))
    if endpoints.http:
        interfaces.append(_interface(endpoints.agent_url(agent.name), "JSONRPC", agent.name))
    card.supported_interfaces.extend(interfaces)
    schemas: dict[str, Any] = {}
    for action in agent.actions:
        modes = [JSON_MODE, TEXT_MODE] if takes_text(action) else [JSON_MODE]
        card.skills.add(
            id=action.name,
            name=action.name,
            description=action.description or f"{agent.name}.{action.name}",
            tags=[*agent.capability_tags, agent.spec.language],
            input_modes=modes,
            output_modes=[JSON_MODE, TEXT_MODE],
        )
        schemas[action.name] = {
            "params_schema": action.params_schema,
            "idempotent": action.idempotent,
        }
    extension = card.capabilities.extensions.add(
        uri=SCHEMAS_URI,
        description="The JSON Schema of each skill's params (a data part), by skill id.",
    )
    extension.params.update({"skills": schemas})
    return card


def extended_card(agent: ManagedAgent, endpoints: Endpoints) -> a2a_pb2.AgentCard:
    """The public card plus the agent's live state."""
    card = agent_card(agent, endpoints)
    extension = card.capabilities.extensions.add(
        uri=STATUS_URI,
        description="The agent's state, replicas and load when the card was made.",
    )
    extension.params.update(
        {
            "state": agent.state.value,
            "kind": agent.spec.kind,
            "language": agent.spec.language,
            "replicas": agent.spec.replicas,
            "ready_replicas": agent.ready_replicas,
            "in_flight": agent.in_flight,
            "queued": agent.queued,
            "max_concurrency": agent.max_concurrency,
        }
    )
    return card


def directory_card(agents: list[ManagedAgent], endpoints: Endpoints) -> a2a_pb2.AgentCard:
    """The host's card: a skill per agent, pointing at the agent's own card."""
    card = _card(
        "ether",
        "An Ether host: every agent below is an A2A agent of its own, addressed by its name as "
        "tenant; its card is at the URL of its skill's examples.",
        endpoints,
    )
    card.version = __version__
    if endpoints.grpc:
        card.supported_interfaces.append(_interface(endpoints.grpc, "GRPC", ""))
    if endpoints.http:
        card.supported_interfaces.append(_interface(endpoints.http + A2A_PATH, "JSONRPC", ""))
    directory = []
    for agent in agents:
        card.skills.add(
            id=agent.name,
            name=agent.name,
            description=agent.description or f"Ether agent {agent.name}",
            tags=[*agent.capability_tags, agent.spec.language],
            examples=[endpoints.card_url(agent.name)] if endpoints.http else [],
            input_modes=[JSON_MODE, TEXT_MODE],
            output_modes=[JSON_MODE, TEXT_MODE],
        )
        entry = {"name": agent.name, "tenant": agent.name, "state": agent.state.value}
        if endpoints.http:
            entry["card"] = endpoints.card_url(agent.name)
        directory.append(entry)
    extension = card.capabilities.extensions.add(
        uri=DIRECTORY_URI, description="The agents of this host, with their cards and states."
    )
    extension.params.update({"agents": directory})
    return card


def _card(name: str, description: str, endpoints: Endpoints) -> a2a_pb2.AgentCard:
    card = a2a_pb2.AgentCard(
        name=name,
        description=description,
        default_input_modes=[JSON_MODE, TEXT_MODE],
        default_output_modes=[JSON_MODE, TEXT_MODE],
    )
    card.capabilities.streaming = True
    card.capabilities.push_notifications = False
    card.capabilities.extended_agent_card = True
    if endpoints.auth:
        card.security_schemes[BEARER].http_auth_security_scheme.CopyFrom(
            a2a_pb2.HTTPAuthSecurityScheme(
                scheme="Bearer",
                description="A token of the host's auth_tokens_file (docs/auth.md); running a "
                "skill needs the agent.execute right for the agent.",
            )
        )
        card.security_requirements.add().schemes[BEARER].CopyFrom(a2a_pb2.StringList())
    return card


def _interface(url: str, binding: str, tenant: str) -> a2a_pb2.AgentInterface:
    return a2a_pb2.AgentInterface(
        url=url, protocol_binding=binding, tenant=tenant, protocol_version=PROTOCOL_VERSION_CURRENT
    )
