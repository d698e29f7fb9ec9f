"""A2A on the HTTP listener: the agent cards, and JSON-RPC (the binding most A2A clients default
to) through a2a-sdk's JsonRpcDispatcher over the same EtherRequestHandler as gRPC.

    GET  /.well-known/agent-card.json            the host's card: its agents (agent.read)
    GET  /a2a/NAME/.well-known/agent-card.json   agent NAME's card (agent.execute for NAME)
    POST /a2a/NAME                               JSON-RPC for agent NAME (agent.execute for NAME)

The listener's guard (ether_host/http) checks the bearer token and the route's right
(rights.HTTP_RIGHTS); ``/a2a`` is scoped, so a caller with ``agent.execute:NAME`` gets in and
this module refuses every other agent before a byte of the request is read. The agent in the
URL is the request's tenant (a params ``tenant`` that names another is refused).
"""

from __future__ import annotations

from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.utils.constants import (
    AGENT_CARD_WELL_KNOWN_PATH,
    PROTOCOL_VERSION_CURRENT,
    VERSION_HEADER,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from ether_host import rights
from ether_host.a2a.cards import A2A_PATH, agent_card, directory_card
from ether_host.a2a.handler import IDENTITY, PATH_TENANT, EtherRequestHandler
from ether_host.errors import EtherError
from ether_host.http import error_body, request_identity

DIRECTORY_CARD_PATH = AGENT_CARD_WELL_KNOWN_PATH  # /.well-known/agent-card.json


class _CallContext(DefaultServerCallContextBuilder):
    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[IDENTITY] = request_identity(request.scope)
        context.state[PATH_TENANT] = request.path_params.get("agent", "")
        # As on gRPC: a request without the header is a 1.x client (0.3 clients call other
        # method names, which are not served); the dispatcher checks any version it carries.
        headers: dict[str, Any] = context.state["headers"]
        headers.setdefault(VERSION_HEADER.lower(), PROTOCOL_VERSION_CURRENT)
        return context


def http_routes(handler: EtherRequestHandler) -> list[BaseRoute]:
    """The routes to mount on the HTTP listener (main.py, ``_http_listener``)."""
    dispatcher = JsonRpcDispatcher(handler, context_builder=_CallContext())

    async def directory(request: Request) -> Response:
        try:
            rights.require(request_identity(request.scope), rights.AGENT_READ)
        except EtherError as error:
            return _refused(error)
        card = directory_card(handler.directory(), handler.endpoints)
        return JSONResponse(agent_card_to_dict(card))

    async def card(request: Request) -> Response:
        try:
            found = handler.agent(_may_run(request))
        except EtherError as error:
            return _refused(error)
        return JSONResponse(agent_card_to_dict(agent_card(found, handler.endpoints)))

    async def jsonrpc(request: Request) -> Response:
        try:
            _may_run(request)
        except EtherError as error:
            return _refused(error)
        return await dispatcher.handle_requests(request)

    return [
        Route(DIRECTORY_CARD_PATH, directory, methods=["GET"]),
        Mount(
            A2A_PATH,
            routes=[
                Route("/{agent}" + AGENT_CARD_WELL_KNOWN_PATH, card, methods=["GET"]),
                Route("/{agent}", jsonrpc, methods=["POST"]),
            ],
        ),
    ]


def _refused(error: EtherError) -> Response:
    """The listener's JSON error answer (its status and body, as the guard writes them):
    answered here, since starlette turns an exception a route raises into a bare 500."""
    status, body = error_body(error)
    return Response(body, status_code=status, media_type="application/json")


def _may_run(request: Request) -> str:
    """The agent of the URL, once the caller is known to hold agent.execute for it."""
    name = str(request.path_params["agent"])
    rights.require(request_identity(request.scope), rights.AGENT_EXECUTE, name)
    return name
