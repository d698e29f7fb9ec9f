"""Finding the tasks a dead host left behind (docs/cluster.md, "When a host dies").

Each host reads an agent's stream as the consumer ``<host>#<instance>``: a restarted host under
the same name is a new consumer, so what its previous life held is told apart from what it
holds now. An entry is claimed only when both hold:

- it has been idle for ``claim_idle``: its consumer has not refreshed it (a live host resets
  the idle time of every entry it runs, every third of ``claim_idle``: ledger.py ``keep``);
- its consumer is not a live host: the directory has no entry for its host name, or one of
  another instance (a restarted namesake). A host stalled past ``claim_idle`` that still
  heartbeats keeps its tasks; only one gone for ``dropout`` loses them.

XCLAIM with the same idle time is what makes one claimer win: the first resets the idle time,
so a second finds nothing idle.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ether_host.cluster.records import HostEntry, host_key

if TYPE_CHECKING:
    from redis.asyncio import Redis

SCAN = 100  # pending entries looked at per stream and round


def consumer_name(host: str, instance: str) -> str:
    return f"{host}#{instance}"


def host_of(consumer: str) -> str:
    """The host name in a consumer name (``#`` is not allowed in host names)."""
    return consumer.rpartition("#")[0] or consumer


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class Claimed:
    """An entry this host claimed from ``consumer``."""

    stream: str
    entry: str
    fields: dict[bytes, bytes]
    consumer: str


class Claims:
    """One host's search for entries left pending by consumers that are gone."""

    def __init__(self, redis: Redis, group: str, consumer: str, claim_idle: float) -> None:
        self._redis = redis
        self._group = group
        self._consumer = consumer
        self._idle_ms = max(1, int(claim_idle * 1000))

    async def stuck(self, stream: str, running: set[str]) -> list[Claimed]:
        """Claim the entries of ``stream`` idle for ``claim_idle`` whose consumer is gone, and
        this host's own that it does not run (``running``: the entry ids it does; an answer it
        could not send while Redis was away leaves one behind)."""
        pending: Any = await self._redis.xpending_range(
            stream, self._group, "-", "+", SCAN, idle=self._idle_ms
        )
        by_consumer: dict[str, list[int | bytes | str | memoryview]] = defaultdict(list)
        for item in pending:
            consumer, entry = _text(item["consumer"]), _text(item["message_id"])
            if consumer != self._consumer or entry not in running:
                by_consumer[consumer].append(entry)
        if not by_consumer:
            return []
        live = await self._live({c for c in by_consumer if c != self._consumer})
        claimed: list[Claimed] = []
        for consumer, entries in by_consumer.items():
            if consumer in live:
                continue
            found: Any = await self._redis.xclaim(
                stream, self._group, self._consumer, self._idle_ms, entries
            )
            for entry, fields in found:
                if fields:  # an entry deleted meanwhile has none
                    claimed.append(Claimed(stream, _text(entry), fields, consumer))
            if consumer != self._consumer:
                await self._forget_if_done(stream, consumer)
        return claimed

    async def _live(self, consumers: set[str]) -> set[str]:
        """The consumers whose host is in the directory as the same instance."""
        if not consumers:
            return set()
        hosts = sorted({host_of(c) for c in consumers})
        raw: list[Any] = await self._redis.mget([host_key(h) for h in hosts])
        instances = {}
        for host, value in zip(hosts, raw, strict=True):
            entry = HostEntry.decode(value) if value is not None else None
            if entry is not None:
                instances[host] = entry.instance
        return {c for c in consumers if instances.get(host_of(c)) == c.rpartition("#")[2]}

    async def _forget_if_done(self, stream: str, consumer: str) -> None:
        """Take a gone consumer out of the group once it holds nothing (a restarted host is a
        new consumer each time: the group would otherwise grow by one per restart)."""
        left: Any = await self._redis.xpending_range(
            stream, self._group, "-", "+", 1, consumername=consumer
        )
        if not left:
            await self._redis.xgroup_delconsumer(stream, self._group, consumer)
