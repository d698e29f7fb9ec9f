"""The web console on the HTTP listener: its page at ``/``, its built assets under
``/console/``, and the two ways its scripts reach the servicers (``/rpc``, Connect; ``/rpc-ws``,
the WebSocket bridge for client and bidi streams; both in transport/). docs/console.md is the user's side.

The page and assets are open (they hold no data, and the sign-in form must load without a
token); every call they make is an RPC, checked by the same decorators as on the gRPC port.
The assets are what ``make setup`` builds from web/ (esbuild) into web/dist; a host without them
answers ``/`` with a page saying so.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

CONSOLE_PATH = "/"
ASSETS_PATH = "/console"
RPC_PATH = "/rpc"
# web/dist of this checkout (the package is installed editable from server/).
BUNDLE_DIR = Path(__file__).resolve().parents[3] / "web" / "dist"
_NOT_BUILT = """<!doctype html><meta charset="utf-8"><title>Ether console</title>
<p>The web console is not built on this host: run <code>make setup</code> in the checkout
(it bundles web/ into web/dist), then reload.</p>"""


def console_routes(rpc: ASGIApp, bridge: BaseRoute, bundle: Path = BUNDLE_DIR) -> list[BaseRoute]:
    """The console's routes: its page and assets, ``rpc`` (the Connect app,
    transport/console_rpc.py) at RPC_PATH and ``bridge`` (the WebSocket route,
    transport/console_ws.py). Both call the gRPC server's decorated method handlers: the
    transport builds them (the core's side of the listener never speaks gRPC)."""
    index = bundle / "index.html"

    async def page(request: Request) -> Response:
        if not index.is_file():
            return HTMLResponse(_NOT_BUILT, status_code=503)
        # Never cached: a rebuilt console shows at the next reload.
        return FileResponse(index, headers={"cache-control": "no-cache"})

    return [
        Route(CONSOLE_PATH, page, methods=["GET"]),
        Mount(ASSETS_PATH, app=StaticFiles(directory=bundle, check_dir=False)),
        Mount(RPC_PATH, app=rpc),
        bridge,
    ]
