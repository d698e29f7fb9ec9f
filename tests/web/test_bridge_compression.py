"""The console's bridge compresses (permessage-deflate): a terminal flood reaches xterm.js through
Chromium's WebSocket receive (bench/console.py), and deflate cuts its bytes 3.5-4.5 x for text;
the host compresses at zlib's fastest level, so compressing does not bound the flood."""

from __future__ import annotations

import socket
import zlib
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, Ping, Request, TextMessage
from wsproto.extensions import PerMessageDeflate
from wsproto.frame_protocol import CloseReason

from ether.v1 import terminal_pb2
from tests.support.host import HostProcess


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    process = HostProcess(tmp_path_factory.mktemp("flood") / "state", http=True)
    try:
        process.wait_serving()
        yield process
    finally:
        process.stop()


def test_the_bridge_takes_permessage_deflate(host: HostProcess) -> None:
    """A client offering permessage-deflate (as every browser does) gets its socket with it."""
    address = urlsplit(host.http_address)
    assert address.hostname and address.port
    client = WSConnection(ConnectionType.CLIENT)
    request = Request(
        host=address.netloc,
        target="/rpc-ws/ether.v1.TerminalService/Attach",
        extensions=[PerMessageDeflate()],
    )
    with socket.create_connection((address.hostname, address.port), timeout=30) as conn:
        conn.sendall(client.send(request))
        accepted = None
        while accepted is None:
            data = conn.recv(65536)
            assert data, "the host closed the connection during the handshake"
            client.receive_data(data)
            for event in client.events():
                assert isinstance(event, AcceptConnection), f"refused: {event!r}"
                accepted = event
    assert [type(extension) for extension in accepted.extensions] == [PerMessageDeflate]


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


def test_the_bridge_compresses_at_zlibs_fastest_level(host: HostProcess) -> None:
    """What the host sends on the bridge is deflated at zlib's level 1, which compresses a
    flood's text ~7 x faster than wsproto's default level 6 (bench/RESULTS.md "Web console"):
    every message a client receives is, byte for byte, level 1 of what it inflates to."""
    marker = "compressed-" + "0123456789" * 3
    made = host.terminals.CreateTerminal(
        terminal_pb2.CreateTerminalRequest(
            command_line=f"read go; seq 1 3000; echo {marker}; exec sleep 600",
            rows=24,
            cols=80,
        ),
        timeout=30,
    ).terminal
    address = urlsplit(host.http_address)
    assert address.hostname and address.port
    deflate = _RecordingDeflate()
    client = WSConnection(ConnectionType.CLIENT)
    request = Request(
        host=address.netloc,
        target="/rpc-ws/ether.v1.TerminalService/Attach",
        extensions=[deflate],
    )
    start = terminal_pb2.AttachRequest(start=terminal_pb2.AttachStart(terminal_id=made.id))
    messages: list[bytes] = []
    output = b""
    try:
        with socket.create_connection((address.hostname, address.port), timeout=60) as conn:
            conn.sendall(client.send(request))
            parts: list[bytes] = []
            while marker.encode() not in output:
                data = conn.recv(1 << 20)
                assert data, f"the host closed the bridge; output so far {output[-200:]!r}"
                client.receive_data(data)
                for event in client.events():
                    if isinstance(event, AcceptConnection):
                        conn.sendall(client.send(TextMessage('{"metadata": {}}')))
                        conn.sendall(client.send(BytesMessage(start.SerializeToString())))
                    elif isinstance(event, BytesMessage):
                        parts.append(bytes(event.data))
                        if event.message_finished:
                            messages.append(b"".join(parts))
                            parts.clear()
                            response = terminal_pb2.AttachResponse.FromString(messages[-1])
                            output += response.output.data
                            if response.HasField("snapshot"):  # attached: start the output
                                go = terminal_pb2.AttachRequest(
                                    input=terminal_pb2.TerminalInput(text="\r")
                                )
                                conn.sendall(client.send(BytesMessage(go.SerializeToString())))
                    elif isinstance(event, Ping):  # uvicorn's keepalive, on a slow machine
                        conn.sendall(client.send(event.response()))
                    else:
                        raise AssertionError(f"unexpected on the bridge: {event!r}")
    finally:
        host.terminals.CloseTerminal(terminal_pb2.CloseTerminalRequest(terminal_id=made.id))
    assert len(messages) >= 2  # started, snapshot, output ...
    assert deflate.compressed == _deflated(messages, level=1)
    assert deflate.compressed != _deflated(messages, level=6)


def _deflated(messages: list[bytes], *, level: int) -> list[bytes]:
    """permessage-deflate of ``messages`` in order (RFC 7692: one stream with context
    takeover, each message flushed and its final empty block's 4 bytes left off)."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, -15)
    return [
        (compressor.compress(message) + compressor.flush(zlib.Z_SYNC_FLUSH))[:-4]
        for message in messages
    ]
