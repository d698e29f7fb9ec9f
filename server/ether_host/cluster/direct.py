"""One Redis connection held by one user at a time: a blocking stream reader, or the script
call that goes out alone (pipelined.py).

Why not the client's own ``execute_command``: in redis-py 8 each command through the client
takes a connection from the pool under its lock, records the pool's observability counters,
checks the connection by reading its socket (a syscall), runs the client's retry wrapper and,
for XREAD, records the stream's lag: about 15 µs of CPU a command on this machine kind, three
or four such commands per task that crosses hosts (a submit, a finish, the two stream reads).
A connection of the same settings, kept by its one user, pays only the write and the read
(redis-py's own Connection and its hiredis parser: no protocol code of ours).

Like the client built with ``Retry(NoBackoff(), 1)`` that it replaces, a command that meets a
connection Redis closed (it restarted) goes once more on a new connection, so every command
sent through here must be safe to run twice (the ledger's scripts are; reads are).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.asyncio.connection import AbstractConnection


class DirectConnection:
    """``await command(*args)``: the raw reply (RESP2 lists and bytes, as the parser gives
    them), or the error Redis or the connection gave. One caller at a time."""

    def __init__(self, redis: Redis) -> None:
        # Imported here: a host without a cluster imports no Redis client (made only at join).
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        self._closed_error = RedisConnectionError
        self._lost = (RedisConnectionError, RedisTimeoutError, OSError)
        self._pool = redis.connection_pool
        self._connection: AbstractConnection | None = None
        self._closed = False

    async def command(self, *args: Any) -> Any:
        for attempt in (1, 2):
            if self._closed:
                raise self._closed_error("the host is stopping")
            connection = self._connection
            if connection is None:
                made = self._pool.make_connection()  # type: ignore[no-untyped-call]
                connection = self._connection = made
            try:
                if not connection.is_connected:
                    await connection.connect()
                await connection.send_command(*args)
                # A cancel or an error while reading closes the connection (redis-py's
                # read_response), so a reply never read cannot answer the next command.
                return await connection.read_response()
            except self._lost:
                await self._drop()
                if attempt == 2:
                    raise
            except BaseException:
                if not connection.is_connected:
                    self._connection = None
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def close(self) -> None:
        """Close the connection; a command from now on fails as a connection error."""
        self._closed = True
        await self._drop()

    async def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.disconnect(nowait=True)
