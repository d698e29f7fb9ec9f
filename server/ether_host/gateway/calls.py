"""The gateway's host calls: what agents reach through ``call`` frames.

``ctx.get`` ``ctx.put`` ``ctx.patch`` ``ctx.remove`` ``ctx.emit`` ``ctx.reply``
    The session's context and stream. Only tasks the gateway started for the
    session (pipeline steps, the reply, messages about it, and the sub-tasks
    they call) may use them: a session id in a task's input grants nothing.
``msg.send`` ``msg.publish`` ``msg.receive`` ``msg.subscribe`` ``msg.unsubscribe``
    Mailboxes and topics; the sender is ``agent:<caller>``, whatever the
    params say.
``net.fetch``
    HTTP through the egress policy, with an audit record per hop.

Errors are ``reply`` errors whose code is the reason in lower_snake
(``version_conflict``, ``mailbox_full``, ``host_not_allowed``, ...).
"""

from __future__ import annotations

import base64
import binascii
import math
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ether_host.agents import RunningTask
from ether_host.errors import EtherError
from ether_host.gateway import events as ev
from ether_host.gateway.context import MERGE_PATCH, REMOVE, SET, Change
from ether_host.gateway.egress.fetch import FetchRefused, FetchRequest
from ether_host.gateway.messaging import TYPE_PATTERN, Message
from ether_host.gateway.session import Session
from ether_host.link import TaskFailure
from ether_host.telemetry import annotate

if TYPE_CHECKING:
    from ether_host.gateway.usecases import Gateway

MAX_RECEIVE = 100
MAX_WAIT = 3600.0


