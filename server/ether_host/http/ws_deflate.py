"""uvicorn's wsproto WebSocket protocol with permessage-deflate for remote peers only, at zlib's
fastest level.

The console's bridge (transport/console_ws.py) carries a terminal flood to the browser. uvicorn
only turns permessage-deflate on or off, for every peer, and wsproto then compresses every
outgoing message at zlib's default level (6), in Python on the host's event loop: on the console
benchmark's corpus (source text) about 22 MiB/s on one core of this machine, slower than the rest
of the path. So:

- A peer on loopback (the console's default, `make run`) gets no permessage-deflate: there the
  bytes cost nothing to move, and compressing and inflating cost the host and Chromium CPU. In
  interleaved runs of the console bench the flood reached xterm.js at 22.9 and 24.2 MiB/s without
  it against 22.2 and 21.1 with it at level 1, using 10-20 % less CPU.
- Any other peer gets it at level 1: about 7 x faster than level 6 and still 3.6 x smaller for
  text (4.4 x at level 6), for a browser whose bandwidth is worth saving.

bench/RESULTS.md "Web console" has the figures. What the host receives is inflated as before.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import zlib
from typing import Any

import wsproto
import wsproto.events
from uvicorn.protocols.websockets.wsproto_impl import WSProtocol
from wsproto.extensions import PerMessageDeflate
from wsproto.frame_protocol import FrameDecoder, FrameProtocol, Opcode, RsvBits

COMPRESSION_LEVEL = 1


class FastDeflate(PerMessageDeflate):
    """permessage-deflate compressing outgoing messages at ``COMPRESSION_LEVEL``.

    wsproto makes its compressor on the first outgoing message at zlib's default level; this
    one makes it first, with the window bits wsproto would use (negotiated in the handshake),
    and wsproto then uses it as its own (flushes, context takeover)."""

    def frame_outbound(
        self,
        proto: FrameDecoder | FrameProtocol,
        opcode: Opcode,
        rsv: RsvBits,
        data: bytes,
        fin: bool,
    ) -> tuple[RsvBits, bytes]:
        if self._compressor is None and self._compressible_opcode(opcode):
            bits = self.client_max_window_bits if proto.client else self.server_max_window_bits
            self._compressor = zlib.compressobj(COMPRESSION_LEVEL, zlib.DEFLATED, -int(bits))
        return super().frame_outbound(proto, opcode, rsv, data, fin)


class _PeerDeflateConnection(wsproto.WSConnection):
    """A server connection whose accept takes FastDeflate where uvicorn offers PerMessageDeflate,
    or no permessage-deflate at all for a loopback peer (uvicorn builds the accept's extensions
    inside its send; this is where they pass)."""

    loopback_peer = False  # set once the connection is made

    def send(self, event: wsproto.events.Event) -> bytes:
        if isinstance(event, wsproto.events.AcceptConnection):
            extensions = [
                FastDeflate() if type(extension) is PerMessageDeflate else extension
                for extension in event.extensions
                if not (self.loopback_peer and isinstance(extension, PerMessageDeflate))
            ]
            event = dataclasses.replace(event, extensions=extensions)
        return super().send(event)


class PeerDeflateWSProtocol(WSProtocol):
    """uvicorn's wsproto protocol (its config's ``ws``): permessage-deflate at level 1 for a
    remote peer, none for a loopback one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._connection = _PeerDeflateConnection(connection_type=wsproto.ConnectionType.SERVER)
        self.conn = self._connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._connection.loopback_peer = is_loopback(self.client[0] if self.client else None)


def is_loopback(host: str | None) -> bool:
    """Whether a peer's address is this machine's own (no address: a Unix socket, also local)."""
    if host is None:
        return True
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback
