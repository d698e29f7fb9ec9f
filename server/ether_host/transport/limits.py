"""The host's limits on calls themselves, whatever the method: message and metadata sizes, calls
at once, and response streams open at once per caller and on the whole host (docs/limits.md).

The limits of what one request asks for (page sizes, terminals, sessions, input queues) are
checked where the work is done, in the core; these are the ones only the transport sees.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import grpc

from ether_host.config import HostConfig
from ether_host.errors import QuotaViolation, ResourceExhausted
from ether_host.reasons import Reason
from ether_host.transport.interceptors import (
    OPEN_METHODS_PREFIX,
    Behavior,
    current_identity,
    run_stream,
)

# The largest request or response message, encoded. grpc answers a larger request
# RESOURCE_EXHAUSTED itself ("Received message larger than max"). Attach sends output in
# chunks of at most 512 KiB and a report past 60 MiB is refused, so both fit.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# The most request metadata (headers) a call may carry. grpc rejects metadata between its soft
# limit and its hard limit at random, and past the hard one always (RESOURCE_EXHAUSTED); one
# value for both makes the answer the same every time.
MAX_METADATA_BYTES = 16 * 1024
# Too-frequent pings tolerated before GOAWAY too_many_pings (grpc's default, written down).
MAX_PING_STRIKES = 2
# The host pings an idle connection every 2 minutes and drops it when no ack comes in 20 s.
KEEPALIVE_TIME_MS = 120_000
KEEPALIVE_TIMEOUT_MS = 20_000


def server_options(config: HostConfig) -> list[tuple[str, Any]]:
    """The grpc server's channel arguments."""
    return [
        # grpc enables SO_REUSEPORT by default on Linux, which would let a second
        # host silently share the port; we want "address in use" instead.
        ("grpc.so_reuseport", 0),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_metadata_size", MAX_METADATA_BYTES),
        ("grpc.absolute_max_metadata_size", MAX_METADATA_BYTES),
        # Streams one connection may have open at once (HTTP/2 SETTINGS); a client queues the
        # rest itself. With maximum_concurrent_rpcs it bounds the handlers a stream flood that
        # opens and resets streams (CVE-2023-44487, "rapid reset") can start.
        ("grpc.max_concurrent_streams", config.max_concurrent_rpcs),
        # Keepalive enforcement (grpc's doc/keepalive.md): a client's pings closer together
        # than this with no data between are strikes, and past max_ping_strikes the connection
        # gets GOAWAY ENHANCE_YOUR_CALM "too_many_pings", so a ping flood costs the host little.
        # Pings on a connection without calls are allowed at that rate: a client may keep an
        # idle channel to the host open through NATs and load balancers.
        (
            "grpc.http2.min_ping_interval_without_data_ms",
            int(config.keepalive_min_ping_interval * 1000),
        ),
        ("grpc.http2.max_ping_strikes", MAX_PING_STRIKES),
        ("grpc.keepalive_permit_without_calls", 1),
        # The host's own pings find connections whose peer vanished without a FIN (a client
        # machine that lost power holds its streams' quota until then).
        ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    ]


class StreamQuota:
    """Bounds the response streams (WatchEvents, StreamLogs, Attach, Pipe, ...) open at once,
    per caller and on the whole host.

    Each open stream holds a task, a reader of some history and a share of the loop's time
    for as long as the client keeps it; without a bound one caller could open them until the
    host's grpc limit turns everyone's calls away. Health's Watch is not counted, so probes
    always get through. Runs inside TokenAuth, where the caller is known.
    """

    def __init__(self, per_caller: int, total: int) -> None:
        self.per_caller = per_caller
        self.total = total
        self._open: Counter[str] = Counter()
        self._all = 0

    def decorate(self, behavior: Behavior, method: str, streaming: bool) -> Behavior:
        if not streaming or method.startswith(OPEN_METHODS_PREFIX):
            return behavior

        async def stream_behavior(request: Any, context: grpc.aio.ServicerContext) -> None:
            caller = current_identity.get().name
            self._admit(caller)
            try:
                await run_stream(behavior, request, context)
            finally:
                self._all -= 1
                self._open[caller] -= 1
                if not self._open[caller]:
                    del self._open[caller]

        return stream_behavior

    def _admit(self, caller: str) -> None:
        if self._all >= self.total:
            raise ResourceExhausted(
                f"the host has {self._all} streams open, its limit (max_streams); "
                "end one first or retry later",
                reason=Reason.TOO_MANY_STREAMS,
                metadata={"limit": str(self.total), "setting": "max_streams"},
                retry_after=1.0,
                quota_violations=[QuotaViolation("host", f"at most {self.total} open streams")],
            )
        mine = self._open[caller]
        if mine >= self.per_caller:
            raise ResourceExhausted(
                f"{caller} has {mine} streams open, the limit per caller "
                "(max_streams_per_caller); end one first",
                reason=Reason.TOO_MANY_STREAMS,
                metadata={"limit": str(self.per_caller), "setting": "max_streams_per_caller"},
                quota_violations=[
                    QuotaViolation(f"caller:{caller}", f"at most {self.per_caller} open streams")
                ],
            )
        self._all += 1
        self._open[caller] += 1
