"""The bare gRPC baseline: a grpc.aio server with one generic handler and no generated code.

``/bench.Echo/Unary`` returns the request bytes; ``/bench.Echo/Stream`` is a bidi stream that
echoes every message in order. Prints ``{"port": N}`` on stdout once serving on 127.0.0.1:0, and
stops on SIGTERM or when stdin closes.

    python bench/echo/grpc_server.py [--loop asyncio|uvloop]
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import grpc
from serving import (  # bench/echo/serving.py: run as a script, its folder is on sys.path
    like_the_host,
    main,
    stopped,
)


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
    like_the_host()
    print(json.dumps({"port": port}), flush=True)

    await stopped()
    await server.stop(0.5)


if __name__ == "__main__":
    main(__doc__.splitlines()[0], serve)
