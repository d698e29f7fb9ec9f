"""The bare gRPC baseline: a grpc.aio server with one generic handler and no generated code.

``/bench.Echo/Unary`` returns the request bytes; ``/bench.Echo/Stream`` is a bidi stream that
echoes every message in order. Prints ``{"port": N}`` on stdout once serving on 127.0.0.1:0, and
stops on SIGTERM or when stdin closes.

    python bench/echo/grpc_server.py [--loop asyncio|uvloop]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator

import grpc


async def unary(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
    return request


async def stream(
    requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[bytes, bytes]
) -> AsyncIterator[bytes]:
    async for request in requests:
        yield request


HANDLERS = grpc.method_handlers_generic_handler(
    "bench.Echo",
    {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Stream": grpc.stream_stream_rpc_method_handler(stream),
    },
)


async def serve() -> None:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((HANDLERS,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(json.dumps({"port": port}), flush=True)

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)

    def on_stdin() -> None:
        if not os.read(sys.stdin.fileno(), 1 << 16):  # EOF: the harness is gone
            loop.remove_reader(sys.stdin.fileno())
            stop.set()

    loop.add_reader(sys.stdin.fileno(), on_stdin)
    await stop.wait()
    await server.stop(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    args = parser.parse_args()
    if args.loop == "uvloop":
        import uvloop

        uvloop.run(serve())
    else:
        asyncio.run(serve())


if __name__ == "__main__":
    main()
