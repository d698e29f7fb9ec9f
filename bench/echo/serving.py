"""What the bench's stand-alone servers share: run on the chosen loop, stop when told.

The harness stops a server with SIGTERM or by closing its stdin (when the harness itself dies).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any


async def stopped() -> None:
    """Return on SIGTERM or when stdin reaches EOF."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)

    def on_stdin() -> None:
        if not os.read(sys.stdin.fileno(), 1 << 16):  # EOF: the harness is gone
            loop.remove_reader(sys.stdin.fileno())
            stop.set()

    loop.add_reader(sys.stdin.fileno(), on_stdin)
    await stop.wait()


def like_the_host() -> None:
    """Give this server what the Ether host gives itself once serving, so the host and its
    baselines are compared on the same footing: its helper threads' CPU policy (SCHED_BATCH
    for all but the main thread; it speeds up any grpc.aio server at many calls in flight),
    kept while the loop runs, and what exists now frozen out of the garbage collector's sight
    (gc.freeze). Call once the gRPC server has started."""
    from ether_host.procs import keep_helper_threads_batched

    helpers.append(asyncio.ensure_future(keep_helper_threads_batched()))
    gc.collect()
    gc.freeze()


helpers: list[asyncio.Future[None]] = []  # strong references: the loop only keeps weak ones


def main(description: str, serve: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Parse ``--loop asyncio|uvloop`` and run ``serve()`` on that loop."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    args = parser.parse_args()
    if args.loop == "uvloop":
        import uvloop

        uvloop.run(serve())
    else:
        asyncio.run(serve())
