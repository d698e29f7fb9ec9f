"""Sessions in Redis (docs/cluster.md, "The gateway across hosts"): the cluster's side of the
gateway's ``SessionRecords`` (gateway/records.py), and the reads and the hand-over that let any
host answer for any session.

One session is three keys:

- ``ether:session:<id>``, a hash: ``owner``, ``body`` (the session's own fields as JSON),
  ``version``, ``updated_at`` and ``document`` (its context), and ``holder``, the host that
  serves it (runs its turns, numbers its events);
- ``ether:session:<id>:events``, a list of its last ``event_history`` events as JSON
  ``[sequence, record]``;
- ``ether:sessions:<owner>``, a set of the owner's session ids (ListSessions).

Only the holder writes a session; a host that is asked to change one it does not hold claims it
(the holder field, set atomically: ``claim``), asks the host that held it to let it go, then
reads it. Each key lives ``idle_timeout + retention`` seconds past the session's last write, so
the sessions of a host that died and that nobody takes over go away by themselves.

Writes are queued (the gateway calls ``save_session`` on the event loop, without waiting) and
sent in one MULTI/EXEC per batch by ``run``; ``durable()`` waits until those queued before it
are in Redis, or says UNAVAILABLE when Redis does not take them within a few seconds (they stay
queued and go out once it is back).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import anyio
import orjson
import structlog

from ether_host.errors import Unavailable
from ether_host.gateway import SavedSession
from ether_host.reasons import Reason

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.asyncio.client import Pipeline

log = structlog.get_logger("ether.cluster")

DURABLE_WAIT = 5.0  # seconds durable() waits for Redis before it says UNAVAILABLE
RETRY_PAUSE = 0.5  # seconds between two tries to write a batch Redis refused

# Set the holder to ARGV[2] when the session's owner is ARGV[1]; the previous holder ("" when
# none), or false when there is no such session of that owner.
CLAIM = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return false end
local previous = redis.call('HGET', KEYS[1], 'holder') or ''
redis.call('HSET', KEYS[1], 'holder', ARGV[2])
return previous
"""


def session_key(session_id: str) -> str:
    return f"ether:session:{session_id}"


def events_key(session_id: str) -> str:
    return f"ether:session:{session_id}:events"


def owned_key(owner: str) -> str:
    return f"ether:sessions:{owner}"


