"""The host's HTTP listener: one ASGI app (starlette) served by uvicorn in the host's own event
loop and task group, under the gRPC port's rules (auth, rights, the per-request log line, the
drain on stop). Surfaces mount on it through ``build_http_app`` (see its docstring): ``/mcp``
(``McpSurface``, Ether's agents as MCP tools) and A2A's routes."""

from ether_host.http.app import HEALTH_PATH, build_http_app
from ether_host.http.guard import HttpGuard, error_body, request_identity
from ether_host.http.listener import HttpListener, HttpListenError
from ether_host.http.mcp import MCP_PATH, CoreTools, McpSurface

__all__ = [
    "HEALTH_PATH",
    "MCP_PATH",
    "CoreTools",
    "HttpGuard",
    "HttpListenError",
    "HttpListener",
    "McpSurface",
    "build_http_app",
    "error_body",
    "request_identity",
]
