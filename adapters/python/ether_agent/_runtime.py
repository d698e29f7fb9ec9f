"""The runtime: handshake, task dispatch, host calls and shutdown over the stdio link.

Frames are read and written on one asyncio loop, which never waits on a handler: cancel,
ping, reply and shutdown frames are handled while tasks run. Threads: a host watch, and a
pool for sync handlers (which may send frames: the writer takes them from any thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import os
import signal
import sys
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NoReturn

from . import _errors as codes
from ._agent import Agent, Output
from ._boot import Boot, boot, fatal
from ._context import LEVELS, TaskContext, int64
from ._deadlines import Deadlines
from ._errors import AgentError, FatalError
from ._hostlife import EXIT_FATAL, host_died, host_is_dead, kill_group_members
from ._io import FrameReader, FrameWriter, Oversize, diag, encode
from ._libc import release_free_memory, release_zero_pages
from ._schema import validate

EOF_GRACE_S = 3.0  # stdin closed without a shutdown frame: in-flight tasks get this long
SIGTERM_GRACE_S = 1.0
CANCEL_WAIT_S = 1.0  # after cancelling, how long handlers get to unwind
FLUSH_TIMEOUT_S = 10.0


def serve(agent: Agent, boot_state: Boot | None = None) -> NoReturn:
    """Run ``agent`` on the stdio link until shutdown, then exit the process."""
    state = boot_state or boot()
    runtime = Runtime(agent, state)
    loop = _new_event_loop()
    asyncio.set_event_loop(loop)
    # Not asyncio.run: it would await every leftover task, and a handler that swallows its
    # cancellation would hold the exit forever. Its result is already written; exit instead.
    code = loop.run_until_complete(runtime.main())
    if not runtime.writer.close(FLUSH_TIMEOUT_S):
        diag("the host did not read the last frames in time")
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    kill_group_members()
    os._exit(code)


def _new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop when the interpreter has it (the host's does), unless ETHER_AGENT_LOOP=asyncio:
    every frame costs a turn or two of the loop, and uvloop's turn is a fraction of asyncio's
    pure-Python one (an echo task: ~20 % less agent CPU, ~40 µs less latency)."""
    if os.environ.get("ETHER_AGENT_LOOP", "").lower() != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            loop = uvloop.new_event_loop()
            # The loop object holds a 256 KiB receive buffer for uvloop's own transports
            # (sockets, pipes a user's code opens; the link reads its fd itself), zeroed on
            # allocation, which touched every page: 0.24 MiB of each idle agent's private
            # memory (bench/scale.py's USS). Its zero pages go back to the OS; the first
            # reads of a transport fault them in again, zeroed, as they were.
            release_zero_pages(id(loop), type(loop).__basicsize__)
            return loop
    return asyncio.new_event_loop()


class _Run:
    """One task in flight."""

    __slots__ = ("__weakref__", "ctx", "done", "id", "message", "reason", "started", "task")

    def __init__(self, id: str, ctx: TaskContext) -> None:
        self.id = id
        self.ctx = ctx
        self.task: asyncio.Task[None] | None = None
        self.started = False
        self.reason: str | None = None
        self.message = ""
        self.done = False

    def running(self) -> bool:
        return not self.done

    def time_out(self) -> None:
        self.cancel(codes.TIMEOUT, "the task's deadline passed")

    def cancel(self, reason: str, message: str) -> None:
        if self.done or self.reason is not None:
            return
        self.reason = reason
        self.message = message
        self.ctx._cancel()
        # A task cancelled before its coroutine first ran would never run any of it, so
        # nothing would answer for it: an unstarted task is left to start, see the reason
        # and answer (Runtime._execute).
        if self.task is not None and self.started:
            self.task.cancel()


