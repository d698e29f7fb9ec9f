"""The console's bridge compresses (permessage-deflate): a terminal flood's bytes, not the host,
bound how fast it reaches xterm.js through Chromium's WebSocket (bench/console.py), and
deflate cuts them 4-5 x for text."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, Request
from wsproto.extensions import PerMessageDeflate

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
