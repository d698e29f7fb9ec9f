"""An agent process's stdio as pipes: the host makes them, rather than the event loop.

uvloop (the host's loop) gives a child stdio over socketpairs. A socket cannot be reopened
through /proc/self/fd/1, which the TypeScript adapter needs to move frames off fd 1 (so that
child processes inheriting stdout write to the log, not into the link) and to write them
without libuv's thread pool. Pipes are also the cheaper channel in a tight loop between two
processes (a round trip of 34-43 µs against 70-75 µs here); between the host and a Python
agent the difference was within noise.

An agent's stdout has no reader task: the loop hands each chunk it reads to the link
(``StdoutPipe.deliver``), one task step per read fewer than asyncio's StreamReader.

Where bubblewrap can make a PID namespace, the agent runs in one of its own (containment.py):
nothing it starts, however it detaches, outlives it or the host. The process handed back is
then the agent's own (``ContainedProcess``: its pid, its exit status), not bwrap's.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from signal import SIGKILL, SIGTERM, Signals
from typing import IO, cast

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

from ether_host import containment, procs
from ether_host.procs import resize_pipe
from ether_host.sandbox import SandboxPolicy

# stdout's capacity, about a socketpair's default buffer (212,992 bytes). Not more: Linux counts
# pipe capacity per user against /proc/sys/fs/pipe-user-pages-soft (16,384 pages), and past it
# every new pipe of that user gets 8 KiB. At 64 + 16 + 16 pages per agent process, a host runs
# 170 of them within the limit.
STDOUT_PIPE_BYTES = 256 * 1024
READ_BYTES = 256 * 1024
# How long a contained agent may take to appear inside its namespace (bwrap's setup takes ~3 ms;
# far longer on a loaded machine), and how often to look.
PROGRAM_START_LIMIT = 30.0
PROGRAM_POLL = 0.001


@dataclass
class AgentStdio:
    process: Process  # the agent's own pid and exit, also when bwrap runs it
    stdin: PipeWriter
    stdout: StdoutPipe
    stderr: PipeReader
    transports: list[asyncio.BaseTransport]

    def close(self) -> None:
        """Close the host's ends of the pipes (a no-op for those already closed)."""
        for transport in self.transports:
            transport.close()


async def open_agent_process(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str],
    env: Mapping[str, str],
    sandbox: SandboxPolicy | None = None,
    prelude: Sequence[str] = (),
) -> AgentStdio:
    """Start ``argv`` in a new session with pipes for stdin, stdout and stderr (in a PID
    namespace of its own where bubblewrap can make one, in ``sandbox`` where it can make
    that)."""
    contained = containment.probe()
    if contained.active:
        _check_executable(argv[0], cwd, env)  # bwrap would fail only inside, with exit 1
        # The host's pid means nothing inside the namespace (an adapter probing it would think
        # the host gone); the namespace itself ends with the host.
        env = {name: value for name, value in env.items() if name != "ETHER_HOST_PPID"}
    wrapped, wrapped_env = contained.wrap(argv, env, sandbox=sandbox)
    # ``prelude`` first (resources.py): the agent is in its control groups and under its
    # rlimits before the wrapper or the agent runs. Its execs keep the pid.
    wrapped = [*prelude, *wrapped]
    fds: list[int] = []
    try:
        for _ in range(3):
            fds.extend(os.pipe2(os.O_CLOEXEC))
        stdin_read, stdin_write, stdout_read, stdout_write, stderr_read, stderr_write = fds
        child_ends = [stdin_read, stdout_write, stderr_write]
        parent_ends = [stdin_write, stdout_read, stderr_read]
        resize_pipe(stdout_read, STDOUT_PIPE_BYTES)  # fewer, larger reads of big results
        process = await anyio.open_process(
            wrapped,
            cwd=cwd,
            env=wrapped_env,
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
    if contained.active:
        try:
            process = await _contained(process)
        except BaseException:
            for fd in parent_ends:
                os.close(fd)
            process.kill()
            raise
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
        stdout_transport, stdout = await loop.connect_read_pipe(lambda: StdoutPipe(loop), files[1])
        transports.append(stdout_transport)
        stderr = await _reader(loop, files[2], transports)
    except BaseException:
        for opened in transports:
            opened.close()
        for file in files:  # a no-op for those a transport already closed
            file.close()
        process.kill()
        raise
    return AgentStdio(process, PipeWriter(writer), stdout, PipeReader(stderr), transports)


def _check_executable(program: str, cwd: str | os.PathLike[str], env: Mapping[str, str]) -> None:
    """Raise what exec would (ENOENT) for a program that is not there."""
    if os.sep in program:
        found = os.path.join(cwd, program)
        if os.path.isfile(found) and os.access(found, os.X_OK):
            return
    elif shutil.which(program, path=env.get("PATH", os.defpath)):
        return
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


async def _contained(wrapper: Process) -> ContainedProcess:
    """Wait until the agent runs inside the namespace (a session leader of its own)."""
    deadline = time.monotonic() + PROGRAM_START_LIMIT
    while wrapper.returncode is None and time.monotonic() < deadline:
        pid = containment.program_pid(wrapper.pid)
        if pid is not None:
            return ContainedProcess(wrapper, pid)
        await anyio.sleep(PROGRAM_POLL)
    # Gone before its program started (bwrap failed: its stderr says why), or never seen: the
    # wrapper stands for it, and killing it ends the namespace.
    return ContainedProcess(wrapper, wrapper.pid)


class ContainedProcess(Process):
    """An agent in a PID namespace, seen as the agent itself.

    ``pid`` is the agent's (a session and process group leader, so signals to its group reach
    it and what it started, as without a namespace); its exit is the wrapper's, with bwrap's
    128+N read back as signal N. SIGKILL goes to the wrapper: the namespace dies with it."""

    def __init__(self, wrapper: Process, pid: int) -> None:
        self._wrapper = wrapper
        self._pid = pid
        if pid != wrapper.pid:
            procs.wrappers[pid] = wrapper.pid

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def returncode(self) -> int | None:
        return containment.program_returncode(self._wrapper.returncode)

    async def wait(self) -> int:
        try:
            await self._wrapper.wait()
        finally:
            if self._wrapper.returncode is not None:
                procs.wrappers.pop(self._pid, None)
        code = self.returncode
        assert code is not None
        return code

    def terminate(self) -> None:
        self.send_signal(SIGTERM)

    def kill(self) -> None:
        self._wrapper.kill()

    def send_signal(self, signal: Signals) -> None:
        if signal == SIGKILL or self._pid == self._wrapper.pid:
            self._wrapper.send_signal(signal)
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._pid, signal)

    async def aclose(self) -> None:
        await self._wrapper.aclose()

    @property
    def stdin(self) -> ByteSendStream | None:
        return None  # the agent's pipes are AgentStdio's, made by the host

    @property
    def stdout(self) -> ByteReceiveStream | None:
        return None

    @property
    def stderr(self) -> ByteReceiveStream | None:
        return None


