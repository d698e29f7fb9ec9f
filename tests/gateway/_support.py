"""Helpers of the gateway tests: a Converse stream driven from the test thread, and
loopback HTTP servers that record what reached them."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format

from ether.v1 import agent_io_pb2, gateway_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import execute, struct
from tests.support.host import HostProcess

AGENTS_TIMEOUT = 60.0


@contextmanager
def gateway_host(folder: Path, config: str) -> Iterator[HostProcess]:
    """A host on ``config`` (TOML text: a [gateway] table) with the chatter agent deployed."""
    path = folder / "ether.toml"
    path.write_text(config)
    host = HostProcess(folder / "state", "--config", str(path))
    try:
        host.wait_serving()
        deploy(host, AGENTS / "chatter")
        yield host
    finally:
        host.stop()


def close_session(host: HostProcess, session_id: str) -> gateway_pb2.Session:
    request = gateway_pb2.CloseSessionRequest(session_id=session_id)
    return host.gateway.CloseSession(request, timeout=10).session  # type: ignore[no-any-return]


def open_session(
    host: HostProcess, call_metadata: list[tuple[str, str]] | None = None, **fields: Any
) -> gateway_pb2.Session:
    if "context" in fields and isinstance(fields["context"], dict):
        fields["context"] = struct(fields["context"])
    request = gateway_pb2.OpenSessionRequest(**fields)
    return host.gateway.OpenSession(request, timeout=30, metadata=call_metadata).session  # type: ignore[no-any-return]


class Conversation:
    """One Converse stream: requests are queued from the test, events read as they come."""

    def __init__(
        self,
        host: HostProcess,
        session_id: str,
        after: int | None = None,
        call_metadata: list[tuple[str, str]] | None = None,
        timeout: float = AGENTS_TIMEOUT,
    ) -> None:
        self._requests: queue.Queue[gateway_pb2.ConverseRequest | None] = queue.Queue()
        start = gateway_pb2.ConverseStart(session_id=session_id)
        if after is not None:
            start.after_sequence = after
        self._requests.put(gateway_pb2.ConverseRequest(start=start))
        self.call = host.gateway.Converse(self._outgoing(), timeout=timeout, metadata=call_metadata)
        self.events: list[gateway_pb2.ConverseResponse] = []

    def _outgoing(self) -> Iterator[gateway_pb2.ConverseRequest]:
        while True:
            request = self._requests.get()
            if request is None:
                return
            yield request

    def say(self, text: str = "", **fields: Any) -> None:
        if "data" in fields and isinstance(fields["data"], dict):
            fields["data"] = struct(fields["data"])
        self._requests.put(
            gateway_pb2.ConverseRequest(message=gateway_pb2.UserMessage(text=text, **fields))
        )

    def send_raw(self, request: gateway_pb2.ConverseRequest) -> None:
        self._requests.put(request)

    def done(self) -> None:
        """Half-close: the stream ends once the turns sent so far are answered."""
        self._requests.put(None)

    def next(self) -> gateway_pb2.ConverseResponse:
        event = next(self.call)
        self.events.append(event)
        return event  # type: ignore[no-any-return]

    def until(
        self, predicate: Callable[[gateway_pb2.ConverseResponse], bool]
    ) -> list[gateway_pb2.ConverseResponse]:
        """Events up to and including the first that matches."""
        seen = []
        while True:
            event = self.next()
            seen.append(event)
            if predicate(event):
                return seen

    def turn(self, text: str = "", **fields: Any) -> list[gateway_pb2.ConverseResponse]:
        """Say something and read that turn's events through its turn_completed."""
        self.say(text, **fields)
        accepted = self.until(lambda e: e.WhichOneof("event") == "accepted")
        number = accepted[-1].turn
        return accepted + self.until(
            lambda e: e.WhichOneof("event") == "turn_completed" and e.turn == number
        )

    def rest(self) -> list[gateway_pb2.ConverseResponse]:
        """Every remaining event until the server ends the stream."""
        remaining = []
        for event in self.call:
            self.events.append(event)
            remaining.append(event)
        return remaining

    def close(self) -> None:
        self._requests.put(None)
        self.call.cancel()


def kinds(events: list[gateway_pb2.ConverseResponse]) -> list[str]:
    return [str(e.WhichOneof("event")) for e in events]


def of(events: list[gateway_pb2.ConverseResponse], kind: str) -> list[Any]:
    return [getattr(e, kind) for e in events if e.WhichOneof("event") == kind]


def reply_text(events: list[gateway_pb2.ConverseResponse]) -> str:
    final = [r for r in of(events, "reply") if not r.partial]
    assert final, f"no reply in {kinds(events)}: {of(events, 'error')}"
    return str(final[-1].text)


def send(
    host: HostProcess, agent: str, kind: str, payload: Any = None, **fields: Any
) -> gateway_pb2.SendMessageResponse:
    request = gateway_pb2.SendMessageRequest(agent=agent, type=kind, **fields)
    if payload is not None:
        json_format.ParseDict(payload, request.data)
    return host.gateway.SendMessage(request, timeout=10)  # type: ignore[no-any-return]


def subscribe(host: HostProcess, after: int | None = None, **source: str) -> Any:
    request = gateway_pb2.SubscribeRequest(**source)
    if after is not None:
        request.after_sequence = after
    return host.gateway.Subscribe(request, timeout=60)


def code(error: grpc.RpcError) -> grpc.StatusCode:
    return error.code()  # type: ignore[no-any-return]


def fetch(host: HostProcess, agent: str, url: str, **params: Any) -> agent_io_pb2.AgentOutput:
    """The toolbox agent's `get` action: one net.fetch of ``url`` (``params``: method, body...)."""
    return execute(host, agent, "get", {"url": url, **params})


def audit_of(host: HostProcess, agent: str) -> list[gateway_pb2.AuditRecord]:
    """The egress audit records of ``agent``, oldest first."""
    request = gateway_pb2.ListAuditRequest(agent=agent)
    return list(host.gateway.ListAudit(request, timeout=10).records)[::-1]


class Recorder(ThreadingHTTPServer):
    """A loopback HTTP server with a few routes; ``paths`` lists every request that reached it."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.paths: list[tuple[str, str]] = []
        # every request: method, path, headers (lower-case names), body
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.release = threading.Event()
        self.redirect_to = ""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (a fetch past its time cap) is expected here, not an error."""

    def stop(self) -> None:
        self.release.set()
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: Recorder

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        self.server.paths.append((self.command, self.path))
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.requests.append((self.command, self.path, headers, body))
        if self.path.startswith("/redirect"):
            # /redirect answers 302, /redirect/<status> that status, both to redirect_to
            status = self.path.split("/")[2:3]
            self.send_response(int(status[0]) if status else 302)
            self.send_header("Location", self.server.redirect_to)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path.startswith("/hop"):
            self.send_response(302)
            self.send_header("Location", "/hello")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path.startswith("/slow"):
            self.server.release.wait(60)
        payload = (
            b"x" * 5000 if self.path.startswith("/big") else b"hello from " + self.path.encode()
        )
        if body:
            payload += b" got " + body
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_HEAD = _answer
