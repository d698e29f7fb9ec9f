"""TerminalService: decode, call the terminal manager, encode. No business logic here.

In a cluster, a call on another host's terminal goes there through ``terminal_forward.py``
(the manager's placement says where, or why it cannot go).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import grpc
import structlog

from ether.v1 import terminal_pb2, terminal_pb2_grpc
from ether_host.auth import Identity
from ether_host.errors import EtherError, FieldViolation, InvalidArgument
from ether_host.lifecycle import Lifecycle
from ether_host.reasons import Reason
from ether_host.terminals import (
    Attachment,
    CreateSpec,
    ScreenRequest,
    TerminalEvent,
    TerminalInfo,
    TerminalManager,
    WaitFailed,
)
from ether_host.transport import convert
from ether_host.transport.interceptors import current_identity
from ether_host.transport.terminal_forward import Hop, TerminalForwarder, forwarded
from ether_host.transport.terminal_messages import (
    STATE_NAMES,
    attach_item,
    event_message,
    exit_message,
    failure_message,
    input_spec,
    recording_message,
    screen_message,
    seconds,
    terminal_info,
    terminal_message,
    wait_condition,
)

log = structlog.get_logger("ether.rpc")


class TerminalServicer(terminal_pb2_grpc.TerminalServiceServicer):
    """PTY sessions with an emulated screen."""

    def __init__(
        self,
        terminals: TerminalManager,
        lifecycle: Lifecycle,
        forwarder: TerminalForwarder | None = None,
    ) -> None:
        self._terminals = terminals
        self._lifecycle = lifecycle
        self._forwarder = forwarder  # in a cluster: the hop to another host's terminals

    async def _owner(self, terminal_id: str, context: grpc.aio.ServicerContext) -> Hop | None:
        """The hop for a terminal another host owns; None when this host serves the call."""
        owner = await self._terminals.placement.owner_of(terminal_id, forwarded=forwarded(context))
        if owner is None or self._forwarder is None:
            return None
        return self._forwarder.hop(owner, terminal_id, context)

    async def CreateTerminal(
        self, request: terminal_pb2.CreateTerminalRequest, context: grpc.aio.ServicerContext
    ) -> terminal_pb2.CreateTerminalResponse:
        command = request.WhichOneof("command")
        spec = CreateSpec(
            argv=tuple(request.argv.args) if command == "argv" else None,
            command_line=request.command_line,
            env=dict(request.env),
            cwd=request.cwd,
            rows=request.rows,
            cols=request.cols,
            name=request.name,
            owner=request.owner,
            scrollback_lines=request.scrollback_lines,
            term=request.term,
            idle_timeout=seconds(request, "idle_timeout"),
            max_lifetime=seconds(request, "max_lifetime"),
            request_id=request.request_id,
            record=request.record,
        )
        info = await self._terminals.create(_identity(), spec)
        return terminal_pb2.CreateTerminalResponse(terminal=terminal_message(info))

    async def GetTerminal(
        self, request: terminal_pb2.GetTerminalRequest, context: grpc.aio.ServicerContext
    ) -> terminal_pb2.GetTerminalResponse:
        if hop := await self._owner(request.terminal_id, context):
            return await hop.unary(request, terminal_pb2.GetTerminalResponse)
        info = self._terminals.get(_identity(), request.terminal_id)
        return terminal_pb2.GetTerminalResponse(terminal=terminal_message(info))

    async def ListTerminals(
        self, request: terminal_pb2.ListTerminalsRequest, context: grpc.aio.ServicerContext
    ) -> terminal_pb2.ListTerminalsResponse:
        state = STATE_NAMES.get(request.state)
        identity = _identity()
        elsewhere: list[TerminalInfo] | None = None
        unreachable: list[str] = []
        if request.cluster and self._forwarder is not None:
            self._terminals.owner_filter(identity, request.owner)  # refused here, not on each host
            peers = await self._terminals.placement.peers()
            found, unreachable = await self._forwarder.list_terminals(peers, request, context)
            elsewhere = [terminal_info(t) for t in found]
        page = self._terminals.list_page(
            identity,
            request.page_size,
            request.page_token,
            request.owner,
            state,
            elsewhere=elsewhere,
        )
        return terminal_pb2.ListTerminalsResponse(
            terminals=[terminal_message(i) for i in page.items],
            next_page_token=page.next_page_token,
            unreachable_hosts=unreachable,
        )

    async def CloseTerminal(
        self, request: terminal_pb2.CloseTerminalRequest, context: grpc.aio.ServicerContext
    ) -> terminal_pb2.CloseTerminalResponse:
        if hop := await self._owner(request.terminal_id, context):
            return await hop.unary(request, terminal_pb2.CloseTerminalResponse)
        grace = seconds(request, "grace")
        info = await self._terminals.close(_identity(), request.terminal_id, grace)
        return terminal_pb2.CloseTerminalResponse(terminal=terminal_message(info))

    async def WatchTerminals(
        self, request: terminal_pb2.WatchTerminalsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[terminal_pb2.WatchTerminalsResponse]:
        identity = _identity()
        owner = self._terminals.owner_filter(identity, request.owner)  # None: every owner
        history = self._terminals.events
        after = history.last_sequence
        listed = self._terminals.list(identity, request.owner) if request.include_existing else []
        wanted = {i.id for i in listed}
        for info in listed:
            yield event_message(TerminalEvent("created", info))
        # Ends when the host stops: closing every terminal appends their `closed` events,
        # then closes the history, so watchers see them all before the stream ends.
        async for _, event in history.follow(after):
            if owner is not None and event.terminal.owner != owner:
                continue
            if event.kind == "created" and event.terminal.id in wanted:
                continue
            yield event_message(event)

    async def WriteInput(
        self, request: terminal_pb2.WriteInputRequest, context: grpc.aio.ServicerContext
    ) -> terminal_pb2.WriteInputResponse:
        if hop := await self._owner(request.terminal_id, context):
            return await hop.unary(request, terminal_pb2.WriteInputResponse)
        accepted = self._terminals.write(
            _identity(), request.terminal_id, input_spec(request.input, request.HasField("input"))
        )
        return terminal_pb2.WriteInputResponse(
            bytes_queued=accepted.queued,
            bytes_pending=accepted.pending,
            bytes_discarded=accepted.discarded,
        )

    async def ReadScreen(
        self, request: terminal_pb2.ReadScreenRequest, context: grpc.aio.ServicerContext
    ) -> terminal_pb2.ReadScreenResponse:
        if hop := await self._owner(request.terminal_id, context):
            return await hop.unary(request, terminal_pb2.ReadScreenResponse)
        structured = request.format == terminal_pb2.SCREEN_FORMAT_STRUCTURED
        screen_request = ScreenRequest(
            scrollback=request.include_scrollback,
            scrollback_limit=request.scrollback_limit,
            styles=structured and request.include_styles,
            keep_trailing_spaces=request.keep_trailing_spaces,
        )
        view = await self._terminals.read_screen(_identity(), request.terminal_id, screen_request)
        return terminal_pb2.ReadScreenResponse(screen=screen_message(view, structured))

    async def Resize(
        self, request: terminal_pb2.ResizeRequest, context: grpc.aio.ServicerContext
    ) -> terminal_pb2.ResizeResponse:
        if hop := await self._owner(request.terminal_id, context):
            return await hop.unary(request, terminal_pb2.ResizeResponse)
        rows, cols = self._terminals.resize(
            _identity(), request.terminal_id, request.rows, request.cols
        )
        return terminal_pb2.ResizeResponse(rows=rows, cols=cols)

    async def SendSignal(
        self, request: terminal_pb2.SendSignalRequest, context: grpc.aio.ServicerContext
    ) -> terminal_pb2.SendSignalResponse:
        if hop := await self._owner(request.terminal_id, context):
            return await hop.unary(request, terminal_pb2.SendSignalResponse)
        signum, group = self._terminals.send_signal(
            _identity(), request.terminal_id, request.signal, request.foreground
        )
        return terminal_pb2.SendSignalResponse(signal=signum, process_group=group)

    async def SetRecording(
        self, request: terminal_pb2.SetRecordingRequest, context: grpc.aio.ServicerContext
    ) -> terminal_pb2.SetRecordingResponse:
        if hop := await self._owner(request.terminal_id, context):
            return await hop.unary(request, terminal_pb2.SetRecordingResponse)
        info = self._terminals.set_recording(_identity(), request.terminal_id, request.record)
        return terminal_pb2.SetRecordingResponse(recording=recording_message(info))

    async def GetRecording(
        self, request: terminal_pb2.GetRecordingRequest, context: grpc.aio.ServicerContext
    ) -> terminal_pb2.GetRecordingResponse:
        if hop := await self._owner(request.terminal_id, context):
            return await hop.unary(request, terminal_pb2.GetRecordingResponse)
        data, info = await self._terminals.get_recording(
            _identity(), request.terminal_id, request.offset, request.max_bytes
        )
        return terminal_pb2.GetRecordingResponse(
            data=data, offset=request.offset, recording=recording_message(info)
        )

    async def WaitFor(
        self, request: terminal_pb2.WaitForRequest, context: grpc.aio.ServicerContext
    ) -> terminal_pb2.WaitForResponse:
        if hop := await self._owner(request.terminal_id, context):
            return await hop.unary(request, terminal_pb2.WaitForResponse)
        structured = request.screen_format != terminal_pb2.SCREEN_FORMAT_TEXT
        within = seconds(request, "timeout")
        if within is not None and within < 0:
            raise InvalidArgument(
                "timeout is negative",
                reason=Reason.INVALID_TIMEOUT,
                violations=[FieldViolation("timeout", "0 or more")],
            )
        try:
            result = await self._terminals.wait_for(
                _identity(),
                request.terminal_id,
                wait_condition(request),
                within,
                ScreenRequest(),
                time_left=convert.rpc_time_left(context.time_remaining()),
            )
        except WaitFailed as error:
            error.details.append(failure_message(error.failure, structured))
            raise
        response = terminal_pb2.WaitForResponse(
            screen=screen_message(result.screen, structured),
            match=result.match,
            groups=list(result.groups),
            match_start_offset=result.start_offset,
            match_end_offset=result.end_offset,
            output_offset=result.output_offset,
            waited=convert.duration(result.waited),
        )
        if result.exit is not None:
            response.exit_status.CopyFrom(exit_message(result.exit))
        return response

    async def Attach(  # type: ignore[override]
        self,
        request_iterator: AsyncIterator[terminal_pb2.AttachRequest],
        context: grpc.aio.ServicerContext,
    ) -> None:
        # A coroutine writing with context.write, not a generator: grpc.aio closes generator
        # handlers from another task when the client cancels.
        identity = _identity()
        first = None
        async for message in request_iterator:
            first = message
            break
        if first is None or first.WhichOneof("kind") != "start":
            raise InvalidArgument(
                "the first Attach message must be `start`",
                reason=Reason.ATTACH_NOT_STARTED,
                violations=[FieldViolation("start", "required as the first message")],
            )
        start = first.start
        if hop := await self._owner(start.terminal_id, context):
            await hop.forwarder.attach(hop.owner, first, request_iterator, context)
            return
        from_offset = start.from_offset if start.HasField("from_offset") else None
        attachment = self._terminals.attach(
            identity, start.terminal_id, from_offset, start.read_only
        )
        try:
            async with asyncio.TaskGroup() as tasks:
                pump = tasks.create_task(self._pump(identity, request_iterator, attachment))
                await context.write(
                    terminal_pb2.AttachResponse(
                        started=terminal_pb2.AttachStarted(
                            terminal=terminal_message(attachment.session.info()),
                            read_only=attachment.read_only,
                            resumed=attachment.resumed,
                        )
                    )
                )
                async with contextlib.aclosing(attachment.items()) as items:
                    async for item in items:
                        await context.write(attach_item(item))
                pump.cancel()  # the stream is over: stop reading the client's side
        finally:
            attachment.close()

    async def _pump(
        self,
        identity: Identity,
        requests: AsyncIterator[terminal_pb2.AttachRequest],
        attachment: Attachment,
    ) -> None:
        """Input, resizes and signals from the client; an error ends the stream with its status."""
        terminals = self._terminals
        try:
            async for message in requests:
                kind = message.WhichOneof("kind")
                if kind == "input":
                    terminals.attach_input(identity, attachment, input_spec(message.input, True))
                elif kind == "resize":
                    terminals.attach_resize(
                        identity, attachment, message.resize.rows, message.resize.cols
                    )
                elif kind == "signal":
                    terminals.attach_signal(
                        identity, attachment, message.signal.signal, message.signal.foreground
                    )
                else:
                    raise InvalidArgument(
                        "`start` may only be the first Attach message"
                        if kind == "start"
                        else "empty Attach message",
                        reason=Reason.INVALID_ATTACH_MESSAGE,
                        violations=[FieldViolation("kind", "input, resize or signal")],
                    )
        except EtherError as error:
            attachment.fail(error)
        except (grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError):
            pass  # the call is ending


def _identity() -> Identity:
    return current_identity.get()
