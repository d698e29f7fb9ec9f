"""The host's side of an agent's stdin: whole lines, queued before any await."""

from __future__ import annotations

import asyncio
import contextlib

import anyio
import structlog
from anyio.abc import ByteSendStream

from ether_host.link.pending import LinkClosed, Pending

log = structlog.get_logger("ether.link")

WRITE_AT_ONCE = 64 * 1024  # a line this long is written at once, not batched
WRITE_HIGH_WATER = 1024 * 1024  # senders wait for the pipe beyond this much buffered


class StdinWriter:
    """Writes lines to one process's stdin.

    A line is queued whole before the first await that can be cancelled (the drain), so a
    cancelled sender never leaves half a line behind.
    """

    def __init__(self, stdin: ByteSendStream, agent: str) -> None:
        self._agent = agent
        self._stdin = stdin
        # grpc.aio pins asyncio, so a process's stdin is an asyncio StreamWriter under
        # anyio's wrapper; writing to it directly makes "queued whole" a synchronous step.
        raw = getattr(stdin, "_stream", None)
        self._raw: asyncio.StreamWriter | None = (
            raw if isinstance(raw, asyncio.StreamWriter) else None
        )
        self._lock = anyio.Lock()
        self._closed = False
        self._out: list[bytes] = []  # lines queued for the next write (see _queue_line)
        self._flush_scheduled = False
        # The loop stdin's transport runs on, looked up once: asyncio's lookup of the running
        # loop is a getpid(2) each time, and this is once per task frame.
        self._loop: asyncio.AbstractEventLoop | None = None

    async def write_line(self, data: bytes, pending: Pending | None = None) -> None:
        """Queue ``data`` (one line, newline included); sets ``pending.sent`` once it is
        queued whole. Raises LinkClosed when stdin is closed or broken."""
        if self._raw is None:
            await self._send_via_stream(data, pending)
            return
        if self._closed or self._raw.transport.is_closing():
            raise LinkClosed(f"agent {self._agent}: stdin closed")
        self._queue_line(data)
        if pending is not None:
            pending.sent = True
        if self._raw.transport.get_write_buffer_size() > WRITE_HIGH_WATER:
            await self.drain()

    @property
    def queues_nowait(self) -> bool:
        """True when queue_line works: stdin is asyncio's, so a line is queued synchronously."""
        return self._raw is not None

    def queue_line(self, data: bytes, pending: Pending | None = None) -> bool:
        """Queue ``data`` (one line) without waiting, as write_line does before its drain;
        True when the caller should ``drain`` (the pipe's buffer is past its high-water mark).
        Only when ``queues_nowait``. Raises LinkClosed when stdin is closed."""
        assert self._raw is not None
        if self._closed or self._raw.transport.is_closing():
            raise LinkClosed(f"agent {self._agent}: stdin closed")
        self._queue_line(data)
        if pending is not None:
            pending.sent = True
        return self._raw.transport.get_write_buffer_size() > WRITE_HIGH_WATER

    async def drain(self) -> None:
        """Wait until the pipe's buffer is below its high-water mark."""
        if self._raw is None:
            return
        buffered = self._raw.transport.get_write_buffer_size()
        if buffered > WRITE_HIGH_WATER:
            # Why a caller (a Pipe stream's reader, an Execute) stops for a while: the agent
            # does not read its stdin as fast as tasks come. Only past the mark: rare.
            log.debug(
                "agent stdin full: waiting for the agent to read",
                agent=self._agent,
                buffered=buffered,
            )
        try:
            await self._raw.drain()
        except (OSError, RuntimeError) as error:
            raise LinkClosed(f"agent {self._agent}: cannot write to stdin ({error})") from None

    def _queue_line(self, data: bytes) -> None:
        """The first line of a turn of the event loop goes out at once (no added latency);
        lines queued later in the same turn go out together at its end, so at many tasks in
        flight the agent reads several frames per wakeup instead of one."""
        self._out.append(data)
        if len(data) >= WRITE_AT_ONCE:
            self._flush()
        elif not self._flush_scheduled:
            self._flush()
            self._flush_scheduled = True
            loop = self._loop
            if loop is None:
                loop = self._loop = asyncio.get_running_loop()
            loop.call_soon(self._flush)

    def flush(self) -> None:
        """Write the lines queued in this turn now rather than at its end: for a caller with
        work of its own to do in the turn that the agent should not wait behind (a workflow
        stage records the start of every task of a batch it just sent)."""
        self._flush()

    def _flush(self) -> None:
        self._flush_scheduled = False
        if not self._out or self._raw is None:
            return
        data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out.clear()
        try:
            self._raw.write(data)
        except (OSError, RuntimeError) as error:  # the process is gone: stdout EOF fails its tasks
            log.info("write to agent stdin failed", agent=self._agent, error=str(error))

    async def _send_via_stream(self, data: bytes, pending: Pending | None) -> None:
        async with self._lock:
            if self._closed:
                raise LinkClosed(f"agent {self._agent}: stdin closed")
            try:
                await self._stdin.send(data)
                if pending is not None:
                    pending.sent = True
            except (
                anyio.BrokenResourceError,
                anyio.ClosedResourceError,
                OSError,
                RuntimeError,
            ) as error:
                raise LinkClosed(f"agent {self._agent}: cannot write to stdin ({error})") from None

    async def close(self) -> None:
        """Write what is queued, then close stdin (the agent sees EOF)."""
        self._flush()
        async with self._lock:
            if not self._closed:
                self._closed = True
                with contextlib.suppress(OSError, anyio.BrokenResourceError):
                    await self._stdin.aclose()