class Runtime:
    """One session of the stdio link for one agent."""

    def __init__(self, agent: Agent, state: Boot) -> None:
        self.agent = agent
        self.state = state
        self.writer = FrameWriter(state.channel.out_fd)
        self.max_frame = min(agent.max_frame, state.host_max_frame)
        self.agent_name = agent.name
        self._log_level = LEVELS["info"]
        self._runs: dict[str, _Run] = {}
        self._calls: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._call_ids = itertools.count(1)
        self._pool = _HandlerPool(agent.max_concurrency, thread_name_prefix="ether-handler")
        self._shutdown_at: float | None = None
        self._exit_code = 0

    # --- frames out --------------------------------------------------------------------------

    def send(self, frame: dict[str, Any]) -> bool:
        """Queue one frame; False (and nothing sent) if it is not JSON or exceeds the max frame."""
        try:
            data = encode(frame)
        except (TypeError, ValueError) as exc:
            diag(f"dropped a {frame.get('type')} frame that is not JSON: {exc}")
            return False
        if len(data) - 1 > self.max_frame:
            diag(f"dropped a {frame.get('type')} frame of {len(data) - 1} bytes (max frame)")
            return False
        self.writer.write(data)
        return True

    def log_enabled(self, level: str) -> bool:
        return LEVELS.get(level, 20) >= self._log_level

    def _send_result(self, frame: dict[str, Any]) -> None:
        try:
            data = encode(frame)
        except (TypeError, ValueError) as exc:
            err = AgentError(codes.INTERNAL, f"the result is not JSON: {exc}")
            data = encode(_error_frame(frame["id"], err))
        if len(data) - 1 > self.max_frame:
            err = AgentError(
                codes.FRAME_TOO_LARGE,
                f"the result frame of {len(data) - 1} bytes exceeds the max frame of "
                f"{self.max_frame} bytes",
                {"size": len(data) - 1, "max_frame": self.max_frame},
            )
            data = encode(_error_frame(frame["id"], err))
        self.writer.write(data)

    # --- session -----------------------------------------------------------------------------

    async def main(self) -> int:
        self.loop = asyncio.get_running_loop()
        self._deadlines: Deadlines[_Run] = Deadlines(self.loop, _Run.running, _Run.time_out)
        self._inbox: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._pumping = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._wake = asyncio.Event()
        self._exit = asyncio.Event()
        self.loop.add_signal_handler(signal.SIGTERM, self._on_sigterm)
        self.writer.attach(self.loop)
        reader = FrameReader(
            self.state.channel.in_fd,
            lambda: self.max_frame,
            self._on_frame,
            lambda o: self._inbox.put_nowait(("oversize", o)),
            lambda: self._inbox.put_nowait(("eof", None)),
        )
        reader.start(self.loop)
        self.send(self._hello())
        welcome = await self._handshake()
        if welcome is None:
            return self._exit_code
        self.agent.link = self
        try:
            for hook in self.agent.start_hooks:
                await self._call_hook(hook, self.agent.config)
        except FatalError as exc:
            self.writer.close(FLUSH_TIMEOUT_S)
            fatal(self.state.channel, exc.code, exc.message)
        # The agent's code and what its start hooks made live as long as the process: out of
        # the cyclic collector's sight, its full collections under load walk far fewer objects
        # (shorter pauses; refcounting still frees anything of it that is dropped).
        gc.collect()
        gc.freeze()
        # What start-up freed and the heap still holds goes back to the OS: chiefly the
        # compiler's garbage when bytecode cannot be cached (a read-only install or agent
        # folder), 0.9 MiB of an idle echo agent whose SDK bytecode was stale; ~0 otherwise.
        release_free_memory()
        pump = self.loop.create_task(self._pump())
        await self._exit.wait()
        pump.cancel()
        self.agent.link = None
        self._pool.shutdown(wait=False, cancel_futures=True)
        # A sync handler's thread cannot be stopped, only told through ctx.cancelled: give
        # the ones still running (their results are already sent) time to finish unwinding,
        # or the process exit would cut their cleanup short.
        running = [asyncio.wrap_future(future) for future in list(self._pool.running)]
        if running:
            await asyncio.wait(running, timeout=CANCEL_WAIT_S)
        return self._exit_code

    def _post(self, kind: str, payload: Any) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: the session is over
            self.loop.call_soon_threadsafe(self._inbox.put_nowait, (kind, payload))

    def _hello(self) -> dict[str, Any]:
        agent = self.agent
        identity: dict[str, Any] = {
            "name": agent.name,
            "version": agent.version,
            "language": "python",
            "runtime": f"{sys.implementation.name} {sys.version.split()[0]}",
        }
        if agent.description:
            identity["description"] = agent.description
        identity["kind"] = agent.kind
        if agent.tags:
            identity["tags"] = agent.tags
        return {
            "type": "hello",
            "protocol": self.state.protocol,
            "agent": identity,
            "actions": agent.hello_actions(),
            "capabilities": {
                "max_concurrency": agent.max_concurrency,
                "cancel": True,
                "progress": True,
                "ping": True,
                "calls": agent.calls,
                "max_frame": agent.max_frame,
            },
            "pid": os.getpid(),
        }

    async def _handshake(self) -> dict[str, Any] | None:
        """Wait for the welcome; None when the session ends first (EOF, refusal, SIGTERM)."""
        while True:
            kind, payload = await self._inbox.get()
            if kind == "eof":
                diag("stdin closed before the welcome")
                return None
            if kind == "sigterm":
                return None
            if kind != "frame":
                continue
            ftype = payload.get("type")
            if ftype == "ping":
                self.send({"type": "pong", "id": payload.get("id", "")})
            elif ftype != "welcome":
                diag(f"dropped a {ftype!r} frame that came before the welcome")
            elif payload.get("error"):
                err = AgentError.from_json(payload["error"])
                diag(f"the host refused this agent: {err.code}: {err.message}")
                self._exit_code = EXIT_FATAL
                return None
            else:
                self._welcome(payload)
                welcome: dict[str, Any] = payload
                return welcome

    def _welcome(self, welcome: dict[str, Any]) -> None:
        host_max = int64(welcome.get("max_frame"))
        if host_max > 0:
            self.max_frame = min(self.agent.max_frame, host_max)
        config = welcome.get("config")
        self.agent.config = config if isinstance(config, dict) else {}
        self._log_level = LEVELS.get(str(welcome.get("log_level") or "info"), 20)
        self.agent_name = str(welcome.get("agent_name") or self.agent.name)

    def _on_frame(self, frame: dict[str, Any]) -> None:
        # Once the session runs and nothing waits in the inbox, a frame is dispatched right
        # here, on the loop: one wakeup of the pump task less per frame, same order.
        if self._pumping and self._inbox.empty():
            self._dispatch_safely(frame)
        else:
            self._inbox.put_nowait(("frame", frame))

    def _dispatch_safely(self, frame: dict[str, Any]) -> None:
        try:
            self._dispatch(frame)
        except Exception as exc:  # a malformed frame must not stop the session
            self._malformed(frame, exc)

    async def _pump(self) -> None:
        self._pumping = True
        while True:
            kind, payload = await self._inbox.get()
            if kind == "frame":
                self._dispatch_safely(payload)
            elif kind == "oversize":
                self._oversize(payload)
            elif kind == "eof":
                self._begin_shutdown(EOF_GRACE_S, "stdin closed", shorten=False)
            elif kind == "sigterm":
                self._begin_shutdown(SIGTERM_GRACE_S, "SIGTERM", shorten=True)

    def _on_sigterm(self) -> None:
        if host_is_dead() or not self.state.watch.host_alive():
            host_died("parent-death signal")
        self._post("sigterm", None)

    # --- dispatch ----------------------------------------------------------------------------

    def _dispatch(self, frame: dict[str, Any]) -> None:
        ftype = frame.get("type")
        if ftype == "task" or (ftype is None and "payload" in frame):
            self._task(frame)
        elif ftype == "cancel":
            run = self._runs.get(str(frame.get("id")))
            if run is None:
                diag(f"cancel for unknown task id {frame.get('id')!r} dropped")
            else:
                run.cancel(codes.CANCELLED, str(frame.get("reason") or "cancelled by the host"))
        elif ftype == "reply":
            fut = self._calls.get(str(frame.get("id")))
            if fut is None or fut.done():
                diag(f"reply for unknown call id {frame.get('id')!r} dropped")
            else:
                fut.set_result(frame)
        elif ftype == "ping":
            self.send({"type": "pong", "id": frame.get("id", "")})
        elif ftype == "shutdown":
            grace_s = max(0, int64(frame.get("grace_ms"))) / 1000
            self._begin_shutdown(grace_s, str(frame.get("reason") or "shutdown"), shorten=True)
        else:
            diag(f"dropped a frame of unknown type {ftype!r}")

    def _malformed(self, frame: dict[str, Any], exc: Exception) -> None:
        diag(f"dropped a malformed {frame.get('type')!r} frame: {exc!r}")
        tid = frame.get("id")
        is_task = frame.get("type") == "task" or (frame.get("type") is None and "payload" in frame)
        if is_task and isinstance(tid, str) and tid and tid not in self._runs:
            err = AgentError(codes.INVALID_PARAMS, f"malformed task frame: {exc}")
            self._send_result(_error_frame(tid, err))

    def _oversize(self, info: Oversize) -> None:
        diag(f"discarded an incoming line of {info.size} bytes (max frame {self.max_frame})")
        if info.type == "task" and info.id and info.id not in self._runs:
            err = AgentError(
                codes.FRAME_TOO_LARGE,
                f"the task frame of {info.size} bytes exceeds the max frame of "
                f"{self.max_frame} bytes",
                {"size": info.size, "max_frame": self.max_frame},
            )
            self._send_result(_error_frame(info.id, err))

    def _task(self, frame: dict[str, Any]) -> None:
        tid = frame.get("id")
        if not isinstance(tid, str) or not tid:
            diag(f"dropped a task without a string id: {str(frame)[:200]}")
            return
        if tid in self._runs:
            diag(f"dropped a task whose id {tid!r} is already in flight")
            return
        if self._shutdown_at is not None:
            err = AgentError(codes.SHUTTING_DOWN, "the agent is shutting down", retryable=True)
            self._send_result(_error_frame(tid, err))
            return
        action = frame.get("action")
        legacy = not action and "params" not in frame and "payload" in frame
        if not action and len(self.agent.actions) == 1:
            action = next(iter(self.agent.actions))
        spec = self.agent.actions.get(str(action))
        if spec is None:
            names = sorted(self.agent.actions)
            err = AgentError(
                codes.UNKNOWN_ACTION,
                f"unknown action {action!r}; this agent offers: {', '.join(names)}",
                {"actions": names},
            )
            self._send_result(_error_frame(tid, err))
            return
        params = frame.get("payload") if legacy else frame.get("params")
        if params is None and not legacy:
            params = {}
        if not (legacy and spec.style == "payload") and not (
            spec.any_object_params and isinstance(params, dict)
        ):
            violations = validate(spec.params_schema, params)
            if violations:
                text = "; ".join(f"{v['field']}: {v['description']}" for v in violations)
                err = AgentError(
                    codes.INVALID_PARAMS,
                    f"invalid params for {spec.name!r}: {text}",
                    {"violations": violations},
                )
                self._send_result(_error_frame(tid, err))
                return
        ctx = TaskContext(self, frame, spec.name, self.agent.config, self.agent_name)
        run = _Run(tid, ctx)
        self._runs[tid] = run
        self._idle.clear()
        run.task = self.loop.create_task(self._execute(run, spec, params))
        if ctx.deadline is not None:
            self._deadlines.add(ctx.deadline, run)

    async def _execute(self, run: _Run, spec: Any, params: Any) -> None:
        run.started = True
        try:
            if run.reason is not None:  # cancelled before it started: the handler never runs
                raise asyncio.CancelledError
            value = await spec.invoke(params, run.ctx, self._pool)
        except asyncio.CancelledError:
            err = AgentError(run.reason or codes.CANCELLED, run.message or "cancelled")
            frame = _error_frame(run.id, err)
        except AgentError as exc:
            frame = _error_frame(run.id, exc)
        except Exception as exc:
            err = AgentError(
                codes.INTERNAL,
                f"{type(exc).__name__}: {exc}",
                {"traceback": traceback.format_exc()},
            )
            frame = _error_frame(run.id, err)
        else:
            frame = _result_frame(run.id, value, run.ctx)
        if "metadata" not in frame and run.ctx.metadata():
            frame["metadata"] = run.ctx.metadata()
        self._finish(run, frame)

    def _finish(self, run: _Run, frame: dict[str, Any]) -> None:
        """Send the one result of ``run`` (later calls are no-ops)."""
        if run.done:
            return
        run.done = True
        self._runs.pop(run.id, None)
        if not self._runs:
            self._idle.set()
        self._send_result(frame)

    # --- host calls --------------------------------------------------------------------------

    async def host_call(
        self,
        task_id: str,
        method: str,
        params: dict[str, Any],
        deadline_ms: int,
        trace: tuple[str, str | None] | None = None,
    ) -> Any:
        if method not in self.agent.calls:
            raise AgentError(
                codes.PERMISSION_DENIED,
                f"host call {method!r} is not declared in Agent(calls=...): {self.agent.calls}",
            )
        cid = f"a-{next(self._call_ids)}"
        frame: dict[str, Any] = {
            "type": "call",
            "id": cid,
            "method": method,
            "task_id": task_id,
            "params": params,
        }
        wait_s = deadline_ms / 1000 if deadline_ms > 0 else None
        if wait_s is not None:
            frame["deadline_ms"] = int(deadline_ms)
        if trace is not None:  # the host parents the call's span on it (docs/protocol.md)
            frame["traceparent"] = trace[0]
            if trace[1]:
                frame["tracestate"] = trace[1]
        fut: asyncio.Future[dict[str, Any]] = self.loop.create_future()
        self._calls[cid] = fut
        try:
            if not self.send(frame):
                raise AgentError(
                    codes.FRAME_TOO_LARGE, f"the {method} call does not fit in a frame"
                )
            try:
                async with asyncio.timeout(wait_s):
                    reply = await fut
            except TimeoutError:
                self.send({"type": "cancel", "id": cid, "reason": "timeout"})
                raise AgentError(
                    codes.TIMEOUT, f"no reply to {method} in {deadline_ms} ms"
                ) from None
            except asyncio.CancelledError:
                self.send({"type": "cancel", "id": cid, "reason": "task cancelled"})
                raise
        finally:
            self._calls.pop(cid, None)
        if reply.get("status") == "ok":
            return reply.get("result")
        raise AgentError.from_json(reply.get("error") or {"code": codes.INTERNAL})

    # --- shutdown ----------------------------------------------------------------------------

    def _begin_shutdown(self, grace_s: float, reason: str, *, shorten: bool) -> None:
        deadline = time.monotonic() + max(0.0, grace_s)
        if self._shutdown_at is None:
            self._shutdown_at = deadline
            self.loop.create_task(self._drain(reason))
        elif shorten and deadline < self._shutdown_at:
            self._shutdown_at = deadline
            self._wake.set()

    async def _drain(self, reason: str) -> None:
        while self._runs and self._shutdown_at is not None:
            remaining = self._shutdown_at - time.monotonic()
            if remaining <= 0:
                break
            self._wake.clear()
            waiters = [
                self.loop.create_task(self._idle.wait()),
                self.loop.create_task(self._wake.wait()),
            ]
            await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            for waiter in waiters:
                waiter.cancel()
        runs = list(self._runs.values())
        for run in runs:
            run.cancel(codes.CANCELLED, f"the agent is shutting down ({reason})")
        tasks = [r.task for r in runs if r.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=CANCEL_WAIT_S)
        for run in list(self._runs.values()):  # handlers that ignored the cancellation
            err = AgentError(codes.CANCELLED, f"the agent is shutting down ({reason})")
            self._finish(run, _error_frame(run.id, err))
        for hook in self.agent.stop_hooks:
            try:
                await asyncio.wait_for(self._call_hook(hook), CANCEL_WAIT_S)
            except Exception as exc:
                diag(f"on_stop hook failed: {exc!r}")
        self._exit_code = 0
        self._exit.set()

    async def _call_hook(self, hook: Any, *args: Any) -> None:
        result = hook(*args)
        if asyncio.iscoroutine(result):
            await result