async def _reader(
    loop: asyncio.AbstractEventLoop, file: IO[bytes], transports: list[asyncio.BaseTransport]
) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=READ_BYTES, loop=loop)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), file
    )
    transports.append(transport)
    return reader


class StdoutPipe(asyncio.Protocol):
    """The host's end of an agent's stdout, read by the loop itself: each chunk goes to the
    link's callback as it is read. A reader task in between (asyncio's StreamReader and a
    task awaiting it) cost a task step per read: 2-7 % of the host's CPU per task in an A/B."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._transport: asyncio.ReadTransport | None = None
        self._on_chunk: Callable[[bytes], None] | None = None
        self._early: list[bytes] = []  # read before deliver() began (the agent's hello)
        self._early_bytes = 0
        self._paused = False
        self._ended = False
        self._eof: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's read transport is no subclass of asyncio.ReadTransport, but has its methods.
        self._transport = cast(asyncio.ReadTransport, transport)

    def data_received(self, data: bytes) -> None:
        if self._on_chunk is not None:
            self._on_chunk(data)
        elif not self._ended:
            self._early.append(data)
            self._early_bytes += len(data)
            if self._early_bytes > READ_BYTES and self._transport is not None:
                self._transport.pause_reading()  # nobody reads yet: let the pipe fill
                self._paused = True

    def eof_received(self) -> bool:
        self._end()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()

    def _end(self) -> None:
        self._ended = True
        if self._eof is not None and not self._eof.done():
            self._eof.set_result(None)

    async def deliver(self, on_chunk: Callable[[bytes], None]) -> None:
        """Call ``on_chunk`` with every chunk read, in order, until EOF; it must not raise.
        Chunks read after this returns or is cancelled are dropped."""
        if self._on_chunk is not None or self._eof is not None:
            raise RuntimeError("an agent's stdout is delivered once")
        early, self._early, self._early_bytes = self._early, [], 0
        for chunk in early:
            on_chunk(chunk)
        if self._ended:
            return
        self._eof = self._loop.create_future()
        self._on_chunk = on_chunk
        if self._paused and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        try:
            await self._eof
        finally:
            self._on_chunk = None
            self._ended = True


class PipeReader(ByteReceiveStream):
    """The host's end of an agent's stderr."""

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
