"""The HTTP listener's one ASGI application, and how other surfaces mount on it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Host, Mount, Route, WebSocketRoute
from starlette.types import ASGIApp

from ether_host import rights
from ether_host.auth import TokenTable
from ether_host.errors import EtherError
from ether_host.health import Readiness
from ether_host.http.guard import HttpGuard, error_body
from ether_host.lifecycle import Lifecycle
from ether_host.telemetry import Tracing

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"


def build_http_app(
    mounts: Sequence[BaseRoute],
    *,
    tokens: TokenTable | None,
    lifecycle: Lifecycle,
    readiness: Callable[[], Readiness] | None = None,
    tracing: Tracing | None = None,
) -> ASGIApp:
    """The application the HTTP listener serves: ``GET /healthz`` (liveness), ``GET /readyz``
    (``readiness()``: 200, or 503 with the reason; the host's liveness when not given) and
    every route of
    ``mounts`` (starlette ``Route``s and ``Mount``s, the latter for whole ASGI apps), all behind
    one ``HttpGuard`` (the per-request log line, the bearer token, the route's right).

    How a surface mounts: the composition root (main.py, ``_http_mounts``) builds its routes and
    passes them here, for example ``Mount("/a2a", app=a2a_asgi_app)`` or
    ``Route("/.well-known/agent-card.json", card_endpoint)``. Each route's path needs its line
    in ``rights.HTTP_RIGHTS`` (a right, ``rights.OPEN`` or ``rights.AUTHENTICATED``), or this
    raises ``rights.UnknownRoute`` and the host does not start. A handler reads its caller with
    ``request_identity(request.scope)``; for a scoped right (``SCOPED_ROUTES``) it checks each
    agent it touches with ``rights.require(identity, right, agent)``. Errors it raises as the
    core's ``EtherError``s (before answering) become JSON ``{"error": {code, reason, message,
    metadata}}`` with the matching HTTP status.
    """
    for mount in mounts:
        _check_listed(mount)

    async def healthz(request: Request) -> JSONResponse:
        # What grpc.health.v1 says for the host ("" service): SERVING until the host stops.
        if lifecycle.is_stopping or lifecycle.info is None:
            return JSONResponse({"status": "NOT_SERVING"}, status_code=503)
        return JSONResponse({"status": "SERVING"})

    async def readyz(request: Request) -> JSONResponse:
        if readiness is None:
            return await healthz(request)
        ready = readiness()
        # A host cut off from its cluster stays ready (it serves its own agents) and says so.
        degraded = {"degraded": ready.degraded} if ready.degraded else {}
        if not ready.ready:
            body: dict[str, object] = {"status": "NOT_READY", "reason": ready.reason, **degraded}
            if ready.waiting_for:
                body["waiting_for"] = list(ready.waiting_for)
            return JSONResponse(body, status_code=503)
        return JSONResponse({"status": "READY", **degraded})

    routes = [
        Route(HEALTH_PATH, healthz, methods=["GET"]),
        Route(READY_PATH, readyz, methods=["GET"]),
    ]
    # Starlette answers an exception a route raises itself (a bare 500 from its outermost
    # middleware) before HttpGuard could see it: its exception handler turns ours into the JSON
    # error the docstring promises.
    app = Starlette(routes=[*routes, *mounts], exception_handlers={EtherError: _error_response})
    return HttpGuard(
        app,
        tokens,
        tracing,
        stopping=lambda: lifecycle.is_stopping,
        probes=(HEALTH_PATH, READY_PATH),
    )


async def _error_response(request: Request, error: Exception) -> Response:
    assert isinstance(error, EtherError)  # registered for EtherError only
    status, body = error_body(error)
    headers = {"www-authenticate": 'Bearer realm="ether"'} if status == 401 else None
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def _check_listed(route: BaseRoute) -> None:
    if isinstance(route, Host):
        raise rights.UnknownRoute("mount by path, not by Host: rights.HTTP_RIGHTS names paths")
    if isinstance(route, Route | Mount | WebSocketRoute):
        path = route.path or "/"
        if rights.route_entry(path) is None:
            raise rights.UnknownRoute(
                f"HTTP route {path} has no line in ether_host/rights.py HTTP_RIGHTS"
            )