def _error_frame(tid: str, err: AgentError) -> dict[str, Any]:
    return {"type": "result", "id": tid, "status": "error", "error": err.to_json()}


def _result_frame(tid: str, value: Any, ctx: TaskContext) -> dict[str, Any]:
    if not isinstance(value, Output):
        return {"type": "result", "id": tid, "status": "ok", "result": value}
    if value.cost is not None or value.model:
        ctx.cost(value.cost or 0.0, value.model)
    frame: dict[str, Any] = {
        "type": "result",
        "id": tid,
        "status": "partial" if value.error is not None else "ok",
        "result": value.data,
    }
    if value.error is not None:
        frame["error"] = value.error.to_json()
    if value.next_actions:
        frame["next_actions"] = [
            a if isinstance(a, dict) else a.to_json() for a in value.next_actions
        ]
    return frame


class _HandlerPool(ThreadPoolExecutor):
    """The threads of sync handlers, knowing which calls still run (cancelled ones too)."""

    def __init__(self, max_workers: int, thread_name_prefix: str) -> None:
        super().__init__(max_workers, thread_name_prefix=thread_name_prefix)
        self.running: set[Future[Any]] = set()

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future = super().submit(fn, *args, **kwargs)
        self.running.add(future)
        future.add_done_callback(self.running.discard)
        return future
