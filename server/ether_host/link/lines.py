"""Split a byte stream into lines with a size cap checked on whole lines.

There is no 64 KiB limit (asyncio's readline default): a line may be as large
as the negotiated max frame. A longer line is not buffered: its first bytes
are kept (to recover the request id), the rest is discarded up to the next
newline, and one ``Oversized`` item is produced in its place.
"""

from __future__ import annotations

from dataclasses import dataclass

HEAD_BYTES = 256  # kept from an oversized line to find its id


@dataclass(frozen=True)
class Oversized:
    """A line longer than the limit: its first bytes and its full length."""

    head: bytes
    length: int


class LineSplitter:
    """Feed chunks in, get whole lines (without the newline) or Oversized out."""

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self._buffer = bytearray()
        self._discarding: Oversized | None = None

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        out: list[bytes | Oversized] = []
        start = 0
        while start < len(chunk):
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline < 0 else newline
            piece = chunk[start:end]
            if newline >= 0 and not self._buffer and self._discarding is None:
                # A whole line in this chunk (the usual case): no copy through the buffer.
                if len(piece) > self.max_line:
                    out.append(Oversized(piece[:HEAD_BYTES], len(piece)))
                else:
                    out.append(piece[:-1] if piece.endswith(b"\r") else piece)
                start = newline + 1
                continue
            if self._discarding is not None:
                self._discarding = Oversized(
                    self._discarding.head, self._discarding.length + len(piece)
                )
            elif len(self._buffer) + len(piece) > self.max_line:
                head = bytes(
                    self._buffer[:HEAD_BYTES] + piece[: max(0, HEAD_BYTES - len(self._buffer))]
                )
                self._discarding = Oversized(head, len(self._buffer) + len(piece))
                self._buffer.clear()
            else:
                self._buffer += piece
            if newline < 0:
                break
            if self._discarding is not None:
                out.append(self._discarding)
                self._discarding = None
            else:
                line = bytes(self._buffer)
                self._buffer.clear()
                out.append(line[:-1] if line.endswith(b"\r") else line)
            start = newline + 1
        return out

    def finish(self) -> list[bytes | Oversized]:
        """At EOF: the unterminated last line, if any."""
        if self._discarding is not None:
            last: list[bytes | Oversized] = [self._discarding]
        elif self._buffer:
            last = [bytes(self._buffer)]
        else:
            last = []
        self._buffer.clear()
        self._discarding = None
        return last
