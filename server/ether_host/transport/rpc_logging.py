"""The per-RPC wrapper: one log line per call (method, peer, code, duration), domain errors
mapped to their gRPC status (a crash to INTERNAL with a correlation id in the log), the host's
metrics told each call's end, and, with tracing on, the call's SERVER span. Applied once per
method by interceptors.MethodTableServer, as the other wrappers are.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Callable
from typing import Any, NoReturn

import grpc
import structlog

from ether_host import rights
from ether_host.errors import EtherError
from ether_host.logs import bind_call, joins_traces, log_later
from ether_host.telemetry import Span, Tracing, carrier_of
from ether_host.transport.interceptors import Behavior, run_stream, take_call_metadata
from ether_host.transport.status import internal_status, status_of

log = structlog.get_logger("ether.rpc")


class RpcLogging:
    """Logs one line per RPC and maps domain errors to statuses; with ``rpc_ended`` (the host's
    metrics, when on) also tells it each call's method, code and seconds; with ``tracing`` (when
    on) makes each call's SERVER span (_RpcSpans) in the same wrapper: as a wrapper of its own,
    a span cost every call another coroutine frame and another read of its status."""

    def __init__(
        self,
        rpc_ended: Callable[[str, str, float], None] | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self._rpc_ended = rpc_ended
        self._tracing = tracing
        # The loop the server runs on, looked up once (asyncio's lookup is a getpid(2)).
        self._loop: asyncio.AbstractEventLoop | None = None

    def decorate(self, behavior: Behavior, method: str, streaming: bool) -> Behavior:
        if self._tracing is not None and not method.startswith(rights.OPEN_PREFIXES):
            return self._traced(behavior, method, streaming, _RpcSpans(self._tracing, method))
        if streaming:

            async def stream_behavior(request: Any, context: grpc.aio.ServicerContext) -> None:
                started = self._begin(method, context)
                try:
                    await run_stream(behavior, request, context)
                except BaseException as error:
                    await self._fail(error, method, context, started)
                self._end(method, context, started, None)

            return stream_behavior

        async def unary_behavior(request: Any, context: grpc.aio.ServicerContext) -> Any:
            started = self._begin(method, context)
            try:
                response = await behavior(request, context)
            except BaseException as error:
                await self._fail(error, method, context, started)
            self._end_after_response(method, context, started)
            return response

        return unary_behavior

    def _traced(
        self, behavior: Behavior, method: str, streaming: bool, spans: _RpcSpans
    ) -> Behavior:
        """decorate's wrappers with the call's span around them: current while the method
        runs (the tasks it starts are its children), the call's line told while it runs (the
        line carries its ids). A streaming method is run by _stream, as the untraced wrapper
        runs it, and answers None."""
        run: Behavior = functools.partial(run_stream, behavior) if streaming else behavior

        async def traced(request: Any, context: grpc.aio.ServicerContext) -> Any:
            started = self._begin(method, context)
            span, token = spans.open(context)
            try:
                response = await run(request, context)
            except BaseException as error:
                try:
                    await self._fail(error, method, context, started)
                except BaseException as raised:
                    spans.close(span, token, context, raised)
                    raise
            code = _code_name(context, "OK")
            self._end(method, context, started, code)
            spans.close(span, token, context, None, code)
            return response

        return traced

    @staticmethod
    def _begin(method: str, context: grpc.aio.ServicerContext) -> float:
        # Bound for every line logged while the call runs; the call's own line gets them the
        # same way (logs.bind_call), so it does not repeat them.
        bind_call(method, context.peer())
        return time.perf_counter()

    def _end(
        self, method: str, context: grpc.aio.ServicerContext, started: float, code: str | None
    ) -> None:
        if code is None:
            code = _code_name(context, "OK")
        seconds = time.perf_counter() - started
        # method and peer come from the context bound in _begin (context.peer() on a call the
        # client has cancelled reads a released grpc call and crashes the host: SIGSEGV).
        fields = {"code": code, "duration_ms": round(seconds * 1000, 3)}
        if self._rpc_ended is not None:
            self._rpc_ended(method, code, seconds)
        # Rendered a moment later with the lines of other calls, in this call's context: never
        # before grpc sends the response, and at a fraction of the cost of one line at a time.
        log_later(log.info, "rpc", fields)

    def _end_after_response(
        self, method: str, context: grpc.aio.ServicerContext, started: float
    ) -> None:
        """``_end`` of a unary call that returned, told a turn of the loop later: grpc writes
        the response as the method returns, in this same step of the loop, so the line's fields
        and the metrics stay off the call's latency (the call's duration and code are read
        now; the callback runs in a copy of the call's context, with its bound fields). With
        tracing on, the line takes the RPC span's ids, which only a running span gives: then
        it is told now, as other calls' are."""
        if joins_traces():
            self._end(method, context, started, None)
            return
        seconds = time.perf_counter() - started
        code = _code_name(context, "OK")
        loop = self._loop
        if loop is None or not loop.is_running():  # once per loop, not once per call
            loop = self._loop = asyncio.get_running_loop()
        loop.call_soon(self._ended, method, code, seconds)

    def _ended(self, method: str, code: str, seconds: float) -> None:
        if self._rpc_ended is not None:
            self._rpc_ended(method, code, seconds)
        log_later(log.info, "rpc", {"code": code, "duration_ms": round(seconds * 1000, 3)})

    async def _fail(
        self, error: BaseException, method: str, context: grpc.aio.ServicerContext, started: float
    ) -> NoReturn:
        """Log the ended call, then abort with the mapped status or re-raise."""
        error = _unwrap(error)
        if isinstance(error, EtherError):
            self._end(method, context, started, error.code.value)
            await context.abort_with_status(status_of(error))
        if isinstance(error, grpc.aio.AbortError) or not isinstance(error, Exception):
            # An abort the servicer chose, or a cancellation of the call.
            code = _code_name(context, "CANCELLED")
            self._end(method, context, started, code)
            raise error
        if _client_gone(error):
            # A client that cancels, or whose deadline passes, is normal: not a fault of ours.
            log.debug("rpc ended by the client", method=method, error=type(error).__name__)
            self._end(method, context, started, _code_name(context, "CANCELLED"))
            raise error
        correlation_id = uuid.uuid4().hex[:12]
        log.error("rpc crashed", method=method, correlation_id=correlation_id, exc_info=error)
        self._end(method, context, started, "INTERNAL")
        await context.abort_with_status(internal_status(correlation_id))


