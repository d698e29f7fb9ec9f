"""What wraps every RPC: authentication and rights, the default deadline, and the server that
applies these wrappers and logging's (rpc_logging.py: the per-RPC line, error mapping, the RPC's
span) once per method.

They wrap the method handler's behaviour rather than the call, so that code
they run (binding log context, setting the caller's identity) happens in the
task that runs the servicer method. They are applied once, when services are
registered (``MethodTableServer``), rather than as grpc.aio interceptors,
whose chain runs as coroutines on every call.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

import grpc
import structlog
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import DecodeError, Message

from ether_host import rights
from ether_host.auth import LOCAL, Identity, TokenTable, bearer_identity, both
from ether_host.errors import DeadlineExceeded, InvalidArgument, Unauthenticated
from ether_host.reasons import Reason
from ether_host.transport import convert, validation
from ether_host.transport.status import status_of

log = structlog.get_logger("ether.rpc")

current_identity: ContextVar[Identity] = ContextVar("current_identity", default=LOCAL)

Behavior = Callable[[Any, grpc.aio.ServicerContext], Any]
Decorator = Callable[[Behavior, str, bool], Behavior]

# Health must answer without a token so load balancers and probes work.
OPEN_METHODS_PREFIX = rights.OPEN_PREFIXES[0]
# The names a verified client certificate carries (grpc's auth context; values are bytes).
CERTIFICATE_NAMES = ("x509_common_name", "x509_subject_alternative_name")


def _rewrap(
    handler: grpc.RpcMethodHandler,
    method: str,
    decorate: Decorator,
    request_deserializer: Callable[[bytes], Any] | None = None,
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
                request_deserializer=request_deserializer or handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
    return handler


class _Rejected:
    """A unary request the host refuses, carried into the method's task and raised there.

    grpc.aio decodes a unary request before the method's task starts, and answers an
    exception of the deserializer UNKNOWN with the exception's class name, unlogged; raised
    in the method's task, the error is logged and mapped like any other.
    """

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


def _checked_requests(handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
    """``handler`` with each request checked as it is decoded: bytes that are not its message
    and a message that breaks the rules of its protos (transport/validation.py) become
    INVALID_ARGUMENT, for every method of every service, before the method runs."""
    deserializer = handler.request_deserializer
    message_type = getattr(deserializer, "__self__", None)  # generated code passes X.FromString
    if deserializer is None or not (
        isinstance(message_type, type) and issubclass(message_type, Message)
    ):
        return handler
    descriptor: Descriptor = message_type.DESCRIPTOR  # type: ignore[assignment] # upb's own class
    check = validation.checker(descriptor)
    streaming = handler.request_streaming

    def decode(data: bytes) -> Any:
        failure: Exception
        try:
            request = deserializer(data)
            if check is not None:
                check(request)
            return request
        except DecodeError as error:
            failure = validation.malformed(descriptor, error)
        except InvalidArgument as error:
            failure = error
        except Exception as error:
            # A fault of the host's own in the check: raised in the method's task it is logged
            # with a correlation id and answered INTERNAL, where grpc would answer UNKNOWN with
            # the exception's text, unlogged.
            failure = error
        if streaming:
            # A streamed request is decoded when the method reads it, in the method's task.
            raise failure
        return _Rejected(failure)

    if streaming:
        return _rewrap(handler, method, _as_is, request_deserializer=decode)
    return _rewrap(handler, method, _raise_rejected, request_deserializer=decode)


def _as_is(behavior: Behavior, method: str, streaming: bool) -> Behavior:
    return behavior


def _raise_rejected(behavior: Behavior, method: str, streaming: bool) -> Behavior:
    if streaming:

        def stream_behavior(request: Any, context: grpc.aio.ServicerContext) -> Any:
            # Returns the behaviour's generator or coroutine as is: _stream runs either.
            if type(request) is _Rejected:
                raise request.error
            return behavior(request, context)

        return stream_behavior

    # A plain function returning the method's coroutine, not a coroutine of its own: one frame
    # less to create and resume on every call. The layers around it await what it returns (and
    # catch what it raises) as they would a coroutine's; _awaitable keeps the outermost async.
    def unary_behavior(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if type(request) is _Rejected:
            raise request.error
        return behavior(request, context)

    return unary_behavior


def _awaitable(behavior: Behavior, method: str, streaming: bool) -> Behavior:
    """The outermost unary behaviour as a coroutine function: grpc.aio runs a plain function in
    a thread pool. The decorators' own are (RpcLogging's always is); this is for a server
    registered without any."""
    if streaming or inspect.iscoroutinefunction(behavior):
        return behavior

    async def unary_behavior(request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await behavior(request, context)

    return unary_behavior


async def run_stream(behavior: Behavior, request: Any, context: grpc.aio.ServicerContext) -> None:
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


class Authenticate:
    """Names the caller of every method but health, from its bearer token, its client
    certificate or both (as configured), and refuses a method whose right (rights.py) the
    caller lacks: UNAUTHENTICATED without a valid credential, PERMISSION_DENIED naming the
    right. Checked before the method runs, so a refused call starts nothing."""

    def __init__(self, tokens: TokenTable, *, token: bool, certificate: bool) -> None:
        self._tokens = tokens
        self._token = token
        self._certificate = certificate

    def _from_token(self, context: grpc.aio.ServicerContext) -> Identity | str:
        values = [str(v) for k, v in context.invocation_metadata() or () if k == "authorization"]
        return bearer_identity(self._tokens, values, "metadata")

    def _from_certificate(self, context: grpc.aio.ServicerContext) -> Identity | str:
        found = context.auth_context()
        # The TLS handshake has verified the chain to client_ca and the validity dates; a
        # caller without a certificate here came over the unix socket, which has no TLS.
        names = [
            value.decode("utf-8", "replace")
            for key in CERTIFICATE_NAMES
            for value in found.get(key, ())
        ]
        if not names:
            return (
                "no client certificate: connect over TLS with a certificate signed by tls.client_ca"
            )
        identity = self._tokens.identify_certificate(names)
        if identity is None:
            return (
                f"client certificate {names[0]!r} maps to no identity: the token file needs a "
                f"line 'NAME cert:{names[0]} [RIGHTS]'"
            )
        return identity

    def _identify(self, context: grpc.aio.ServicerContext) -> Identity | str:
        """The caller's identity, or the reason it has none."""
        by_certificate = self._from_certificate(context) if self._certificate else None
        if isinstance(by_certificate, str):
            return by_certificate
        by_token = self._from_token(context) if self._token else None
        if isinstance(by_token, str):
            return by_token
        if by_token is not None and by_certificate is not None:
            return both(by_token, by_certificate)
        identity = by_token or by_certificate
        assert identity is not None
        return identity

    def _admit(self, context: grpc.aio.ServicerContext, right: str | None, scoped: bool) -> Any:
        """The caller, set for the call; a coroutine to await (the abort) when refused."""
        identity = self._identify(context)
        if isinstance(identity, str):
            refused = Unauthenticated(identity, reason=Reason.INVALID_CREDENTIALS)
            return context.abort_with_status(status_of(refused))
        current_identity.set(identity)
        if right is not None:
            (rights.require_some if scoped else rights.require)(identity, right)
        return None

    def decorate(self, behavior: Behavior, method: str, streaming: bool) -> Behavior:
        if method.startswith(OPEN_METHODS_PREFIX):
            return behavior
        right = rights.right_of(method)
        scoped = method in rights.SCOPED_METHODS
        if streaming:

            async def stream_behavior(request: Any, context: grpc.aio.ServicerContext) -> None:
                refused = self._admit(context, right, scoped)
                if refused is not None:
                    await refused
                await run_stream(behavior, request, context)

            return stream_behavior

        async def unary_behavior(request: Any, context: grpc.aio.ServicerContext) -> Any:
            refused = self._admit(context, right, scoped)
            if refused is not None:
                await refused
            return await behavior(request, context)

        return unary_behavior


