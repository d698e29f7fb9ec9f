"""The console's bridge and permessage-deflate: a terminal flood reaches xterm.js through
Chromium's WebSocket receive (bench/console.py). On loopback the host takes no permessage-deflate
(moving bytes costs nothing there, compressing and inflating cost CPU: the flood was faster
without it); from any other address it compresses, at zlib's fastest level, so compressing does
not bound the flood."""

from __future__ import annotations

import asyncio
import socket
import threading
import zlib
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, CloseConnection, Ping, Request
from wsproto.extensions import PerMessageDeflate
from wsproto.frame_protocol import CloseReason

from ether_host.http.ws_deflate import PeerDeflateWSProtocol, is_loopback
from tests.support.host import HostProcess


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    process = HostProcess(tmp_path_factory.mktemp("flood") / "state", http=True)
    try:
        process.wait_serving()
        yield process
    finally:
        process.stop()


# What the remote tests' server sends: a flood's kind of text, in messages of a few sizes.
SENT = [
    b"started",
    b"".join(b"    return self._value + %d  # line %d\r\n" % (n, n) for n in range(4000)),
    b"x" * 70_000,
    b"".join(b"def f%d(a, b):\r\n    pass\r\n" % n for n in range(2000)),
]


class _SeenFromElsewhere(PeerDeflateWSProtocol):
    """The host's protocol with its peer seen at a documentation address (RFC 5737) instead of
    loopback's: a browser on another machine, while the test's bytes stay on loopback (tests
    talk to loopback only). Which addresses count as remote is test_remote_addresses' part."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.client = ("192.0.2.10", self.client[1] if self.client else 0)
        self._connection.loopback_peer = is_loopback(self.client[0])


@pytest.fixture(scope="module")
def remote_server() -> Iterator[tuple[str, int]]:
    """uvicorn with the host's WebSocket protocol (http/ws_deflate.py), its peer taken for a
    remote one, serving one route that sends SENT, each as a binary message: what a browser
    elsewhere meets. (The host refuses to listen off loopback without TLS and tokens; the
    protocol is the listener's, tested here on its own.)"""
    address = "127.0.0.1"

    async def send_all(websocket: WebSocket) -> None:
        await websocket.accept()
        for message in SENT:
            await websocket.send_bytes(message)
        await websocket.close()

    listening = socket.create_server((address, 0))
    server = uvicorn.Server(
        uvicorn.Config(
            Starlette(routes=[WebSocketRoute("/sent", send_all)]),
            ws=_SeenFromElsewhere,
            lifespan="off",
            log_config=None,
        )
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    try:
        yield address, listening.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        listening.close()


@pytest.mark.parametrize(
    ("peer", "local"),
    [
        ("127.0.0.1", True),
        ("127.3.2.1", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        (None, True),  # a Unix socket
        ("192.0.2.10", False),
        ("10.1.2.3", False),
        ("2001:db8::1", False),
        ("fe80::1%eth0", False),
        ("::ffff:192.0.2.10", False),
        ("not an address", False),
    ],
)
def test_remote_addresses(peer: str | None, local: bool) -> None:
    """Which peers get no permessage-deflate: this machine's own addresses only."""
    assert is_loopback(peer) is local


def _port(host: HostProcess) -> int:
    port = urlsplit(host.http_address).port
    assert port, f"no HTTP listener address logged: {host.http_address!r}"
    return port


def _handshake(
    conn: socket.socket, address: str, port: int, target: str, deflate: PerMessageDeflate
) -> tuple[WSConnection, AcceptConnection]:
    client = WSConnection(ConnectionType.CLIENT)
    conn.sendall(
        client.send(Request(host=f"{address}:{port}", target=target, extensions=[deflate]))
    )
    while True:
        data = conn.recv(65536)
        assert data, "the server closed the connection during the handshake"
        client.receive_data(data)
        for event in client.events():
            assert isinstance(event, AcceptConnection), f"refused: {event!r}"
            return client, event


def test_a_loopback_client_gets_no_permessage_deflate(host: HostProcess) -> None:
    """A browser on the host's machine offers permessage-deflate (as every browser does) and gets
    its bridge socket without it."""
    with socket.create_connection(("127.0.0.1", _port(host)), timeout=30) as conn:
        _, accepted = _handshake(
            conn,
            "127.0.0.1",
            _port(host),
            "/rpc-ws/ether.v1.TerminalService/Attach",
            PerMessageDeflate(),
        )
    assert accepted.extensions == []


class _RecordingDeflate(PerMessageDeflate):
    """A client's permessage-deflate that keeps each compressed message as it came."""

    def __init__(self) -> None:
        super().__init__()
        self.compressed: list[bytes] = []
        self._message = bytearray()

    def frame_inbound_payload_data(self, proto: Any, data: bytes) -> bytes | CloseReason:
        if self._inbound_compressed:
            self._message += data
        return super().frame_inbound_payload_data(proto, data)

    def frame_inbound_complete(self, proto: Any, fin: bool) -> bytes | CloseReason | None:
        if fin and self._inbound_compressed:
            self.compressed.append(bytes(self._message))
            self._message.clear()
        return super().frame_inbound_complete(proto, fin)


def test_a_remote_client_gets_permessage_deflate_at_zlibs_fastest_level(
    remote_server: tuple[str, int],
) -> None:
    """A browser elsewhere offering permessage-deflate gets its socket with it, and what it
    receives is deflated at zlib's level 1, which compresses a flood's text ~7 x faster than
    wsproto's default level 6 (bench/RESULTS.md "Web console"): every message, byte for byte,
    is level 1 of what it inflates to."""
    address, port = remote_server
    deflate = _RecordingDeflate()
    received: list[bytes] = []
    with socket.create_connection((address, port), timeout=60) as conn:
        client, accepted = _handshake(conn, address, port, "/sent", deflate)
        assert [type(extension) for extension in accepted.extensions] == [_RecordingDeflate]
        parts: list[bytes] = []
        closed = False
        while True:
            # Events first: the handshake's read may have brought every frame already.
            for event in client.events():
                if isinstance(event, BytesMessage):
                    parts.append(bytes(event.data))
                    if event.message_finished:
                        received.append(b"".join(parts))
                        parts.clear()
                elif isinstance(event, CloseConnection):
                    closed = True
                elif not isinstance(event, Ping):
                    raise AssertionError(f"unexpected from the server: {event!r}")
            if closed:
                break
            data = conn.recv(1 << 20)
            assert data, f"the server closed the connection after {len(received)} messages"
            client.receive_data(data)
    assert received == SENT
    assert deflate.compressed == _deflated(SENT, level=1)
    assert deflate.compressed != _deflated(SENT, level=6)


def _deflated(messages: list[bytes], *, level: int) -> list[bytes]:
    """permessage-deflate of ``messages`` in order (RFC 7692: one stream with context
    takeover, each message flushed and its final empty block's 4 bytes left off)."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, -15)
    return [
        (compressor.compress(message) + compressor.flush(zlib.Z_SYNC_FLUSH))[:-4]
        for message in messages
    ]
