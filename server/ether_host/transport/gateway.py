"""GatewayService: decode, call the gateway with the caller's identity, encode."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import grpc

from ether.v1 import gateway_pb2, gateway_pb2_grpc
from ether_host.errors import EtherError, FieldViolation, InvalidArgument
from ether_host.gateway import (
    MERGE_PATCH,
    REMOVE,
    REPLACE,
    SET,
    AuditFilter,
    Gateway,
    SubscriptionLagged,
)
from ether_host.reasons import Reason
from ether_host.transport import convert
from ether_host.transport import gateway_convert as gc
from ether_host.transport.interceptors import current_identity

_STATES = {gateway_pb2.SESSION_STATE_OPEN: "OPEN", gateway_pb2.SESSION_STATE_CLOSED: "CLOSED"}
_DECISIONS = {
    gateway_pb2.AUDIT_DECISION_ALLOWED: "ALLOWED",
    gateway_pb2.AUDIT_DECISION_DENIED: "DENIED",
}


class GatewayServicer(gateway_pb2_grpc.GatewayServiceServicer):
    """Sessions, context, messaging and the egress audit log."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway

    # -- sessions ------------------------------------------------------------------------

    async def OpenSession(
        self, request: gateway_pb2.OpenSessionRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> gateway_pb2.OpenSessionResponse:
        session = await self._gateway.open_session(
            current_identity.get(),
            agent=request.agent,
            capability=request.capability,
            pipeline=gc.pipeline_from(request.pipeline) if request.HasField("pipeline") else None,
            context=convert.struct_to_dict(request.context),
            metadata=convert.struct_to_dict(request.metadata),
            idle_timeout=convert.seconds(request.idle_timeout)
            if request.HasField("idle_timeout")
            else None,
            request_id=request.request_id,
            notify=gc.session_notify(request.notify) if request.HasField("notify") else None,
        )
        return gateway_pb2.OpenSessionResponse(session=gc.session(session))

    async def GetSession(
        self, request: gateway_pb2.GetSessionRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> gateway_pb2.GetSessionResponse:
        session = await self._gateway.get_session(current_identity.get(), request.session_id)
        return gateway_pb2.GetSessionResponse(session=gc.session(session))

    async def ListSessions(
        self, request: gateway_pb2.ListSessionsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> gateway_pb2.ListSessionsResponse:
        caller = current_identity.get()
        state = _STATES.get(request.state, "")
        page = await self._gateway.list_sessions(
            caller, state, request.page_size, request.page_token
        )
        return gateway_pb2.ListSessionsResponse(
            sessions=[gc.session(s) for s in page.items], next_page_token=page.next_page_token
        )

    async def CloseSession(
        self, request: gateway_pb2.CloseSessionRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> gateway_pb2.CloseSessionResponse:
        session = await self._gateway.close_session(
            current_identity.get(), request.session_id, request.reason
        )
        return gateway_pb2.CloseSessionResponse(session=gc.session(session))

    # A coroutine writing with context.write, not a generator: it runs a task group, and a
    # generator cannot yield from inside one (grpc.aio may close it from another task).
    async def Converse(  # type: ignore[override]
        self,
        request_iterator: AsyncIterator[gateway_pb2.ConverseRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        requests = aiter(request_iterator)
        try:
            first = await anext(requests)
        except StopAsyncIteration:
            first = gateway_pb2.ConverseRequest()
        if first.WhichOneof("kind") != "start":
            raise InvalidArgument(
                "the first message of Converse must be start {session_id}",
                reason=Reason.START_REQUIRED,
                violations=[FieldViolation("start", "required first")],
            )
        start = first.start
        after = start.after_sequence if start.HasField("after_sequence") else None
        session, cursor = await self._gateway.start_conversation(
            current_identity.get(), start.session_id, after
        )
        state: dict[str, Any] = {"error": None, "closed": False, "target": 0}

        async def read() -> None:
            try:
                async for request in requests:
                    kind = request.WhichOneof("kind")
                    if kind == "start":
                        raise InvalidArgument(
                            "start may only be the first message",
                            reason=Reason.SECOND_START,
                            violations=[FieldViolation("start", "only in the first message")],
                        )
                    if kind != "message":
                        raise InvalidArgument(
                            "a message needs text or data",
                            reason=Reason.EMPTY_MESSAGE,
                            violations=[FieldViolation("message", "required")],
                        )
                    message = request.message
                    self._gateway.submit(
                        session,
                        message.text,
                        convert.struct_to_dict(message.data),
                        message.client_message_id,
                    )
            except EtherError as error:
                state["error"] = error
            finally:
                state["target"] = session.turns
                state["closed"] = True
                session.wake()

        def finished() -> bool:
            if state["error"] is not None:
                return True
            return bool(state["closed"]) and session.completed >= state["target"]

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            async for sequence, event in self._gateway.follow_session(session, cursor, finished):
                await context.write(gc.converse_event(sequence, event))
            ended = finished()  # before the cancel, which ends the reading side too
            tg.cancel_scope.cancel()
        if state["error"] is not None:
            raise state["error"]
        self._gateway.check_interrupted(session, ended)

    # -- context -------------------------------------------------------------------------

    async def GetContext(
        self, request: gateway_pb2.GetContextRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> gateway_pb2.GetContextResponse:
        session, document = await self._gateway.get_context(
            current_identity.get(), request.session_id, list(request.keys)
        )
        return gateway_pb2.GetContextResponse(
            context=convert.dict_to_struct(document),
            version=session.context.version,
            updated_at=convert.timestamp(session.context.updated_at),
        )

    async def UpdateContext(
        self, request: gateway_pb2.UpdateContextRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> gateway_pb2.UpdateContextResponse:
        kind = request.WhichOneof("update")
        value: Any
        if kind == "set":
            value, op = convert.struct_to_dict(request.set), SET
        elif kind == "merge_patch":
            value, op = convert.struct_to_dict(request.merge_patch), MERGE_PATCH
        elif kind == "remove":
            value, op = list(request.remove.keys), REMOVE
        elif kind == "replace":
            value, op = convert.struct_to_dict(request.replace), REPLACE
        else:
            raise InvalidArgument(
                "no update: set one of set, merge_patch, remove or replace",
                reason=Reason.MISSING_UPDATE,
                violations=[FieldViolation("update", "required")],
            )
        expected = request.expected_version if request.HasField("expected_version") else None
        change = await self._gateway.update_context(
            current_identity.get(), request.session_id, op, value, expected
        )
        return gateway_pb2.UpdateContextResponse(change=gc.change(change))

    async def WatchContext(
        self, request: gateway_pb2.WatchContextRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[gateway_pb2.WatchContextResponse]:
        after = request.after_version if request.HasField("after_version") else None
        async for kind, item in self._gateway.watch_context(
            current_identity.get(), request.session_id, after
        ):
            yield gc.context_event(kind, item)

    # -- messaging -----------------------------------------------------------------------

    async def SendMessage(
        self, request: gateway_pb2.SendMessageRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> gateway_pb2.SendMessageResponse:
        message, depth = await self._gateway.send_message(
            current_identity.get(),
            request.agent,
            request.type,
            convert.value_to_python(request.data) if request.HasField("data") else None,
            correlation_id=request.correlation_id,
            session_id=request.session_id,
            request_id=request.request_id,
        )
        return gateway_pb2.SendMessageResponse(message=gc.message(message), mailbox_depth=depth)

    async def Subscribe(
        self, request: gateway_pb2.SubscribeRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[gateway_pb2.SubscribeResponse]:
        source = request.WhichOneof("source")
        if source is None:
            raise InvalidArgument(
                "name what to subscribe to: agent or topic",
                reason=Reason.NO_SOURCE,
                violations=[FieldViolation("source", "agent or topic")],
            )
        after = request.after_sequence if request.HasField("after_sequence") else None
        stream = self._gateway.subscribe(
            current_identity.get(), agent=request.agent, topic=request.topic, after=after
        )
        async for item in stream:
            if isinstance(item, SubscriptionLagged):
                yield gateway_pb2.SubscribeResponse(
                    lagged=gateway_pb2.SubscriptionLagged(
                        dropped=item.dropped, first_dropped_sequence=item.first_dropped_sequence
                    )
                )
            else:
                yield gateway_pb2.SubscribeResponse(message=gc.message(item))

    async def Publish(
        self, request: gateway_pb2.PublishRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> gateway_pb2.PublishResponse:
        message, reached = await self._gateway.publish(
            current_identity.get(),
            request.topic,
            request.type,
            convert.value_to_python(request.data) if request.HasField("data") else None,
            correlation_id=request.correlation_id,
            session_id=request.session_id,
        )
        return gateway_pb2.PublishResponse(message=gc.message(message), subscribers=reached)

    # -- audit ---------------------------------------------------------------------------

    async def ListAudit(
        self, request: gateway_pb2.ListAuditRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> gateway_pb2.ListAuditResponse:
        where = AuditFilter(
            agent=request.agent,
            decision=_DECISIONS.get(request.decision, ""),
            host=request.host,
            start_time=gc.epoch(request.start_time) if request.HasField("start_time") else None,
            end_time=gc.epoch(request.end_time) if request.HasField("end_time") else None,
        )
        records, token = await self._gateway.list_audit(
            current_identity.get(), where, request.page_size, request.page_token
        )
        return gateway_pb2.ListAuditResponse(
            records=[gc.audit_record(r) for r in records], next_page_token=token
        )

    async def WatchAudit(
        self, request: gateway_pb2.WatchAuditRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[gateway_pb2.WatchAuditResponse]:
        where = AuditFilter(
            agent=request.agent, decision=_DECISIONS.get(request.decision, ""), host=request.host
        )
        after = request.after_id if request.HasField("after_id") else None
        async for record in self._gateway.watch_audit(current_identity.get(), where, after):
            yield gateway_pb2.WatchAuditResponse(record=gc.audit_record(record))