class RedisSessionRecords:
    """The gateway's sessions, written to Redis and read back by any host."""

    def __init__(self, event_history: int = 1000, retention: float = 3600.0) -> None:
        self.event_history = event_history
        self.retention = retention
        self._host = ""
        self._redis: Redis | None = None
        self._errors: tuple[type[BaseException], ...] = (OSError,)
        self._queue: list[tuple[int, str, tuple[Any, ...]]] = []
        self._tickets = 0  # writes queued
        self._written = 0  # the ticket of the last write in Redis
        self._owners: dict[str, str] = {}  # sessions written from here, with their owner
        self._queued: asyncio.Event | None = None
        self._progress: asyncio.Event | None = None
        self._failing = ""

    def connect(self, redis: Redis, host: str, errors: tuple[type[BaseException], ...]) -> None:
        self._redis, self._host, self._errors = redis, host, errors

    # --- SessionRecords ------------------------------------------------------------------------

    def save_session(
        self,
        session_id: str,
        owner: str,
        body: dict[str, Any],
        event: tuple[int, dict[str, Any]] | None = None,
        context: tuple[int, float, dict[str, Any]] | None = None,
    ) -> None:
        # Encoded now: the gateway's objects change after the call returns.
        encoded_context = None
        if context is not None:
            version, updated_at, document = context
            encoded_context = (version, updated_at, orjson.dumps(document))
        ttl = int((float(body.get("idle_timeout") or 0) + self.retention) * 1000) or 1000
        self._owners[session_id] = owner
        self._put(
            "save",
            (
                session_id,
                owner,
                orjson.dumps(body),
                None if event is None else orjson.dumps(list(event)),
                encoded_context,
                ttl,
            ),
        )

    def drop_session(self, session_id: str) -> None:
        self._put("drop", (session_id, self._owners.pop(session_id, "")))

    async def durable(self) -> None:
        ticket = self._tickets
        deadline = time.monotonic() + DURABLE_WAIT
        while self._written < ticket:
            if self._progress is None:
                self._progress = asyncio.Event()
            progress = self._progress
            with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
                await progress.wait()
            if self._written < ticket and time.monotonic() >= deadline:
                raise Unavailable(
                    "the session was not written to the cluster's Redis "
                    f"({self._failing or 'no answer yet'}); retry shortly",
                    reason=Reason.STATE_NOT_WRITTEN,
                    retry_after=1.0,
                )

    def _put(self, kind: str, values: tuple[Any, ...]) -> None:
        self._tickets += 1
        self._queue.append((self._tickets, kind, values))
        if self._queued is not None:
            self._queued.set()

    # --- the writer ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Write what is queued, in order, one batch per MULTI/EXEC, until cancelled."""
        assert self._redis is not None, "connect first"
        self._queued = asyncio.Event()
        while True:
            if not self._queue:
                self._queued.clear()
                await self._queued.wait()
                continue
            batch = list(self._queue)
            try:
                async with self._redis.pipeline(transaction=True) as pipe:
                    for _, kind, values in batch:
                        self._write(pipe, kind, values)
                    await pipe.execute()
            except self._errors as error:
                if not self._failing:
                    log.warning("cluster: sessions not written to Redis", error=str(error))
                self._failing = str(error)
                await anyio.sleep(RETRY_PAUSE)
                continue
            if self._failing:
                log.info("cluster: sessions written to Redis again", queued=len(batch))
                self._failing = ""
            del self._queue[: len(batch)]
            self._written = batch[-1][0]
            if self._progress is not None:
                progress, self._progress = self._progress, None
                progress.set()

    def _write(self, pipe: Pipeline, kind: str, values: tuple[Any, ...]) -> None:
        if kind == "drop":
            session_id, owner = values
            pipe.delete(session_key(session_id), events_key(session_id))
            if owner:
                pipe.srem(owned_key(owner), session_id)
            return
        session_id, owner, body, event, context, ttl = values
        key = session_key(session_id)
        fields: dict[Any, Any] = {"owner": owner, "body": body}
        if context is not None:
            fields.update(version=context[0], updated_at=context[1], document=context[2])
        pipe.hset(key, mapping=fields)
        pipe.hsetnx(key, "holder", self._host)  # a new session: held where it opened
        pipe.pexpire(key, ttl)
        if event is not None:
            pipe.rpush(events_key(session_id), event)
            pipe.ltrim(events_key(session_id), -self.event_history, -1)
        pipe.pexpire(events_key(session_id), ttl)
        pipe.sadd(owned_key(owner), session_id)
        pipe.pexpire(owned_key(owner), ttl)

    # --- reads and the hand-over ---------------------------------------------------------------

    async def load(self, session_id: str) -> SavedSession | None:
        """The session as stored, or None."""
        assert self._redis is not None
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.hgetall(session_key(session_id))
                pipe.lrange(events_key(session_id), 0, -1)
                row, events = await pipe.execute()
        except self._errors as error:
            raise _unreachable(error) from None
        if not row or b"body" not in row:
            return None
        return SavedSession(
            body=orjson.loads(row[b"body"]),
            document=orjson.loads(row.get(b"document") or b"{}"),
            version=int(row.get(b"version") or 1),
            updated_at=float(row.get(b"updated_at") or 0.0),
            events=[(int(n), record) for n, record in map(orjson.loads, events)],
        )

    async def owned(self, owner: str) -> list[SavedSession]:
        """Every stored session of ``owner``."""
        assert self._redis is not None
        try:
            ids: set[Any] = await self._redis.smembers(owned_key(owner))
        except self._errors as error:
            raise _unreachable(error) from None
        found = [await self.load(i.decode()) for i in sorted(ids)]
        return [s for s in found if s is not None]

    async def holder(self, session_id: str) -> str:
        """The host that serves the session ('' when it is not stored)."""
        assert self._redis is not None
        try:
            held: Any = await self._redis.hget(session_key(session_id), "holder")
        except self._errors as error:
            raise _unreachable(error) from None
        return held.decode() if held else ""

    async def claim(self, session_id: str, owner: str) -> str | None:
        """Make this host the holder of ``owner``'s session: the previous holder ('' when none),
        or None when ``owner`` has no such session."""
        assert self._redis is not None
        try:
            previous: Any = await self._redis.eval(
                CLAIM, 1, session_key(session_id), owner, self._host
            )
        except self._errors as error:
            raise _unreachable(error) from None
        if previous is None:
            return None
        return previous.decode() if isinstance(previous, bytes) else str(previous)


def _unreachable(error: BaseException) -> Unavailable:
    return Unavailable(
        f"the cluster's sessions cannot be read: Redis is out of reach ({error}); retry shortly",
        reason=Reason.STATE_NOT_WRITTEN,
        retry_after=1.0,
    )
