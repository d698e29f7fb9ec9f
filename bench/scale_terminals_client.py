"""The attached clients of bench/scale_terminals.py: one process, one grpc.aio channel, one Attach
stream per terminal, each reading everything its terminal prints until the terminal exits.

    python -m bench.scale_terminals_client ADDRESS

A child of the bench, driven by JSON lines. stdin: ``{"terminals": [id, ...]}``; the client
attaches to each (past its ``started`` and ``snapshot`` messages) and prints ``{"attached": N}``.
stdin: ``{"go": true}``; the client types Enter into every terminal (each runs ``read go`` before
it prints) and reads every stream to its ``exit``, then prints what it received: bytes and
messages per terminal, ``lagged`` messages, and the CLOCK_MONOTONIC times of the first and last
``exit`` (the bench's clock too), and ends. It lives in a process of its own so that its work on
100 streams neither delays the bench's ReadScreen calls nor hides in the bench's CPU figures.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

import grpc

ATTACH_TIMEOUT = 600.0  # the longest a stream may stay open (the bench's floods take seconds)


@dataclass
class Received:
    """What one stream delivered after the Enter that starts its terminal's output."""

    bytes: int = 0
    messages: int = 0
    lagged: int = 0
    exited_at: float = 0.0
    error: str = ""
    counting: bool = False


async def _attach(stub: Any, pb: Any, terminal_id: str) -> Any:
    call = stub.Attach(timeout=ATTACH_TIMEOUT)
    await call.write(pb.AttachRequest(start=pb.AttachStart(terminal_id=terminal_id)))
    for expected in ("started", "snapshot"):
        message = await call.read()
        kind = message.WhichOneof("kind")
        if kind != expected:
            raise RuntimeError(f"terminal {terminal_id}: Attach sent {kind}, expected {expected}")
    return call


async def _drain(call: Any, received: Received) -> None:
    """Read the stream to its ``exit`` message."""
    try:
        while True:
            message = await call.read()
            if message is grpc.aio.EOF:
                received.error = received.error or "the stream ended before the exit"
                return
            kind = message.WhichOneof("kind")
            if kind == "output":
                if received.counting:
                    received.bytes += len(message.output.data)
                    received.messages += 1
            elif kind == "lagged":
                received.lagged += 1
            elif kind == "exit":
                received.exited_at = time.monotonic()
                await call.done_writing()
                return
    except Exception as error:  # reported, not raised: the bench says which stream failed
        received.error = repr(error)[:300]


async def run(address: str) -> None:
    from ether.v1 import terminal_pb2 as pb
    from ether.v1 import terminal_pb2_grpc

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def order() -> dict[str, Any]:
        line = await reader.readline()
        if not line:
            raise SystemExit(0)  # the bench went away
        return dict(json.loads(line))

    def report(value: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(value) + "\n")
        sys.stdout.flush()

    async with grpc.aio.insecure_channel(address) as channel:
        stub = terminal_pb2_grpc.TerminalServiceStub(channel)
        ids = list((await order())["terminals"])
        calls = await asyncio.gather(*(_attach(stub, pb, terminal_id) for terminal_id in ids))
        received = [Received() for _ in ids]
        report({"attached": len(calls)})
        await order()  # go
        began = time.monotonic()
        enter = pb.AttachRequest(input=pb.TerminalInput(text="\r"))
        for call, one in zip(calls, received, strict=True):
            one.counting = True
            await call.write(enter)
        await asyncio.gather(
            *(_drain(call, one) for call, one in zip(calls, received, strict=True))
        )
        exits = [one.exited_at for one in received if one.exited_at]
        report(
            {
                "began": began,
                "first_exit": min(exits, default=0.0),
                "last_exit": max(exits, default=0.0),
                "bytes": [one.bytes for one in received],
                "messages": sum(one.messages for one in received),
                "lagged": sum(one.lagged for one in received),
                "errors": [one.error for one in received if one.error],
            }
        )


def main() -> int:
    asyncio.run(run(sys.argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
