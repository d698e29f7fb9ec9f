"""An agent's stdout as the host reads it (supervisor/pipes.py), with a real child process: what
the child writes before the link starts reading (the hello, banners) is neither lost nor
reordered, more than the host buffers included."""

from __future__ import annotations

import sys

import uvloop

from ether_host.supervisor.pipes import READ_BYTES, open_agent_process

CHILD = r"""
import sys
out = sys.stdout.buffer
early = b"".join(b"%09d\n" % i for i in range(40_000))  # 400 KB: more than the host buffers
out.write(early); out.flush()
sys.stderr.write("early written\n"); sys.stderr.flush()
out.write(b"".join(b"%09d\n" % i for i in range(40_000, 340_000))); out.flush()
"""


def test_output_written_before_reading_starts_arrives_whole_and_in_order() -> None:
    async def scenario() -> bytes:
        stdio = await open_agent_process([sys.executable, "-c", CHILD], cwd="/", env={})
        try:
            # The child gets past its first 400 KB only once the host has taken some of it in
            # (the pipe holds 256 KiB): wait for that, then start reading.
            seen = b""
            while b"early written" not in seen:
                seen += await stdio.stderr.receive()
            received: list[bytes] = []
            await stdio.stdout.deliver(received.append)
            await stdio.process.wait()
            return b"".join(received)
        finally:
            stdio.close()

    data = uvloop.run(scenario())
    assert data == b"".join(b"%09d\n" % i for i in range(340_000))
    assert len(data) > 8 * READ_BYTES
