"""Requests from one host's gateway to another's, over Redis (docs/cluster.md, "The gateway
across hosts"): put a message in the mailbox of an agent the other host runs, or run a session's
``ctx.*`` host call on the host that holds the session.

A request goes to the stream of the host asked, ``ether:gateway:<host>``, which only that host
reads; the answer comes back on a list of the request's own, ``ether:gateway:answer:<id>``,
which the caller waits on with BLPOP and which expires soon after. The caller waits at most its
``wait``: a host that died with the request unanswered is an UNAVAILABLE naming it, and the
request is not sent again (a SendMessage ``request_id`` makes a retry safe, as on one host).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import orjson
import structlog

from ether_host.cluster.task_wire import error_from, error_json
from ether_host.errors import EtherError, Unavailable
from ether_host.link import TaskFailure
from ether_host.reasons import Reason

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = structlog.get_logger("ether.cluster")

BLOCK_MS = 1000  # a blocking read returns at least this often, to see the host stop
WAIT_STEP = 2.0  # seconds one BLPOP for an answer waits at most (below the socket timeout)
ANSWER_TTL_MS = 60_000  # an answer nobody took (its caller gave up) goes away
STREAM_LENGTH = 10_000  # requests a host's stream holds at most (trimmed as they are read)

Handler = Callable[[dict[str, Any]], Awaitable[Any]]


def requests_stream(host: str) -> str:
    return f"ether:gateway:{host}"


def answer_key(request_id: str) -> str:
    return f"ether:gateway:answer:{request_id}"


class GatewayLink:
    """Both sides of the gateway's requests between hosts, for one host: ``call`` asks
    another host; ``serve`` answers this host's requests with its ``handlers`` by kind."""

    def __init__(
        self,
        host_name: str,
        redis: Redis,
        errors: tuple[type[BaseException], ...],
        stopping: Callable[[], bool],
        handlers: dict[str, Handler],
    ) -> None:
        self._host = host_name
        self._redis = redis  # its own client: BLPOP and XREAD hold a connection while they wait
        self._errors = errors
        self._stopping = stopping
        self._handlers = handlers

    async def call(self, host: str, kind: str, payload: dict[str, Any], wait: float) -> Any:
        """``kind`` with ``payload`` on ``host``: what its handler returned, or the EtherError
        or TaskFailure it raised; Unavailable when Redis or the host does not answer in time."""
        request_id = uuid.uuid4().hex
        request = {"id": request_id, "kind": kind, "payload": payload, "from": self._host}
        deadline = time.monotonic() + wait
        found: Any = None
        try:
            await self._redis.xadd(
                requests_stream(host),
                {"request": orjson.dumps(request)},
                maxlen=STREAM_LENGTH,
                approximate=True,
            )
            while found is None and time.monotonic() < deadline:
                step = min(WAIT_STEP, max(0.01, deadline - time.monotonic()))
                found = await self._redis.blpop([answer_key(request_id)], timeout=step)
        except self._errors as error:
            raise Unavailable(
                f"host {host} could not be asked ({kind}): Redis is out of reach: {error}",
                reason=Reason.CLUSTER_UNAVAILABLE,
                retry_after=1.0,
            ) from None
        if found is None:  # the host is listed but silent: the error names it, as WatchEvents'
            raise Unavailable(
                f"host {host} did not answer ({kind}) within {wait:g} s; it may have "
                "stopped (a host killed leaves the directory within cluster_dropout): retry",
                reason=Reason.HOST_UNAVAILABLE,
                metadata={"host": host},
                resource=("host", host),
                retry_after=1.0,
            )
        answer = orjson.loads(found[1])
        if "error" in answer:
            raise error_from(answer["error"])
        if "failure" in answer:
            raise TaskFailure(str(answer["failure"]["code"]), str(answer["failure"]["message"]))
        return answer.get("value")

    async def serve(self) -> None:
        """Answer the requests on this host's stream until the host stops, each in a task of
        its own (a slow one holds up no other)."""
        stream = requests_stream(self._host)
        last = ""  # from the stream's end as first seen: not what an earlier namesake left
        async with anyio.create_task_group() as tg:
            while not self._stopping():
                try:
                    if not last:
                        newest: Any = await self._redis.xrevrange(stream, count=1)
                        last = newest[0][0] if newest else "0-0"
                    found: Any = await self._redis.xread({stream: last}, count=64, block=BLOCK_MS)
                    for _, entries in found or ():
                        for entry_id, fields in entries:
                            last = entry_id
                            tg.start_soon(self._answer, orjson.loads(fields[b"request"]))
                    if found:
                        await self._redis.xtrim(stream, minid=last)
                except self._errors:
                    await anyio.sleep(BLOCK_MS / 1000)  # Redis away: the heartbeat says degraded
            tg.cancel_scope.cancel()

    async def _answer(self, request: dict[str, Any]) -> None:
        kind = str(request.get("kind", ""))
        handler = self._handlers.get(kind)
        answer: dict[str, Any]
        try:
            if handler is None:
                raise Unavailable(
                    f"host {self._host} does not answer {kind!r} requests (an older version?)",
                    reason=Reason.HOST_UNAVAILABLE,
                    metadata={"host": self._host},
                )
            answer = {"value": await handler(request.get("payload") or {})}
        except EtherError as error:
            answer = {"error": error_json(error)}
        except TaskFailure as failure:
            answer = {"failure": {"code": failure.code, "message": failure.message}}
        key = answer_key(str(request.get("id", "")))
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.rpush(key, orjson.dumps(answer))
                pipe.pexpire(key, ANSWER_TTL_MS)
                await pipe.execute()
        except self._errors as error:
            log.warning(
                "cluster: could not answer a gateway request",
                kind=kind,
                asked_by=request.get("from"),
                error=str(error),
            )