class _RpcSpans:
    """The SERVER span of each call of one method (OpenTelemetry's RPC conventions: named
    after the full method, ``rpc.system`` grpc, ``rpc.service``, ``rpc.method``,
    ``rpc.grpc.status_code``). A W3C ``traceparent`` (and ``tracestate``) in the call's metadata
    continues the caller's trace. Made only when tracing is on: off, an RPC pays nothing for
    it. Health checks are not traced: a load balancer probing every second would fill the
    collector with them."""

    def __init__(self, tracing: Tracing, method: str) -> None:
        self._tracing = tracing
        self._name = method.lstrip("/")
        service, _, name = self._name.partition("/")
        self._attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name}

    def open(self, context: grpc.aio.ServicerContext) -> tuple[Span, object]:
        """The call's span, made current, and the token that ends its being current."""
        carrier = carrier_of(take_call_metadata(context))
        return self._tracing.start_server_span(self._name, carrier, self._attributes)

    def close(
        self,
        span: Span,
        token: object,
        context: grpc.aio.ServicerContext,
        raised: BaseException | None,
        code: str | None = None,
    ) -> None:
        """End the span with the call's status: the one set on the call (RpcLogging has set a
        domain error's or a crash's); unset, a cancellation or the client going away."""
        if code is None:
            default = "OK"
            if raised is not None:
                default = "UNKNOWN" if isinstance(raised, Exception) else "CANCELLED"
                default = "CANCELLED" if _client_gone(raised) else default
            code = _code_name(context, default)
        span.set_attribute("rpc.grpc.status_code", _STATUS_NUMBERS[code])
        details = context.details() if code != "OK" else None
        error = None if code == "OK" else (f"{code}: {details}" if details else code)
        self._tracing.end_server_span(span, token, error)


# A status code's number by its name (rpc.grpc.status_code), looked up once, not per call.
_STATUS_NUMBERS = {code.name: code.value[0] for code in grpc.StatusCode}


def _code_name(context: grpc.aio.ServicerContext, default: str) -> str:
    """The status code set on the call so far (None before one is set)."""
    found: object = context.code()
    return found.name if isinstance(found, grpc.StatusCode) else default


def _client_gone(error: BaseException) -> bool:
    """Whether ``error`` says only that the call ended under the servicer.

    A read or write on a call the client has cancelled (or whose deadline or connection has
    gone) raises grpc.aio.InternalError (ExecuteBatchError) rather than CancelledError when it
    races the cancellation, as it does with many streams on one connection; grpc's own handler
    ignores it for a closed call. Task groups wrap it with their children's cancellations.
    """
    if isinstance(error, BaseExceptionGroup):
        leaves = error.exceptions
        return all(
            isinstance(e, asyncio.CancelledError) or _client_gone(e) for e in leaves
        ) and any(not isinstance(e, asyncio.CancelledError) for e in leaves)
    return isinstance(error, grpc.aio.InternalError)


def _unwrap(error: BaseException) -> BaseException:
    """The one real error inside task-group exception groups, when there is one."""
    while isinstance(error, BaseExceptionGroup):
        leaves = [e for e in error.exceptions if not isinstance(e, asyncio.CancelledError)]
        if len(leaves) != 1:
            return error
        error = leaves[0]
    return error
