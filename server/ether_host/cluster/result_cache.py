"""The result cache of a cluster (docs/agents.md, "The result cache"): entries in Redis under the
keys ``agents/result_cache.py`` makes, each with its action's ``cache_ttl`` as its Redis expiry,
so a result made on one host answers the same task on every other.

Redis out of reach is a miss (the task runs) and a put that is lost: the cache never fails a
task, and says so in the log once per outage rather than once per task.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import anyio
import structlog

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = structlog.get_logger("ether.cluster")


class RedisResultCache:
    """A ``ResultCache`` (agents/result_cache.py) over the cluster's Redis client."""

    def __init__(
        self, redis: Redis, errors: tuple[type[BaseException], ...], timeout: float
    ) -> None:
        self._redis = redis
        self._errors = errors
        self._timeout = timeout
        self._out_of_reach = False

    async def get(self, key: str) -> bytes | None:
        try:
            with anyio.fail_after(self._timeout):
                entry = await self._redis.get(key)
        except self._errors as error:
            self._lost(error)
            return None
        self._reached()
        # The cluster's client returns bytes (it does not decode responses).
        return entry if isinstance(entry, bytes) else None

    async def put(self, key: str, entry: bytes, ttl: float) -> None:
        try:
            with anyio.fail_after(self._timeout):
                # PX in whole milliseconds, at least one: Redis refuses an expiry of 0.
                await self._redis.set(key, entry, px=max(1, math.ceil(ttl * 1000)))
        except self._errors as error:
            self._lost(error)
            return
        self._reached()

    def _lost(self, error: BaseException) -> None:
        if not self._out_of_reach:
            self._out_of_reach = True
            log.warning(
                "result cache: Redis out of reach; tasks run uncached until it is back",
                error=str(error) or type(error).__name__,
            )

    def _reached(self) -> None:
        if self._out_of_reach:
            self._out_of_reach = False
            log.info("result cache: Redis reached again")
