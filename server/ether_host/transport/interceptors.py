"""The two server interceptors: one for logging and error mapping, one for auth.

Both wrap the method handler's behaviour rather than the call, so that code
they run (binding log context, setting the caller's identity) happens in the
task that runs the servicer method.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, NoReturn

import grpc
import structlog

from ether_host.auth import LOCAL, Identity, TokenTable
from ether_host.errors import EtherError
from ether_host.transport.status import internal_status, status_of

log = structlog.get_logger("ether.rpc")

current_identity: ContextVar[Identity] = ContextVar("current_identity", default=LOCAL)

Behavior = Callable[[Any, grpc.aio.ServicerContext], Any]
Decorator = Callable[[Behavior, str, bool], Behavior]

# Health must answer without a token so load balancers and probes work.
OPEN_METHODS_PREFIX = "/grpc.health.v1.Health/"


def _rewrap(
    handler: grpc.RpcMethodHandler, method: str, decorate: Decorator
) -> grpc.RpcMethodHandler:
    kinds = (
        ("unary_unary", grpc.unary_unary_rpc_method_handler, False),
        ("unary_stream", grpc.unary_stream_rpc_method_handler, True),
        ("stream_unary", grpc.stream_unary_rpc_method_handler, False),
        ("stream_stream", grpc.stream_stream_rpc_method_handler, True),
    )
    for attribute, factory, streaming in kinds:
        behavior = getattr(handler, attribute)
        if behavior is not None:
            return factory(
                decorate(behavior, method, streaming),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
    return handler


async def _stream(behavior: Behavior, request: Any, context: grpc.aio.ServicerContext) -> None:
    """Run a response-streaming behaviour, generator or coroutine, in the RPC's own task.

    The wrappers are coroutines that write with ``context.write`` rather than
    async generators: grpc.aio closes a generator handler from another task
    when the client cancels, and a task group (cancel scope) inside the
    servicer then cannot exit - its child tasks would be left running.
    """
    result = behavior(request, context)
    if not inspect.isasyncgen(result):
        await result
        return
    try:
        async for item in result:
            await context.write(item)
    finally:
        await result.aclose()


class _Wrapped:
    """Wrapped handlers by method, made once: the handler a method resolves to never changes,
    and rebuilding the wrapper on every call cost measurable CPU per RPC."""

    def __init__(self) -> None:
        self._by_method: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    def get(
        self, method: str, handler: grpc.RpcMethodHandler, decorate: Decorator
    ) -> grpc.RpcMethodHandler:
        known = self._by_method.get(method)
        if known is not None and known[0] is handler:
            return known[1]
        wrapped = _rewrap(handler, method, decorate)
        self._by_method[method] = (handler, wrapped)
        return wrapped


class RpcInterceptor(grpc.aio.ServerInterceptor):
    """Logs one line per RPC and maps domain errors to statuses."""

    def __init__(self) -> None:
        self._wrapped = _Wrapped()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        return self._wrapped.get(handler_call_details.method, handler, self._decorate)

    def _decorate(self, behavior: Behavior, method: str, streaming: bool) -> Behavior:
        if streaming:

            async def stream_behavior(request: Any, context: grpc.aio.ServicerContext) -> None:
                started = self._begin(method, context)
                try:
                    await _stream(behavior, request, context)
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
            self._end(method, context, started, None)
            return response

        return unary_behavior

    @staticmethod
    def _begin(method: str, context: grpc.aio.ServicerContext) -> float:
        structlog.contextvars.bind_contextvars(rpc=method, peer=context.peer())
        return time.perf_counter()

    @staticmethod
    def _end(
        method: str, context: grpc.aio.ServicerContext, started: float, code: str | None
    ) -> None:
        if code is None:
            code = _code_name(context, "OK")
        # The peer as bound in _begin: context.peer() on a call the client has cancelled
        # reads a released grpc call and crashes the host (SIGSEGV).
        log.info(
            "rpc",
            method=method,
            peer=structlog.contextvars.get_contextvars().get("peer", ""),
            code=code,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )

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
        correlation_id = uuid.uuid4().hex[:12]
        log.error("rpc crashed", method=method, correlation_id=correlation_id, exc_info=error)
        self._end(method, context, started, "INTERNAL")
        await context.abort_with_status(internal_status(correlation_id))


def _code_name(context: grpc.aio.ServicerContext, default: str) -> str:
    """The status code set on the call so far (None before one is set)."""
    found: object = context.code()
    return found.name if isinstance(found, grpc.StatusCode) else default


def _unwrap(error: BaseException) -> BaseException:
    """The one real error inside task-group exception groups, when there is one."""
    while isinstance(error, BaseExceptionGroup):
        leaves = [e for e in error.exceptions if not isinstance(e, asyncio.CancelledError)]
        if len(leaves) != 1:
            return error
        error = leaves[0]
    return error


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Requires a valid bearer token on every method but health."""

    def __init__(self, tokens: TokenTable) -> None:
        self._tokens = tokens
        self._wrapped = _Wrapped()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(OPEN_METHODS_PREFIX):
            return handler
        return self._wrapped.get(handler_call_details.method, handler, self._decorate)

    def _identify(self, context: grpc.aio.ServicerContext) -> Identity | str:
        """The caller's identity, or the reason it has none."""
        values = [v for k, v in context.invocation_metadata() or () if k == "authorization"]
        if not values:
            return "missing bearer token: send the metadata 'authorization: Bearer <token>'"
        scheme, _, token = str(values[0]).partition(" ")
        if scheme.lower() != "bearer" or not token:
            return "malformed authorization metadata: expected 'Bearer <token>'"
        identity = self._tokens.identify(token.strip())
        if identity is None:
            return "invalid bearer token: it matches no token in the host's token file"
        return identity

    def _decorate(self, behavior: Behavior, method: str, streaming: bool) -> Behavior:
        if streaming:

            async def stream_behavior(request: Any, context: grpc.aio.ServicerContext) -> None:
                identity = self._identify(context)
                if isinstance(identity, str):
                    await context.abort(grpc.StatusCode.UNAUTHENTICATED, identity)
                current_identity.set(identity)
                await _stream(behavior, request, context)

            return stream_behavior

        async def unary_behavior(request: Any, context: grpc.aio.ServicerContext) -> Any:
            identity = self._identify(context)
            if isinstance(identity, str):
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, identity)
            assert isinstance(identity, Identity)
            current_identity.set(identity)
            return await behavior(request, context)

        return unary_behavior
