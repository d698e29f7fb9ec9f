"""An agent process's stdio as pipes: the host makes them, rather than the event loop.

uvloop (the host's loop) gives a child stdio over socketpairs. A socket cannot be reopened
through /proc/self/fd/1, which the TypeScript adapter needs to move frames off fd 1 (so that
child processes inheriting stdout write to the log, not into the link) and to write them
without libuv's thread pool. Pipes are also the cheaper channel in a tight loop between two
processes (a round trip of 34-43 µs against 70-75 µs here); between the host and a Python
agent the difference was within noise.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

from ether_host.procs import resize_pipe

# stdout's capacity, about a socketpair's default buffer (212,992 bytes). Not more: Linux counts
# pipe capacity per user against /proc/sys/fs/pipe-user-pages-soft (16,384 pages), and past it
# every new pipe of that user gets 8 KiB. At 64 + 16 + 16 pages per agent process, a host runs
# 170 of them within the limit.
STDOUT_PIPE_BYTES = 256 * 1024
READ_BYTES = 256 * 1024


@dataclass
class AgentStdio:
    process: Process
    stdin: PipeWriter
    stdout: PipeReader
    stderr: PipeReader
    transports: list[asyncio.BaseTransport]

    def close(self) -> None:
        """Close the host's ends of the pipes (a no-op for those already closed)."""
        for transport in self.transports:
            transport.close()


async def open_agent_process(
    argv: Sequence[str], *, cwd: str | os.PathLike[str], env: Mapping[str, str]
) -> AgentStdio:
    """Start ``argv`` in a new session with pipes for stdin, stdout and stderr."""
    fds: list[int] = []
    try:
        for _ in range(3):
            fds.extend(os.pipe2(os.O_CLOEXEC))
        stdin_read, stdin_write, stdout_read, stdout_write, stderr_read, stderr_write = fds
        child_ends = [stdin_read, stdout_write, stderr_write]
        parent_ends = [stdin_write, stdout_read, stderr_read]
        resize_pipe(stdout_read, STDOUT_PIPE_BYTES)  # fewer, larger reads of big results
        process = await anyio.open_process(
            list(argv),
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
            stdin=stdin_read,
            stdout=stdout_write,
            stderr=stderr_write,
        )
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    for fd in child_ends:  # the child has its copies; ours would hide its end of the pipes
        os.close(fd)
    loop = asyncio.get_running_loop()
    files = [
        os.fdopen(fd, mode, buffering=0)
        for fd, mode in zip(parent_ends, ("wb", "rb", "rb"), strict=True)
    ]
    transports: list[asyncio.BaseTransport] = []
    try:
        # FlowControlMixin is what asyncio's own subprocess pipes use: it gives drain().
        stdin, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, files[0])
        transports.append(stdin)
        writer = asyncio.StreamWriter(stdin, protocol, None, loop)
        stdout = await _reader(loop, files[1], transports)
        stderr = await _reader(loop, files[2], transports)
    except BaseException:
        for opened in transports:
            opened.close()
        for file in files:  # a no-op for those a transport already closed
            file.close()
        process.kill()
        raise
    return AgentStdio(
        process, PipeWriter(writer), PipeReader(stdout), PipeReader(stderr), transports
    )


async def _reader(
    loop: asyncio.AbstractEventLoop, file: IO[bytes], transports: list[asyncio.BaseTransport]
) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=READ_BYTES, loop=loop)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), file
    )
    transports.append(transport)
    return reader


class PipeReader(ByteReceiveStream):
    """The host's end of a child's stdout or stderr."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self._stream = stream

    async def receive(self, max_bytes: int = READ_BYTES) -> bytes:
        data = await self._stream.read(max_bytes)
        if not data:
            raise anyio.EndOfStream
        return data

    async def aclose(self) -> None:
        self._stream.set_exception(anyio.ClosedResourceError())
        await anyio.lowlevel.checkpoint()


class PipeWriter(ByteSendStream):
    """The host's end of a child's stdin. ``_stream`` is the asyncio StreamWriter, as under
    anyio's own wrapper: the link's StdinWriter writes to it directly (link/writer.py)."""

    def __init__(self, stream: asyncio.StreamWriter) -> None:
        self._stream = stream
        self._closed = False

    async def send(self, item: bytes) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        try:
            self._stream.write(item)
            await self._stream.drain()
        except (ConnectionResetError, BrokenPipeError, RuntimeError) as error:
            raise anyio.BrokenResourceError from error

    async def aclose(self) -> None:
        self._closed = True
        self._stream.close()
        await anyio.lowlevel.checkpoint()
