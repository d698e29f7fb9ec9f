"""The host's HTTP listener: one ASGI app (starlette) served by uvicorn in the host's own event
loop and task group, under the gRPC port's rules (auth, rights, the per-request log line, the
drain on stop). Surfaces mount on it through ``build_http_app`` (see its docstring): ``/mcp``
(``ether_host.http.mcp.McpSurface``, Ether's agents as MCP tools) and A2A's routes.

``CoreTools``, ``McpSurface`` and ``MCP_PATH`` load ``ether_host.http.mcp`` on first use: the
MCP SDK's server side costs the host about 40 MiB of RSS, paid only with a listener."""

from typing import TYPE_CHECKING, Any

from ether_host.http.app import HEALTH_PATH, build_http_app
from ether_host.http.console import console_routes
from ether_host.http.guard import HttpGuard, error_body, request_identity
from ether_host.http.listener import HttpListener, HttpListenError
from ether_host.http.metrics import METRICS_PATH, metrics_route

if TYPE_CHECKING:
    from ether_host.http.mcp import MCP_PATH, CoreTools, McpSurface

__all__ = [
    "HEALTH_PATH",
    "MCP_PATH",
    "METRICS_PATH",
    "CoreTools",
    "HttpGuard",
    "HttpListenError",
    "HttpListener",
    "McpSurface",
    "build_http_app",
    "console_routes",
    "error_body",
    "metrics_route",
    "request_identity",
]


def __getattr__(name: str) -> Any:
    if name in ("MCP_PATH", "CoreTools", "McpSurface"):
        from ether_host.http import mcp

        return getattr(mcp, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
