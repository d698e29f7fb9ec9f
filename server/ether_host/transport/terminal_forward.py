"""Calls forwarded to another host of the cluster over gRPC: a terminal's calls, and
WatchEvents of an agent other hosts run (``PeerChannels.forward_events``).

In a cluster a terminal stays on the host that owns its PTY and its id names that host
(terminals/placement.py decides where a call goes). This is the hop itself, a gRPC client of
the owner's TerminalService at its advertised address: the request as the caller sent it, the
caller's metadata as given (its token: a cluster with auth shares its tokens) plus
``ether-forwarded-from``, so the owner never forwards it again, and the caller's deadline. The
owner's answer comes back as it is, its status and google.rpc details included; an owner that
does not answer is UNAVAILABLE naming it. Attach is forwarded both ways until either side ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

import grpc
import structlog
from google.protobuf.message import Message

from ether.v1 import supervisor_pb2, supervisor_pb2_grpc, terminal_pb2, terminal_pb2_grpc
from ether_host.errors import Unavailable
from ether_host.reasons import Reason
from ether_host.terminals import OwnerHost, host_unavailable
from ether_host.transport.limits import MAX_MESSAGE_BYTES
from ether_host.transport.listen import ListenError

log = structlog.get_logger("ether.rpc")

FORWARDED_FROM = "ether-forwarded-from"
_DETAILS = "grpc-status-details-bin"
# Set by gRPC itself for each call; never copied from the caller's call to the owner's.
_TRANSPORT_KEYS = {"content-type", "user-agent", "te", "host", "grpc-timeout", "grpc-encoding"}
_LIST_PAGE = 1000  # the largest page ListTerminals serves


def forward_credentials(ca_file: str, *, serves_tls: bool) -> grpc.ChannelCredentials | None:
    """How this host dials the others: TLS verified against ``ca_file`` ([cluster] tls_ca);
    TLS against the system's roots when this host serves TLS itself without one (its peers
    then do too); else plaintext. An unreadable file stops the start with one line."""
    if ca_file:
        try:
            roots = Path(ca_file).read_bytes()
        except OSError as error:
            raise ListenError(f"cluster_tls_ca: cannot read {ca_file}: {error.strerror}") from None
        if b"-----BEGIN " not in roots:
            raise ListenError(f"cluster_tls_ca: {ca_file} is not PEM (expected '-----BEGIN ...')")
        return grpc.ssl_channel_credentials(root_certificates=roots)
    return grpc.ssl_channel_credentials() if serves_tls else None


def forwarded(context: grpc.aio.ServicerContext) -> bool:
    """Whether this call was forwarded here by another host."""
    return any(key == FORWARDED_FROM for key, _ in context.invocation_metadata() or ())


class PeerChannels:
    """The gRPC client of the other hosts: one channel per address, opened at its first call,
    closed at stop; a forwarded call carries the caller's metadata and says where it came
    from. The terminal calls use it (TerminalForwarder), and WatchEvents (forward_events)."""

    def __init__(
        self, host_name: Callable[[], str], credentials: grpc.ChannelCredentials | None = None
    ) -> None:
        self._host_name = host_name  # known once the cluster has resolved it at join
        self._credentials = credentials  # None: plaintext (forward_credentials)
        self._channels: dict[str, grpc.aio.Channel] = {}

    def channel(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            options = [
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ]
            channel = (
                grpc.aio.insecure_channel(address, options=options)
                if self._credentials is None
                else grpc.aio.secure_channel(address, self._credentials, options=options)
            )
            self._channels[address] = channel
        return channel

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()

    def _metadata(self, context: grpc.aio.ServicerContext) -> list[tuple[str, str | bytes]]:
        given = [
            (key, value)
            for key, value in context.invocation_metadata() or ()
            if not key.startswith((":", "grpc-")) and key not in _TRANSPORT_KEYS
        ]
        return [*given, (FORWARDED_FROM, self._host_name())]

    async def forward_events(
        self,
        host: str,
        address: str,
        request: supervisor_pb2.WatchEventsRequest,
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[supervisor_pb2.WatchEventsResponse]:
        """WatchEvents on another host (docs/cluster.md, "Events across hosts"), its events
        as it sends them; its status is the caller's, and a host that does not answer is
        UNAVAILABLE naming it."""
        stub = supervisor_pb2_grpc.SupervisorServiceStub(self.channel(address))
        call = stub.WatchEvents(
            request, metadata=tuple(self._metadata(context)), timeout=context.time_remaining()
        )
        try:
            async for event in call:
                yield event
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.UNAVAILABLE and not _has_details(error):
                raise Unavailable(
                    f"host {host} does not answer at its advertised address {address}: "
                    f"{error.details()}",
                    reason=Reason.HOST_UNAVAILABLE,
                    metadata={"host": host},
                    resource=("host", host),
                ) from None
            await _abort_as(error, context)
        finally:
            call.cancel()


class TerminalForwarder(PeerChannels):
    """The terminal calls on another host's terminal."""

    def _stub(self, address: str) -> terminal_pb2_grpc.TerminalServiceStub:
        return terminal_pb2_grpc.TerminalServiceStub(self.channel(address))

    def hop(self, owner: OwnerHost, terminal_id: str, context: grpc.aio.ServicerContext) -> Hop:
        return Hop(self, owner, terminal_id, context)

    async def attach(
        self,
        owner: OwnerHost,
        first: terminal_pb2.AttachRequest,
        requests: AsyncIterator[terminal_pb2.AttachRequest],
        context: grpc.aio.ServicerContext,
    ) -> None:
        """Attach on the owner: the client's messages (input, resize, signal) go there as they
        come, the owner's (started, snapshot, output, lagged, exit) come back in order. Ends
        when the owner ends the stream (its status is the caller's) or the caller goes away
        (the owner's call is cancelled, which detaches there)."""
        stub = self._stub(owner.address)
        call = stub.Attach(
            metadata=tuple(self._metadata(context)), timeout=context.time_remaining()
        )  # type: ignore[call-arg] # grpc's stubs say a request iterator is required
        up = asyncio.create_task(_upstream(first, requests, call))
        down = asyncio.create_task(_downstream(call, context))
        try:
            pending: set[asyncio.Task[None]] = {up, down}
            while down in pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                refused = up.exception() if up in done else None
                if refused is not None:  # a message of the caller's broke the rules
                    raise refused
            try:
                down.result()
            except grpc.aio.AioRpcError as error:
                await _answer_as_owner(owner, first.start.terminal_id, error, context)
        finally:
            up.cancel()
            down.cancel()
            call.cancel()  # the owner detaches this client
            await asyncio.gather(up, down, return_exceptions=True)

    async def list_terminals(
        self,
        peers: dict[str, str],
        request: terminal_pb2.ListTerminalsRequest,
        context: grpc.aio.ServicerContext,
    ) -> tuple[list[terminal_pb2.Terminal], list[str]]:
        """Every terminal the other hosts list for the caller (with the request's filters),
        and the hosts that did not answer."""
        names = sorted(peers)
        answers = await asyncio.gather(
            *(self._list_one(name, peers[name], request, context) for name in names)
        )
        found = [t for terminals in answers if terminals is not None for t in terminals]
        unreachable = [name for name, got in zip(names, answers, strict=True) if got is None]
        return found, unreachable

    async def _list_one(
        self,
        name: str,
        address: str,
        request: terminal_pb2.ListTerminalsRequest,
        context: grpc.aio.ServicerContext,
    ) -> Sequence[terminal_pb2.Terminal] | None:
        # grpc's stubs type a unary call as returning the response, grpc.aio's awaits it.
        list_terminals = cast(
            Callable[..., Awaitable[terminal_pb2.ListTerminalsResponse]],
            self._stub(address).ListTerminals,
        )
        found: list[terminal_pb2.Terminal] = []
        token = ""
        try:
            while True:
                page = await list_terminals(
                    terminal_pb2.ListTerminalsRequest(
                        page_size=_LIST_PAGE,
                        page_token=token,
                        owner=request.owner,
                        state=request.state,
                    ),
                    metadata=tuple(self._metadata(context)),
                    timeout=context.time_remaining(),
                )
                found.extend(page.terminals)
                token = page.next_page_token
                if not token:
                    return found
        except grpc.aio.AioRpcError as error:
            log.warning(
                "cluster: a host did not list its terminals",
                host=name,
                address=address,
                code=error.code().name,
                error=error.details(),
            )
            return None


