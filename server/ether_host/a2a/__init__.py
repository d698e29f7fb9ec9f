"""A2A: every Ether agent as an A2A agent, over gRPC (lf.a2a.v1.A2AService on the host's port)
and JSON-RPC (on the HTTP listener). docs/interop.md, "A2A", says what maps to what."""

from ether_host.a2a.cards import Endpoints
from ether_host.a2a.handler import EtherRequestHandler
from ether_host.a2a.over_grpc import SERVICE_NAME, add_to_server
from ether_host.a2a.over_http import DIRECTORY_CARD_PATH, http_routes

__all__ = [
    "DIRECTORY_CARD_PATH",
    "SERVICE_NAME",
    "Endpoints",
    "EtherRequestHandler",
    "add_to_server",
    "http_routes",
]