class HostCalls:
    """Answers ctx.*, msg.* and net.fetch for the dispatcher."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    async def ctx(self, caller: RunningTask, method: str, params: dict[str, Any]) -> Any:
        session_id = caller.task.session_id
        elsewhere = self.gateway.elsewhere
        if (
            elsewhere is not None
            and session_id
            and session_id not in self.gateway.sessions.sessions
        ):
            # A turn of a session another host holds, run by an agent of this host: the call
            # is answered there, where the session's context and stream are.
            root = caller.task.root_task or caller.task.task_id
            try:
                return await elsewhere.session_call(session_id, root, caller.agent, method, params)
            except EtherError as error:
                raise _failure(error) from None
        answer = self._ctx(caller, method, params)
        if method != "ctx.get":
            await self._durable()  # the agent is told only what a restart keeps
        return answer

    async def msg(self, caller: RunningTask, method: str, params: dict[str, Any]) -> Any:
        answer = await self._msg(caller, method, params)
        await self._durable()  # a message sent is kept, one received is gone, across a restart
        return answer

    async def _durable(self) -> None:
        try:
            await self.gateway.durable()
        except EtherError as error:
            raise _failure(error) from None

    def _ctx(self, caller: RunningTask, method: str, params: dict[str, Any]) -> Any:
        session = self._session(caller, method)
        author = f"agent:{caller.agent}"
        expected = params.get("expected_version")
        if expected is not None and (
            not isinstance(expected, int | float) or isinstance(expected, bool)
        ):
            raise TaskFailure("invalid_params", "expected_version must be a version number")
        expected = None if expected is None else int(expected)
        try:
            if method == "ctx.get":
                keys = params.get("keys") or []
                if not isinstance(keys, list):
                    raise TaskFailure("invalid_params", "keys must be a list of top-level keys")
                return {
                    "context": session.context.snapshot([str(k) for k in keys]),
                    "version": session.context.version,
                }
            self._writable(session)
            if method == "ctx.put":
                values = params.get("values")
                if values is None:
                    if not params.get("key"):
                        raise TaskFailure(
                            "invalid_params", "ctx.put needs key and value, or values"
                        )
                    values = {str(params["key"]): params.get("value")}
                return _change(session.context.update(SET, values, author, expected))
            if method == "ctx.patch":
                return _change(
                    session.context.update(MERGE_PATCH, params.get("patch"), author, expected)
                )
            if method == "ctx.remove":
                return _change(session.context.update(REMOVE, params.get("keys"), author, expected))
            if method == "ctx.emit":
                kind = str(params.get("type") or "")
                if not TYPE_PATTERN.match(kind):
                    raise TaskFailure(
                        "invalid_params",
                        "ctx.emit needs a type in lower_snake, such as scam_warning",
                    )
                data = {"type": kind, "data": params.get("data"), "agent": caller.agent}
                return {"sequence": session.emit(ev.CUSTOM, session.current_turn, data)}
            if method == "ctx.reply":
                text = params.get("text")
                if not isinstance(text, str):
                    raise TaskFailure(
                        "invalid_params", "ctx.reply needs text (a chunk of the reply)"
                    )
                data = {
                    "agent": caller.agent,
                    "text": text,
                    "data": params.get("data"),
                    "partial": True,
                }
                return {"sequence": session.emit(ev.REPLY, session.current_turn, data)}
        except EtherError as error:
            raise _failure(error) from None
        raise TaskFailure(
            "method_not_found",
            f"no host call {method!r}; ctx offers get, put, patch, remove, emit and reply",
        )

    async def _msg(self, caller: RunningTask, method: str, params: dict[str, Any]) -> Any:
        messaging = self.gateway.messaging
        sender = f"agent:{caller.agent}"
        try:
            if method == "msg.send":
                message, depth = await self.gateway.send_from(
                    sender,
                    str(params.get("agent") or ""),
                    str(params.get("type") or ""),
                    params.get("data"),
                    correlation_id=str(params.get("correlation_id") or ""),
                    session_id=self._message_session(caller, params),
                    request_id=str(params.get("request_id") or ""),
                )
                return {"message": message.as_json(), "mailbox_depth": depth}
            if method == "msg.publish":
                message, reached = await self.gateway.publish_from(
                    sender,
                    str(params.get("topic") or ""),
                    str(params.get("type") or ""),
                    params.get("data"),
                    correlation_id=str(params.get("correlation_id") or ""),
                    session_id=self._message_session(caller, params),
                )
                return {"message": message.as_json(), "subscribers": reached}
            if method == "msg.receive":
                count = max(1, min(MAX_RECEIVE, int(params.get("max") or 10)))
                wait = min(MAX_WAIT, max(0.0, float(params.get("wait_ms") or 0) / 1000))
                if caller.deadline is not None:
                    wait = min(wait, max(0.0, caller.deadline - time.monotonic()))
                messages: list[Message] = await messaging.receive(caller.agent, count, wait)
                return {"messages": [m.as_json() for m in messages]}
            if method in ("msg.subscribe", "msg.unsubscribe"):
                topics = messaging.subscribe_agent(
                    caller.agent, str(params.get("topic") or ""), on=method == "msg.subscribe"
                )
                return {"topics": topics}
        except EtherError as error:
            raise _failure(error) from None
        except (TypeError, ValueError) as error:
            raise TaskFailure("invalid_params", f"{method}: {error}") from None
        raise TaskFailure(
            "method_not_found",
            f"no host call {method!r}; msg offers send, publish, receive, "
            "subscribe and unsubscribe",
        )

    async def fetch(self, caller: RunningTask, method: str, params: dict[str, Any]) -> Any:
        del method
        body = params.get("body")
        raw = body.encode() if isinstance(body, str) else b""
        if params.get("body_base64"):
            try:
                raw = base64.b64decode(str(params["body_base64"]), validate=True)
            except (binascii.Error, ValueError):
                raise TaskFailure("invalid_params", "body_base64 is not base64") from None
        headers = params.get("headers") or {}
        if not isinstance(headers, dict):
            raise TaskFailure("invalid_params", "headers must be an object of name: value")
        timeout = float(params.get("timeout_ms") or 0) / 1000 or None
        if caller.deadline is not None:
            left = max(0.001, caller.deadline - time.monotonic())
            timeout = left if timeout is None else min(timeout, left)
        request = FetchRequest(
            agent=caller.agent,
            url=str(params.get("url") or ""),
            method=str(params.get("method") or "GET"),
            headers={str(k): str(v) for k, v in headers.items()},
            body=raw,
            timeout=timeout,
            max_bytes=int(params["max_bytes"]) if params.get("max_bytes") else None,
            task_id=caller.task.task_id,
            session_id=caller.task.session_id,
        )
        try:
            response = await self.gateway.egress.fetch(request)
        except FetchRefused as refused:
            annotate({"ether.egress.outcome": "DENIED", "ether.egress.reason": refused.code})
            message = refused.message
            if refused.retry_after is not None and not math.isinf(refused.retry_after):
                message += f" (retry_after_ms={int(refused.retry_after * 1000)})"
            raise TaskFailure(refused.code, message) from None
        # The net.fetch span (agents/calls.py): the request's method, host and answer; never
        # the URL's path or query, which may carry secrets.
        annotate(
            {
                "http.request.method": request.method,
                "server.address": urlsplit(response.url).hostname or "",
                "http.response.status_code": response.status,
                "ether.egress.outcome": "ALLOWED",
            }
        )
        out: dict[str, Any] = {
            "status": response.status,
            "headers": response.headers,
            "url": response.url,
            "redirects": response.redirects,
            "audit_ids": response.audit_ids,
        }
        try:
            out["text"] = response.body.decode("utf-8")
        except UnicodeDecodeError:
            out["body_base64"] = base64.b64encode(response.body).decode()
        return out

    # -- helpers -------------------------------------------------------------------------

    def _session(self, caller: RunningTask, method: str) -> Session:
        session_id = caller.task.session_id
        if not session_id:
            raise TaskFailure(
                "no_session",
                f"{method} needs a task run for a session (a Converse turn, or a "
                "message about a session); this task has none",
            )
        session = self.gateway.sessions.sessions.get(session_id)
        root = caller.task.root_task or caller.task.task_id
        if session is None or root not in session.task_roots:
            raise TaskFailure(
                "session_not_found",
                f"session {session_id[:64]!r} is not open to this task: only "
                "tasks the gateway starts for a session may use ctx.*",
            )
        return session

    @staticmethod
    def _writable(session: Session) -> None:
        if not session.is_open:
            raise TaskFailure(
                "session_closed", f"session {session.id} is closed; its context is read-only"
            )

    def _message_session(self, caller: RunningTask, params: dict[str, Any]) -> str:
        wanted = str(params.get("session_id") or "")
        if wanted and wanted != caller.task.session_id:
            raise TaskFailure(
                "session_not_allowed",
                "a message may only concern the session the calling task runs for",
            )
        return wanted


def _change(change: Change) -> dict[str, Any]:
    return {"version": change.version, "keys": list(change.keys), "changed": bool(change.keys)}


def _failure(error: EtherError) -> TaskFailure:
    return TaskFailure(error.reason.lower(), error.message)