R = TypeVar("R", bound=Message)


class Hop:
    """One unary call on another host's terminal, on behalf of the caller of ``context``."""

    def __init__(
        self,
        forwarder: TerminalForwarder,
        owner: OwnerHost,
        terminal_id: str,
        context: grpc.aio.ServicerContext,
    ) -> None:
        self.forwarder, self.owner, self.terminal_id = forwarder, owner, terminal_id
        self.context = context

    async def unary(self, request: Message, answer: type[R]) -> R:
        """The owner's answer to ``request`` (``XRequest`` is sent to its method ``X``), or
        its error as the caller's."""
        method = type(request).__name__.removesuffix("Request")
        stub = self.forwarder._stub(self.owner.address)
        call: Callable[..., Awaitable[Message]] = getattr(stub, method)
        context = self.context
        try:
            response = await call(
                request,
                metadata=tuple(self.forwarder._metadata(context)),
                timeout=context.time_remaining(),
            )
        except grpc.aio.AioRpcError as error:
            await _answer_as_owner(self.owner, self.terminal_id, error, context)
            raise  # not reached: the above raises
        assert isinstance(response, answer)
        return response


async def _upstream(
    first: terminal_pb2.AttachRequest,
    requests: AsyncIterator[terminal_pb2.AttachRequest],
    call: Any,
) -> None:
    """The caller's side of a forwarded Attach, message by message; its end ends the owner's
    input side (output goes on, as on one host). A message that breaks the rules raises its
    InvalidArgument, which ends the stream."""
    try:
        await call.write(first)
        async for message in requests:
            await call.write(message)
        await call.done_writing()
    except (grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError):
        pass  # the call is ending; its status comes from the owner's side