class DefaultDeadline:
    """Ends a call with one response that the client gave no deadline DEADLINE_EXCEEDED after
    ``seconds`` (the setting default_deadline), cancelling its work as a client's own deadline
    would. Response streams (WatchEvents, StreamLogs, Attach, Converse, ...) are meant to
    follow for as long as the client reads, so they get none."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def decorate(self, behavior: Behavior, method: str, streaming: bool) -> Behavior:
        if streaming or not self.seconds:
            return behavior
        seconds = self.seconds

        def unary_behavior(request: Any, context: grpc.aio.ServicerContext) -> Any:
            # A call with a deadline of its own gets the method's coroutine as is (no frame of
            # this layer to create and resume on every call); one without runs bounded().
            if convert.rpc_time_left(context.time_remaining()) is not None:
                return behavior(request, context)
            return bounded(request, context)

        async def bounded(request: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                async with asyncio.timeout(seconds) as scope:
                    return await behavior(request, context)
            except TimeoutError:
                if not scope.expired():
                    raise
            raise DeadlineExceeded(
                f"the call set no deadline and ran past the host's default of {seconds:g} s "
                "(default_deadline); set a deadline on the call for longer",
                reason=Reason.DEFAULT_DEADLINE,
                metadata={"setting": "default_deadline", "seconds": f"{seconds:g}"},
            )

        return unary_behavior


class MethodTableServer(grpc.aio.Server):
    """A grpc.aio server on which services register through one table of method handlers,
    each wrapped with ``decorators`` (outermost first) once, at registration.

    Generated ``add_*_to_server`` functions (ours, health, reflection) register every method
    twice: as a generic handler and as a "registered method". grpc.aio 1.85 then waits on one
    request task per registered method for every incoming RPC (an asyncio.wait over ~50 tasks
    here: grpc/grpc#43461), and an interceptor chain runs as coroutines per call. Both costs
    grow the host's CPU per Execute; the table keeps a single generic handler, one dict lookup.
    """

    def __init__(self, server: grpc.aio.Server, decorators: Sequence[Decorator]) -> None:
        self._server = server
        self._decorators = list(reversed(decorators))  # applied innermost first
        self._table: dict[str, grpc.RpcMethodHandler] = {}
        self._lookup = _MethodTable(self._table)
        server.add_generic_rpc_handlers([self._lookup])

    def keep_call_metadata(self) -> None:
        """Have each call's metadata kept for take_call_metadata (a wrapper reads it on every
        call: the RPC's span, for a caller's traceparent)."""
        self._lookup.keeps_metadata = True

    def _wrap(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        # Innermost: a refused request is raised after the token check, inside the logging.
        handler = _checked_requests(handler, method)
        for decorate in self._decorators:
            handler = _rewrap(handler, method, decorate)
        return _rewrap(handler, method, _awaitable)

    def handlers(self) -> Mapping[str, grpc.RpcMethodHandler]:
        """Every registered method's wrapped handler, by full method name (a live view): what
        the web console calls (transport/console_call.py), behind the same decorators."""
        return self._table

    def add_registered_method_handlers(
        self, service_name: str, method_handlers: Mapping[str, grpc.RpcMethodHandler]
    ) -> None:
        for name, handler in method_handlers.items():
            method = f"/{service_name}/{name}"
            self._table[method] = self._wrap(handler, method)

    def add_generic_rpc_handlers(
        self, generic_rpc_handlers: Iterable[grpc.GenericRpcHandler]
    ) -> None:
        # Consulted only for methods the table lacks: services registered without registered
        # method handlers (the table already holds every method of our generated services).
        self._server.add_generic_rpc_handlers(
            [_WrappedGeneric(handler, self._wrap) for handler in generic_rpc_handlers]
        )

    def add_insecure_port(self, address: str) -> int:
        return self._server.add_insecure_port(address)

    def add_secure_port(self, address: str, server_credentials: grpc.ServerCredentials) -> int:
        return self._server.add_secure_port(address, server_credentials)

    async def start(self) -> None:
        await self._server.start()

    async def stop(self, grace: float | None) -> None:
        await self._server.stop(grace)

    async def wait_for_termination(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109 - grpc's signature
        return await self._server.wait_for_termination(timeout)


# The metadata of the call being served, as grpc.aio read it to find the call's handler: it
# runs the lookup (_MethodTable.service) in the call's own task, just before the handler, so a
# context variable set there is the call's alone. `context.invocation_metadata()` builds the
# same tuple again on every read (1.8 µs in-process, one entry): the RPC's span takes this one
# (take_call_metadata). A list, emptied when taken: a task started later from the call's context
# never finds it.
_call_metadata: ContextVar[list[tuple[Any, ...]] | None] = ContextVar(
    "ether_call_metadata", default=None
)


def take_call_metadata(context: grpc.aio.ServicerContext) -> tuple[Any, ...]:
    """The call's invocation metadata: the tuple grpc's handler lookup left, once, else the
    context's own (a call the web console makes, with no lookup by grpc)."""
    kept = _call_metadata.get()
    if kept:
        return kept.pop()
    return tuple(context.invocation_metadata() or ())


class _MethodTable(grpc.GenericRpcHandler):
    def __init__(self, table: dict[str, grpc.RpcMethodHandler]) -> None:
        self._table = table
        self.keeps_metadata = False  # set when a wrapper takes it (tracing on)

    def service(
        self, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        if self.keeps_metadata:
            _call_metadata.set([handler_call_details.invocation_metadata])
        return self._table.get(handler_call_details.method)


class _WrappedGeneric(grpc.GenericRpcHandler):
    """A generic handler whose method handlers come wrapped (once per method)."""

    def __init__(
        self,
        inner: grpc.GenericRpcHandler,
        wrap: Callable[[grpc.RpcMethodHandler, str], grpc.RpcMethodHandler],
    ) -> None:
        self._inner = inner
        self._wrap = wrap
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    def service(
        self, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        handler = self._inner.service(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        known = self._wrapped.get(method)
        if known is None or known[0] is not handler:
            known = (handler, self._wrap(handler, method))
            self._wrapped[method] = known
        return known[1]
