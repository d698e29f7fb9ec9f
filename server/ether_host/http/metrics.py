"""``GET /metrics``: the host's Prometheus metrics in the text format (0.0.4), behind the same
token and right as every route of the listener (rights.HTTP_RIGHTS).

The route is mounted only when ``[telemetry] metrics`` is on (main.py); off, ``/metrics`` is
404 like any unknown path. The body comes from the host's own registry
(``ether_host.metrics.Metrics.render``), handed in as a function so this front
knows nothing of how metrics are kept.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

METRICS_PATH = "/metrics"
# Prometheus text exposition format 0.0.4 (what prometheus_client.generate_latest writes).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def metrics_route(render: Callable[[], Awaitable[bytes]]) -> Route:
    """The ``/metrics`` route answering ``await render()``."""

    async def metrics(request: Request) -> Response:
        return Response(await render(), media_type=CONTENT_TYPE)

    return Route(METRICS_PATH, metrics, methods=["GET"])
