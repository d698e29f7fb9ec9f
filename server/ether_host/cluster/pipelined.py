"""Lua script calls made in one turn of the event loop, sent to Redis as one pipeline.

A task sent to another host costs two script calls (ledger.py: submit on the calling host,
finish on the running one). Made one by one, each is a connection taken from the
pool, a write, a read and a wake-up; at 64 tasks in flight that was a third of the hosts' CPU
per remote task (py-spy of bench/cluster.py: ``_send_packed_command`` and ``writelines`` 14 %
of the calling host's samples, 20 % of the running host's). The calls the loop's tasks make
before it next polls go out together: one write, one read, each caller woken with its own
answer. A call made while no other is queued or on its way goes out at once from its caller's
own task, as a plain EVALSHA on a connection kept for it (direct.py): a sequential caller pays
no extra turn of the loop and no task for the flush (bench/cluster.py's remote p50); calls made
meanwhile gather into the next batch. At 64 tasks in flight most calls still go alone (one
per task arrives per turn of the loop, and the last is answered before the next: 1.04 calls
per write on a calling host in bench/cluster.py), so the lone call's cost is the one to cut.

The scripts are sent by their SHA (EVALSHA) and loaded with SCRIPT LOAD when Redis says it does
not know them (at the first call, and after Redis restarts), rather than through redis-py's
pipeline script support, which asks Redis SCRIPT EXISTS before every pipeline.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from ether_host.cluster.direct import DirectConnection

if TYPE_CHECKING:
    from redis.asyncio import Redis


class Script:
    """One Lua script, known to the batcher by its SHA."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()


class PipelinedScripts:
    """Runs script calls in batches: ``await call(script, keys, args)``, while ``run()`` runs
    (in the cluster's task group, so a batch on its way is owned and ends with the host)."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._alone = DirectConnection(redis)  # one lone call at a time: see call()
        self._queued: list[tuple[Script, list[Any], asyncio.Future[Any]]] = []
        self._wake = asyncio.Event()
        self._batches: anyio.abc.TaskGroup | None = None  # run()'s, while it runs
        self._on_the_way = 0  # calls sent alone and batches sent, not answered yet

    async def run(self) -> None:
        """Send the calls queued meanwhile, a batch per turn of the loop, until cancelled."""
        try:
            async with anyio.create_task_group() as tg:
                self._batches = tg
                while True:
                    await self._wake.wait()
                    self._wake.clear()
                    calls, self._queued = self._queued, []
                    if calls:
                        self._on_the_way += 1
                        tg.start_soon(self._flush, calls)
        finally:
            from redis.exceptions import ConnectionError as RedisConnectionError

            self._batches = None
            with anyio.CancelScope(shield=True):
                await self._alone.close()
            calls, self._queued = self._queued, []
            for _, _, answer in calls:  # never sent: their callers hear why
                if not answer.done():
                    answer.set_exception(RedisConnectionError("the host is stopping"))

    async def call(self, script: Script, keys: list[str], args: list[Any]) -> Any:
        """The script's answer, or the error Redis or the connection gave."""
        command = [script.sha, len(keys), *keys, *args]
        if self._batches is None or (not self._queued and not self._on_the_way):
            # The kept connection serves one call at a time: the only one on its way, while
            # run() runs (before it starts and after it ends, calls share the client's pool).
            kept = self._batches is not None and not self._on_the_way
            self._on_the_way += 1
            try:
                return await self._call_alone(script, command, kept)
            finally:
                self._on_the_way -= 1
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queued.append((script, command, answer))
        self._wake.set()
        return await answer

    async def _call_alone(self, script: Script, command: list[Any], kept: bool) -> Any:
        from redis.exceptions import NoScriptError

        send = self._alone.command if kept else self._redis.execute_command
        try:
            return await send("EVALSHA", *command)
        except NoScriptError:  # its first call, or Redis restarted: load it, send it again
            await self._redis.script_load(script.source)
            return await send("EVALSHA", *command)

    async def _flush(self, calls: list[tuple[Script, list[Any], asyncio.Future[Any]]]) -> None:
        try:
            await self._flush_batch(calls)
        finally:
            self._on_the_way -= 1

    async def _flush_batch(
        self, calls: list[tuple[Script, list[Any], asyncio.Future[Any]]]
    ) -> None:
        try:
            answers = await self._send(calls)
            again = [i for i, value in enumerate(answers) if _no_script(value)]
            if again:  # the first call of a script, or Redis restarted: load, send those again
                for script in {calls[i][0] for i in again}:
                    await self._redis.script_load(script.source)
                resent = await self._send([calls[i] for i in again])
                for i, value in zip(again, resent, strict=True):
                    answers[i] = value
        except BaseException as error:
            for _, _, answer in calls:
                if not answer.done():
                    answer.set_exception(error)
            if not isinstance(error, Exception):
                raise
            return
        for (_, _, answer), value in zip(calls, answers, strict=True):
            if answer.done():
                continue  # its caller was cancelled meanwhile
            if isinstance(value, Exception):
                answer.set_exception(value)
            else:
                answer.set_result(value)

    async def _send(self, calls: list[tuple[Script, list[Any], asyncio.Future[Any]]]) -> list[Any]:
        # A pooled connection Redis closed is retried once on a new one by the client (its
        # Retry, membership.py); a batch that ran twice is safe: the ledger's scripts answer a
        # repeat as the same task (submit 'same', finish 0).
        async with self._redis.pipeline(transaction=False) as pipe:
            for _, command, _ in calls:
                pipe.execute_command("EVALSHA", *command)
            answers: list[Any] = await pipe.execute(raise_on_error=False)
        return answers


def _no_script(value: Any) -> bool:
    from redis.exceptions import NoScriptError

    return isinstance(value, NoScriptError)
