"""The result cache (docs/agents.md, "The result cache"): the SUCCESS results of actions an agent
declares with a ``cache_ttl``, kept by (agent, action, agent version, params) for that long.

The dispatcher holds one ``ResultCache``: ``MemoryResultCache`` on a single host, an LRU bounded
by bytes (``[cache] max_bytes``); in a cluster the one ``cluster/result_cache.py`` keeps in Redis,
which every host of the cluster reads. Entries are the results as JSON bytes, so both kinds hold
the same thing and a result made on one host is read the same way on another.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from dataclasses import asdict
from typing import Any, Protocol

import orjson

from ether_host.agents.model import Metadata, TaskResult

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
_KEY_PREFIX = "ether:cache:"


class ResultCache(Protocol):
    """Where the dispatcher keeps and finds cached results (the entry's bytes, as ``encode``
    makes them). A cache that cannot answer (Redis out of reach) says it has nothing: a task is
    then run, never failed for the cache's sake."""

    async def get(self, key: str) -> bytes | None: ...

    async def put(self, key: str, entry: bytes, ttl: float) -> None: ...


def cache_key(agent: str, action: str, version: str, params: dict[str, Any]) -> str:
    """The entry's key: the agent, action and version as they are, and a SHA-256 of the params
    as canonical JSON (keys sorted, no whitespace), so the same params in any key order or
    spacing find the same entry."""
    canonical = orjson.dumps(params, option=orjson.OPT_SORT_KEYS)
    digest = hashlib.sha256(canonical).hexdigest()
    return f"{_KEY_PREFIX}{agent}:{action}:{version}:{digest}"


def encode(result: TaskResult) -> bytes:
    """A SUCCESS result as the cache keeps it (its task id is the next caller's, not this)."""
    value = asdict(result)
    del value["task_id"], value["error"]  # a SUCCESS has none
    return orjson.dumps(value)


def decode(entry: bytes, task_id: str, looked_up_in: float) -> TaskResult:
    """A cached entry as the answer to ``task_id``: ``metadata.cached`` set, no cost (nothing
    ran), the lookup's time as its duration; host, pid, model and started_at still say where
    and when the result was made."""
    value = orjson.loads(entry)
    metadata = Metadata(**value.pop("metadata"))
    metadata.cached = True
    metadata.cost = 0.0
    metadata.duration = looked_up_in
    return TaskResult(task_id=task_id, metadata=metadata, **value)


class MemoryResultCache:
    """Entries in this process, the least recently used dropped first once their bytes pass
    ``max_bytes`` (keys and entries counted); an expired entry is dropped when it is looked up
    or reaches the old end."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[str, tuple[bytes, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, key: str) -> bytes | None:
        held = self._entries.get(key)
        if held is None:
            return None
        entry, expires = held
        if time.monotonic() >= expires:
            self._drop(key)
            return None
        self._entries.move_to_end(key)
        return entry

    async def put(self, key: str, entry: bytes, ttl: float) -> None:
        size = len(key) + len(entry)
        if key in self._entries:
            self._drop(key)
        if size > self.max_bytes or ttl <= 0:
            return  # larger than the whole cache: kept, it would push out everything else
        self._entries[key] = (entry, time.monotonic() + ttl)
        self.bytes += size
        while self.bytes > self.max_bytes:
            self._drop(next(iter(self._entries)))

    def _drop(self, key: str) -> None:
        entry, _ = self._entries.pop(key)
        self.bytes -= len(key) + len(entry)
