"""uvicorn's wsproto WebSocket protocol with permessage-deflate at zlib's fastest level.

The console's bridge (transport/console_ws.py) keeps permessage-deflate on: it cuts a terminal
flood's bytes through Chromium's WebSocket receive 3.5-4.5 x. But uvicorn only turns deflate on
or off, and wsproto then compresses every outgoing message at zlib's default level (6), in
Python on the host's event loop: on the console benchmark's corpus (source text) that is about
22 MiB/s on one core of this machine, the host's main cost during a flood. Level 1 compresses
the same text about 7 x faster, to 3.6 x smaller instead of 4.4 x (bench/RESULTS.md,
"Web console"). Only what the host sends changes; what it receives is inflated as before.
"""

from __future__ import annotations

import dataclasses
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


class _FastDeflateConnection(wsproto.WSConnection):
    """A server connection that accepts FastDeflate where uvicorn offers PerMessageDeflate
    (uvicorn builds the accept's extensions inside its send; this is where they pass)."""

    def send(self, event: wsproto.events.Event) -> bytes:
        if isinstance(event, wsproto.events.AcceptConnection):
            extensions = [
                FastDeflate() if type(extension) is PerMessageDeflate else extension
                for extension in event.extensions
            ]
            event = dataclasses.replace(event, extensions=extensions)
        return super().send(event)


class FastDeflateWSProtocol(WSProtocol):
    """uvicorn's wsproto protocol (its config's ``ws``) accepting with FastDeflate."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = _FastDeflateConnection(connection_type=wsproto.ConnectionType.SERVER)