async def _downstream(call: Any, context: grpc.aio.ServicerContext) -> None:
    """The owner's side, written to the caller one message at a time (flow control: the next
    is read only once the caller's window took the previous one)."""
    async for response in call:
        await context.write(response)


async def _answer_as_owner(
    owner: OwnerHost,
    terminal_id: str,
    error: grpc.aio.AioRpcError,
    context: grpc.aio.ServicerContext,
) -> None:
    """End the caller's call with the owner's status, details and all; an owner that did not
    answer (no status of its own) is UNAVAILABLE naming it."""
    if error.code() == grpc.StatusCode.UNAVAILABLE and not _has_details(error):
        raise host_unavailable(
            terminal_id,
            owner,
            f"does not answer at its advertised address ({error.details()})",
        ) from None
    await _abort_as(error, context)


def _trailing(error: grpc.aio.AioRpcError) -> list[tuple[str, str | bytes]]:
    return [
        (key, value)
        for key, value in error.trailing_metadata() or ()
        if not key.startswith(":") and (key == _DETAILS or not key.startswith("grpc-"))
    ]


def _has_details(error: grpc.aio.AioRpcError) -> bool:
    """Whether the other host answered with a status of its own (google.rpc details): not
    the channel's UNAVAILABLE for a host that is not there."""
    return any(key == _DETAILS for key, _ in _trailing(error))


async def _abort_as(error: grpc.aio.AioRpcError, context: grpc.aio.ServicerContext) -> None:
    """End the caller's call with the other host's status, its details included."""
    await context.abort(
        error.code(), error.details() or "", trailing_metadata=tuple(_trailing(error))
    )
