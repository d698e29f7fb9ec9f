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
import contextlib
import fcntl
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)  # Linux
PIPE_BYTES = 1024 * 1024  # the default /proc/sys/fs/pipe-max-size: a 20 MB result in 20 reads
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
        for fd in (stdout_read, stderr_read):  # fewer, larger reads of big output
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_BYTES)
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
    stdin_fd, stdout_fd, stderr_fd = parent_ends
    try:
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(stdin_fd, "wb", buffering=0)
        )
        stdin_fd = -1
        transports: list[asyncio.BaseTransport] = [transport]
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        stdout = await _reader(loop, stdout_fd, transports)
        stdout_fd = -1
        stderr = await _reader(loop, stderr_fd, transports)
        stderr_fd = -1
    except BaseException:
        for fd in (stdin_fd, stdout_fd, stderr_fd):
            if fd >= 0:
                os.close(fd)
        process.kill()
        raise
    return AgentStdio(
        process, PipeWriter(writer), PipeReader(stdout), PipeReader(stderr), transports
    )


async def _reader(
    loop: asyncio.AbstractEventLoop, fd: int, transports: list[asyncio.BaseTransport]
) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=READ_BYTES, loop=loop)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(fd, "rb", buffering=0)
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
