"""The record of each task sent between hosts, in Redis: what makes the task id an idempotency
key across the cluster and one answer per task (docs/cluster.md, "When a host dies").

``ether:task:<id>`` (a hash) lives from the task's submission to its answer: the digest of its
agent, action and params, the stream entry that carries it, and, once a host took it over from
a dead one, its runner (the ``host#instance`` that holds it now). The set
``ether:task:<id>:to`` names the reply streams waiting for it. Every change is one Lua script,
so Redis orders them: a resubmission either joins the waiters before the answer goes out or
finds no record and is a new task; a host that took over a task from a dead one fences the
dead one's late answer out (its runner is no longer the record's).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from ether_host.cluster.pipelined import PipelinedScripts, Script

if TYPE_CHECKING:
    from redis.asyncio import Redis

RECORD_MARGIN = 60.0  # seconds a record outlives its task's deadline (the caller gave up then)
RECORD_WITHOUT_DEADLINE = 86_400.0  # a task without a deadline is remembered for a day


def record_key(task_id: str) -> str:
    return f"ether:task:{task_id}"


def waiters_key(task_id: str) -> str:
    return f"ether:task:{task_id}:to"


def digest(agent: str, action: str, params: dict[str, Any]) -> str:
    """What makes two submissions of one task id the same task."""
    canonical = orjson.dumps(
        {"agent": agent, "action": action, "params": params}, option=orjson.OPT_SORT_KEYS
    )
    return hashlib.sha256(canonical).hexdigest()


# KEYS: record, waiters, stream. ARGV: digest, reply stream, ttl ms, task json, stream maxlen.
# 'new' (the task is on the stream), 'same' (joined: the one answer comes to this reply stream
# too) or 'other' (the id names another task).
_SUBMIT = """
local known = redis.call('HGET', KEYS[1], 'digest')
if not known then
  local entry = redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'task', ARGV[4])
  redis.call('HSET', KEYS[1], 'digest', ARGV[1], 'entry', entry)
  redis.call('SADD', KEYS[2], ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return 'new'
end
if known ~= ARGV[1] then
  return 'other'
end
redis.call('SADD', KEYS[2], ARGV[2])
redis.call('PEXPIRE', KEYS[2], math.max(redis.call('PTTL', KEYS[1]), 1))
return 'same'
"""

# KEYS: record, stream. ARGV: runner, entry id, group, '1' when the action is idempotent.
# A host claimed the entry of a dead one: {'run', previous runner} (it may run again), {'died',
# previous runner} (this host answers that it died), or {'gone'}. An entry a host read counts
# as started there: no script marks the start (it cost every task a round trip to Redis), so
# a task read but not yet begun when its host died is answered that it died, never run twice.
_TAKE_OVER = """
if redis.call('HGET', KEYS[1], 'entry') ~= ARGV[2] then
  redis.call('XACK', KEYS[2], ARGV[3], ARGV[2])
  redis.call('XDEL', KEYS[2], ARGV[2])
  return {'gone', ''}
end
local previous = redis.call('HGET', KEYS[1], 'runner') or ''
redis.call('HSET', KEYS[1], 'runner', ARGV[1])
if ARGV[4] == '1' then
  return {'run', previous}
end
return {'died', previous}
"""

# KEYS: record, waiters, stream. ARGV: runner, entry id, group, answer json, reply maxlen.
# 1: the answer went to every waiting reply stream and the task is forgotten; 0: the task is
# no longer this runner's (another host took it over), nothing was sent; or its record is gone
# (nobody waits: its caller gave up long ago), and its entry is dropped.
_FINISH = """
if redis.call('HGET', KEYS[1], 'entry') ~= ARGV[2] then
  redis.call('XACK', KEYS[3], ARGV[3], ARGV[2])
  redis.call('XDEL', KEYS[3], ARGV[2])
  return 0
end
local runner = redis.call('HGET', KEYS[1], 'runner')
if runner and runner ~= ARGV[1] then
  return 0
end
for _, reply in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  redis.call('XADD', reply, 'MAXLEN', '~', ARGV[5], '*', 'answer', ARGV[4])
end
redis.call('XACK', KEYS[3], ARGV[3], ARGV[2])
redis.call('XDEL', KEYS[3], ARGV[2])
redis.call('DEL', KEYS[1], KEYS[2])
return 1
"""

# KEYS: the records of the entries this host runs on one stream. ARGV: runner, stream, group,
# then the entry ids in the order of KEYS. Resets the idle time of those still this runner's
# (XCLAIM JUSTID to itself: the delivery count stays), so no live host's entry looks stuck.
_KEEP = """
local claim = {'XCLAIM', ARGV[2], ARGV[3], ARGV[1], 0}
for i, key in ipairs(KEYS) do
  local runner = redis.call('HGET', key, 'runner')
  if not runner or runner == ARGV[1] then
    claim[#claim + 1] = ARGV[3 + i]
  end
end
if #claim == 5 then
  return 0
end
claim[#claim + 1] = 'JUSTID'
redis.call(unpack(claim))
return #claim - 6
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class Takeover:
    """What a host that claimed a dead host's entry does with it."""

    verdict: str  # 'run', 'died' or 'gone'
    previous: str  # the runner that held it ('host#instance'), '' when none had started it


class TaskLedger:
    """The scripts over the task records, loaded once per Redis client."""

    def __init__(self, redis: Redis, group: str, reply_length: int) -> None:
        self._group = group
        self._reply_length = reply_length
        # The three calls every task makes go out in batches (pipelined.py).
        self._batched = PipelinedScripts(redis)
        self._submit = Script(_SUBMIT)
        self._finish = Script(_FINISH)
        self._take_over = redis.register_script(_TAKE_OVER)
        self._keep = redis.register_script(_KEEP)

    async def send_batches(self) -> None:
        """Send the submit and finish calls in batches until cancelled (pipelined.py)."""
        await self._batched.run()

    async def submit(
        self,
        task_id: str,
        stream: str,
        *,
        task_digest: str,
        reply_to: str,
        ttl: float,
        task_json: bytes,
        stream_length: int,
    ) -> str:
        """'new', 'same' or 'other' (see _SUBMIT)."""
        keys = [record_key(task_id), waiters_key(task_id), stream]
        args: list[bytes | str | int] = [
            task_digest,
            reply_to,
            max(1, int(ttl * 1000)),
            task_json,
            stream_length,
        ]
        return _text(await self._batched.call(self._submit, keys, args))

    async def take_over(
        self, task_id: str, stream: str, entry: str, runner: str, idempotent: bool
    ) -> Takeover:
        keys = [record_key(task_id), stream]
        args = [runner, entry, self._group, "1" if idempotent else "0"]
        verdict, previous = await self._take_over(keys=keys, args=args)
        return Takeover(_text(verdict), _text(previous))

    async def finish(
        self, task_id: str, stream: str, entry: str, runner: str, answer: bytes
    ) -> bool:
        """Send the one answer to every caller waiting; False when the task is not this
        runner's any more (taken over by another host: its answer counts)."""
        keys = [record_key(task_id), waiters_key(task_id), stream]
        args: list[bytes | str | int] = [runner, entry, self._group, answer, self._reply_length]
        return bool(await self._batched.call(self._finish, keys, args))

    async def keep(self, stream: str, runner: str, held: dict[str, str]) -> None:
        """Keep fresh the entries ``held`` (entry id -> task id) this host runs on ``stream``."""
        if not held:
            return
        entries = list(held)
        keys = [record_key(held[e]) for e in entries]
        await self._keep(keys=keys, args=[runner, stream, self._group, *entries])
