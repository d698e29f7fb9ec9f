"""The host's HTTP listener: uvicorn serving one ASGI app inside the host's own event loop.

The socket is bound here, up front, so a port in use or a bad address stops the start with the
gRPC port's messages. uvicorn runs as one task of the host's task group: no lifespan (the host
builds and stops its parts itself), no signal handlers of its own (the host's stop says when),
and on stop it drains as the gRPC server does: no new connections, requests in flight finish
within ``shutdown_grace``, then what is left is cancelled.
"""

from __future__ import annotations

import errno
import logging
import socket
import ssl

import anyio
import structlog
import uvicorn
from anyio.abc import TaskStatus
from starlette.types import ASGIApp

from ether_host.http.ws_deflate import PeerDeflateWSProtocol

log = structlog.get_logger("ether.http")


class HttpListenError(Exception):
    """The HTTP listener cannot listen where it was asked to; the message says why."""


def bind_http_socket(address: str) -> socket.socket:
    """A listening TCP socket on ``address`` (HOST:PORT, ``[v6]:PORT``; port 0 picks one)."""
    host, _, port_text = address.rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, int(port_text)), family=family, backlog=1024)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise HttpListenError(
                f"http_listen {address}: address in use (another process listens there; "
                "choose another --http-listen)"
            ) from None
        raise HttpListenError(
            f"http_listen {address}: cannot listen there (is {host} an address of this "
            f"machine?): {error.strerror or error}"
        ) from None


class _ToStructlog(logging.Handler):
    """uvicorn's own warnings and errors (a malformed request, a protocol fault) as the host's
    structured log lines, not bare text on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        level = "error" if record.levelno >= logging.ERROR else "warning"
        getattr(log, level)("uvicorn", message=record.getMessage(), exc_info=record.exc_info)


def _route_uvicorn_logs() -> None:
    logger = logging.getLogger("uvicorn")
    if not any(isinstance(h, _ToStructlog) for h in logger.handlers):
        logger.addHandler(_ToStructlog(logging.WARNING))
        logger.propagate = False


class HttpListener:
    """One ASGI app on one address, served in the host's task group (``serve``) until ``stop``.

    ``tls``: (certificate chain, private key) PEM paths, the gRPC port's; None for plaintext.
    """

    def __init__(
        self, address: str, app: ASGIApp, *, tls: tuple[str, str] | None, grace: float
    ) -> None:
        self._socket = bind_http_socket(address)
        host, port = self._socket.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        self.address = f"{'https' if tls else 'http'}://{shown}:{port}"
        config = uvicorn.Config(
            app,
            http="h11",
            # The web console's bridge for bidi streams (transport/console_ws.py): uvicorn's
            # wsproto protocol with permessage-deflate for remote peers only, at zlib's fastest
            # level (ws_deflate.py says why: on loopback a flood reached xterm.js faster without
            # it; at the default level it took ~70 % of the host's samples).
            ws=PeerDeflateWSProtocol,
            ws_per_message_deflate=True,
            lifespan="off",
            log_config=None,
            access_log=False,  # HttpGuard logs one line per request, as gRPC calls get
            proxy_headers=False,  # the peer is who connected, never what a header claims
            server_header=False,
            timeout_graceful_shutdown=grace,  # type: ignore[arg-type] # a float works the same
            ssl_certfile=tls[0] if tls else None,
            ssl_keyfile=tls[1] if tls else None,
        )
        try:
            config.load()  # the TLS context now: a bad certificate stops the start
        except (OSError, ssl.SSLError) as error:
            self._socket.close()
            raise HttpListenError(f"http_listen: cannot serve TLS: {error}") from None
        _route_uvicorn_logs()
        self._server = uvicorn.Server(config)
        self.stopped = anyio.Event()

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Accept requests until ``stop``, then drain; returns once the drain is over.

        uvicorn's own ``serve`` in its three steps, without its signal handlers: startup (one
        create_server on our socket: accepting once it returns), the loop that notices
        ``should_exit``, and shutdown (close the socket, end idle keep-alive connections, wait
        for the requests in flight up to ``timeout_graceful_shutdown``, cancel the rest)."""
        server = self._server
        try:
            server.lifespan = server.config.lifespan_class(server.config)  # "off": does nothing
            await server.startup(sockets=[self._socket])
            task_status.started()
            await server.main_loop()
            await server.shutdown(sockets=[self._socket])
        finally:
            self._socket.close()
            self.stopped.set()

    def stop(self, grace: float | None = None) -> None:
        """Stop accepting; requests in flight get ``grace`` seconds to finish (default: the
        listener's)."""
        if grace is not None:
            self._server.config.timeout_graceful_shutdown = grace  # type: ignore[assignment]
        self._server.should_exit = True
