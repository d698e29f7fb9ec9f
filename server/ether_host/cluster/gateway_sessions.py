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
(the holder field, set atomically: ``claim``, which names the host it took it from in
``releasing``), asks the host that held it to let it go, then reads it. Writes are fenced: one
from a host that is neither the holder nor the host being released is dropped, and that host
lets its copy go (``on_lost``), so a host that was slow rather than gone cannot overwrite what
the new holder wrote. Each key lives ``idle_timeout + retention`` seconds past the session's last write, so
the sessions of a host that died and that nobody takes over go away by themselves.

A Redis that comes back empty (restarted without persistence) is noticed by a marker key of
each host's (``ether:sessions:marker:<host>``, looked at every heartbeat): the host writes every
session it holds again, whole (``save_whole``).

Writes are queued (the gateway calls ``save_session`` on the event loop, without waiting) and
sent in one MULTI/EXEC per batch by ``run``; ``durable()`` waits until those queued before it
are in Redis, or says UNAVAILABLE when Redis does not take them within a few seconds (they stay
queued and go out once it is back).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
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

# Set the holder to ARGV[2] when the session's owner is ARGV[1], the previous holder as the
# host being released; the previous holder ("" when none), or false when there is no such
# session of that owner.
CLAIM = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return false end
local previous = redis.call('HGET', KEYS[1], 'holder') or ''
if previous ~= ARGV[2] then
  redis.call('HSET', KEYS[1], 'holder', ARGV[2], 'releasing', previous)
end
return previous
"""
# A session written whole (after Redis came back empty): as SAVE, its events replaced by
# ARGV[10...]. ARGV: host, owner, body, version, updated_at, document, ttl, session id, unused.
WHOLE = """
local holder = redis.call('HGET', KEYS[1], 'holder')
if holder and holder ~= ARGV[1] and redis.call('HGET', KEYS[1], 'releasing') ~= ARGV[1] then
  return 0
end
if not holder then redis.call('HSET', KEYS[1], 'holder', ARGV[1]) end
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'body', ARGV[3], 'version', ARGV[4],
  'updated_at', ARGV[5], 'document', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
redis.call('DEL', KEYS[2])
for i = 10, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
redis.call('PEXPIRE', KEYS[2], ARGV[7])
redis.call('SADD', KEYS[3], ARGV[8])
redis.call('PEXPIRE', KEYS[3], ARGV[7])
return 1
"""
# One write of a session (KEYS: the session, its events, its owner's set), only by its holder
# (or the host being released, or any host for a new session): 1, or 0 when fenced.
# ARGV: host, owner, body, event ('' for none), has context ('1' or ''), version, updated_at,
# document, ttl in ms, events kept, session id.
SAVE = """
local holder = redis.call('HGET', KEYS[1], 'holder')
if holder and holder ~= ARGV[1] and redis.call('HGET', KEYS[1], 'releasing') ~= ARGV[1] then
  return 0
end
if not holder then redis.call('HSET', KEYS[1], 'holder', ARGV[1]) end
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'body', ARGV[3])
if ARGV[5] == '1' then
  redis.call('HSET', KEYS[1], 'version', ARGV[6], 'updated_at', ARGV[7], 'document', ARGV[8])
end
redis.call('PEXPIRE', KEYS[1], ARGV[9])
if ARGV[4] ~= '' then
  redis.call('RPUSH', KEYS[2], ARGV[4])
  redis.call('LTRIM', KEYS[2], -tonumber(ARGV[10]), -1)
end
redis.call('PEXPIRE', KEYS[2], ARGV[9])
redis.call('SADD', KEYS[3], ARGV[11])
redis.call('PEXPIRE', KEYS[3], ARGV[9])
return 1
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
        self._marked = False
        # Told the id of a session another host took over while this one still wrote it.
        self.on_lost: Callable[[str], None] = lambda session_id: None

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

    def save_whole(self, saved: SavedSession) -> None:
        """The session as it is, all of it (its row, context and retained events)."""
        body = saved.body
        session_id, owner = str(body["id"]), str(body["owner"])
        ttl = int((float(body.get("idle_timeout") or 0) + self.retention) * 1000) or 1000
        self._owners[session_id] = owner
        events = [orjson.dumps([n, record]) for n, record in saved.events]
        context = (saved.version, saved.updated_at, orjson.dumps(saved.document))
        self._put("whole", (session_id, owner, orjson.dumps(body), events, context, ttl))

    async def emptied(self) -> bool:
        """Whether Redis lost what this host wrote (restarted empty) since the last look; the
        first look only sets the marker."""
        assert self._redis is not None
        marker = f"ether:sessions:marker:{self._host}"
        try:
            was_missing = await self._redis.set(marker, b"1", nx=True)
        except self._errors:
            return False  # out of reach: looked at again at the next heartbeat
        first, self._marked = not self._marked, True
        return bool(was_missing) and not first

    def forget(self, session_id: str) -> None:
        """This host let the session go: its holder writes (and drops) it from now on."""
        self._owners.pop(session_id, None)

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
                    results = await pipe.execute()
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
            for session_id in sorted(_fenced(batch, results)):
                log.warning(
                    "cluster: a session another host took over is let go", session=session_id
                )
                self.on_lost(session_id)
            if self._progress is not None:
                progress, self._progress = self._progress, None
                progress.set()

    def _write(self, pipe: Pipeline, kind: str, values: tuple[Any, ...]) -> None:
        """A drop, or one SAVE (whose answer ``run`` reads: 0 when it was fenced)."""
        if kind == "drop":
            session_id, owner = values
            pipe.delete(session_key(session_id), events_key(session_id))
            if owner:
                pipe.srem(owned_key(owner), session_id)
            return
        if kind == "whole":
            session_id, owner, body, events, context, ttl = values
            keys = (session_key(session_id), events_key(session_id), owned_key(owner))
            args = (self._host, owner, body, *context, ttl, session_id, "")
            pipe.eval(WHOLE, 3, *keys, *args, *events)
            return
        session_id, owner, body, event, context, ttl = values
        version, updated_at, document = context if context is not None else (0, 0.0, b"")
        pipe.eval(
            SAVE,
            3,
            session_key(session_id),
            events_key(session_id),
            owned_key(owner),
            self._host,
            owner,
            body,
            event or b"",
            "1" if context is not None else "",
            version,
            updated_at,
            document,
            ttl,
            self.event_history,
            session_id,
        )

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

    async def released(self, session_id: str) -> None:
        """The host being released has let the session go (or is gone): its writes are fenced
        from now on."""
        assert self._redis is not None
        try:
            await self._redis.hdel(session_key(session_id), "releasing")
        except self._errors as error:
            raise _unreachable(error) from None

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


def _fenced(batch: list[tuple[int, str, tuple[Any, ...]]], results: list[Any]) -> set[str]:
    """The sessions whose writes in ``batch`` were dropped: another host holds them now."""
    fenced, at = set(), 0
    for _, kind, values in batch:
        if kind in ("save", "whole"):
            if results[at] == 0:
                fenced.add(str(values[0]))
            at += 1
        else:
            at += 2 if values[1] else 1
    return fenced


def _unreachable(error: BaseException) -> Unavailable:
    return Unavailable(
        f"the cluster's sessions cannot be read: Redis is out of reach ({error}); retry shortly",
        reason=Reason.CLUSTER_UNAVAILABLE,
        retry_after=1.0,
    )
