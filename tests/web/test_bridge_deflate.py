"""The console's bridge and a terminal flood: the bridge turns down permessage-deflate.

wsproto compresses in Python on the host's event loop: with it, a 20 MB terminal flood to the
console spent about 70 % of the host's time compressing and blocked the loop meanwhile
(bench/console.py). Terminal output goes to the browser as it is, as it goes to gRPC clients."""

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


def test_the_bridge_turns_down_permessage_deflate(host: HostProcess) -> None:
    """A client offering permessage-deflate (as every browser does) gets the socket without it."""
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
    assert accepted.extensions == []
