"""Gateway helpers: a session's context and stream, messages between agents, and egress.

Each helper is a thin wrapper over ``TaskContext.host_call``; declare the host calls it
uses in ``Agent(calls=...)`` (the constants below) and grant them in the deployment
(``calls = ["ctx.*", "msg.*", "net.fetch"]`` in agent.toml)::

    from ether_agent import Agent, TaskContext
    from ether_agent.gateway import CTX_CALLS, NET_CALLS, fetch, session

    agent = Agent("concierge", kind="io_gateway", calls=["agent.call", *CTX_CALLS, *NET_CALLS])

    @agent.action(description="Answer one user message.")
    async def respond(message: dict, turn: int, ctx: TaskContext) -> dict:
        s = session(ctx)
        await s.patch({"last_question": message["text"]})
        await s.emit("milestone_report", {"turn": turn})
        page = await fetch(ctx, "https://api.example.com/status")
        return {"text": f"status {page.status}"}

Context writes take ``expected_version`` for compare-and-set; a stale one raises
:class:`VersionConflict` and changes nothing. Messages arrive through ``msg.receive``
(:meth:`Messages.receive`) or, one at a time, in a handler registered with
:func:`on_message`.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import inspect
import json
from collections.abc import Callable
from typing import Any

from ._agent import Agent
from ._context import TaskContext
from ._errors import AgentError

CTX_CALLS = ("ctx.get", "ctx.put", "ctx.patch", "ctx.remove", "ctx.emit", "ctx.reply")
MSG_CALLS = ("msg.send", "msg.publish", "msg.receive", "msg.subscribe", "msg.unsubscribe")
NET_CALLS = ("net.fetch",)
HANDLER_ACTION = "on_message"
VERSION_CONFLICT = "version_conflict"


class VersionConflict(AgentError):
    """A context write named a version that is no longer current; nothing was changed."""


def _raise(error: AgentError) -> None:
    if error.code == VERSION_CONFLICT:
        raise VersionConflict(error.code, error.message, error.data, error.retryable) from None
    raise error


async def _call(ctx: TaskContext, method: str, params: dict[str, Any]) -> Any:
    try:
        return await ctx.host_call(method, params)
    except AgentError as error:
        _raise(error)


# --- the session ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The context (or some keys of it) at a version."""

    context: dict[str, Any]
    version: int


class Session:
    """The session the task runs for: its context, custom events and reply chunks."""

    def __init__(self, ctx: TaskContext) -> None:
        self._ctx = ctx
        self.id = ctx.session_id

    async def get(self, *keys: str) -> Snapshot:
        """The context, or only ``keys`` of it, and its version."""
        reply = await _call(self._ctx, "ctx.get", {"keys": list(keys)})
        return Snapshot(dict(reply.get("context") or {}), int(reply.get("version") or 0))

    async def put(self, key: str, value: Any, *, expected_version: int | None = None) -> int:
        """Set one top-level key; returns the new version."""
        return await self._write("ctx.put", {"key": key, "value": value}, expected_version)

    async def update(self, values: dict[str, Any], *, expected_version: int | None = None) -> int:
        """Set several top-level keys at once; returns the new version."""
        return await self._write("ctx.put", {"values": values}, expected_version)

    async def patch(self, patch: dict[str, Any], *, expected_version: int | None = None) -> int:
        """Apply a JSON merge patch (RFC 7386: objects merge, None removes); returns the version."""
        return await self._write("ctx.patch", {"patch": patch}, expected_version)

    async def remove(self, *keys: str, expected_version: int | None = None) -> int:
        """Remove top-level keys; returns the version."""
        return await self._write("ctx.remove", {"keys": list(keys)}, expected_version)

    async def emit(self, type: str, data: Any = None) -> int:
        """Send a custom event (``emotion_update``, ``scam_warning``...) to the session's client."""
        reply = await _call(self._ctx, "ctx.emit", {"type": type, "data": data})
        return int(reply.get("sequence") or 0)

    async def reply_chunk(self, text: str, data: Any = None) -> int:
        """Stream a piece of the reply now; the task's result is the final reply."""
        reply = await _call(self._ctx, "ctx.reply", {"text": text, "data": data})
        return int(reply.get("sequence") or 0)

    async def _write(self, method: str, params: dict[str, Any], expected: int | None) -> int:
        if expected is not None:
            params["expected_version"] = expected
        reply = await _call(self._ctx, method, params)
        return int(reply.get("version") or 0)


def session(ctx: TaskContext) -> Session:
    """The session of the task (the task must run for one: a turn, or a message about one)."""
    return Session(ctx)


# --- messages ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Message:
    """A message from a mailbox or a topic; ``sender`` is who the host says sent it."""

    id: str
    sequence: int
    sender: str
    type: str
    data: Any = None
    agent: str = ""
    topic: str = ""
    correlation_id: str = ""
    session_id: str = ""
    sent_at: float = 0.0

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Message:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in names})


class Messages:
    """The calling agent's mailbox, other agents' mailboxes and topics."""

    def __init__(self, ctx: TaskContext) -> None:
        self._ctx = ctx

    async def send(
        self,
        agent: str,
        type: str,
        data: Any = None,
        *,
        correlation_id: str = "",
        session_id: str = "",
        request_id: str = "",
    ) -> Message:
        """Put a message in ``agent``'s mailbox (``mailbox_full`` when it is full)."""
        reply = await _call(
            self._ctx,
            "msg.send",
            {
                "agent": agent,
                "type": type,
                "data": data,
                "correlation_id": correlation_id,
                "session_id": session_id,
                "request_id": request_id,
            },
        )
        return Message.from_json(reply["message"])

    async def publish(
        self,
        topic: str,
        type: str,
        data: Any = None,
        *,
        correlation_id: str = "",
        session_id: str = "",
    ) -> Message:
        """Publish on a topic; every current subscriber gets it."""
        reply = await _call(
            self._ctx,
            "msg.publish",
            {
                "topic": topic,
                "type": type,
                "data": data,
                "correlation_id": correlation_id,
                "session_id": session_id,
            },
        )
        return Message.from_json(reply["message"])

    async def receive(self, max_messages: int = 10, wait: float = 0.0) -> list[Message]:
        """Take up to ``max_messages`` from this agent's mailbox, waiting up to ``wait`` seconds."""
        reply = await _call(
            self._ctx, "msg.receive", {"max": max_messages, "wait_ms": int(wait * 1000)}
        )
        return [Message.from_json(m) for m in reply.get("messages") or []]

    async def subscribe(self, topic: str) -> list[str]:
        """Have the topic's messages copied into this agent's mailbox; returns its topics."""
        reply = await _call(self._ctx, "msg.subscribe", {"topic": topic})
        return list(reply.get("topics") or [])

    async def unsubscribe(self, topic: str) -> list[str]:
        reply = await _call(self._ctx, "msg.unsubscribe", {"topic": topic})
        return list(reply.get("topics") or [])


def messages(ctx: TaskContext) -> Messages:
    return Messages(ctx)


MessageHandler = Callable[[Message, TaskContext], Any]


def on_message(agent: Agent) -> Callable[[MessageHandler], MessageHandler]:
    """Register ``fn(message, ctx)`` as the agent's ``on_message`` action: the host hands it
    the mailbox's messages one at a time, in order, again if the agent died before answering
    (at least once). Sync handlers run in a worker thread."""

    def register(fn: MessageHandler) -> MessageHandler:
        async def handle(message: dict[str, Any], ctx: TaskContext) -> Any:
            parsed = Message.from_json(message)
            if inspect.iscoroutinefunction(fn):
                return await fn(parsed, ctx)
            result = await asyncio.to_thread(fn, parsed, ctx)
            if inspect.isawaitable(result):
                result = await result
            return result

        handle.__name__ = HANDLER_ACTION
        agent.add_action(
            handle,
            name=HANDLER_ACTION,
            description="Receives mailbox messages (delivered by the host).",
        )
        return fn

    return register


# --- egress -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Response:
    """What ``net.fetch`` brought back (after redirects)."""

    status: int
    headers: dict[str, str]
    body: bytes
    url: str
    redirects: int = 0
    audit_ids: tuple[int, ...] = ()

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)


async def fetch(
    ctx: TaskContext,
    url: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: str | bytes | None = None,
    timeout: float | None = None,  # noqa: ASYNC109 - sent to the host, which enforces it
    max_bytes: int | None = None,
) -> Response:
    """Fetch ``url`` through the host's egress policy. A refusal raises ``AgentError`` whose
    code is the reason (``host_not_allowed``, ``private_address``, ``rate_limited``...)."""
    params: dict[str, Any] = {"url": url, "method": method, "headers": headers or {}}
    if isinstance(body, bytes):
        params["body_base64"] = base64.b64encode(body).decode()
    elif body is not None:
        params["body"] = body
    if timeout:
        params["timeout_ms"] = int(timeout * 1000)
    if max_bytes:
        params["max_bytes"] = max_bytes
    reply = await _call(ctx, "net.fetch", params)
    raw = (
        reply["text"].encode()
        if "text" in reply
        else base64.b64decode(reply.get("body_base64") or "")
    )
    return Response(
        int(reply["status"]),
        dict(reply.get("headers") or {}),
        raw,
        str(reply.get("url") or url),
        int(reply.get("redirects") or 0),
        tuple(reply.get("audit_ids") or ()),
    )


__all__ = [
    "CTX_CALLS",
    "MSG_CALLS",
    "NET_CALLS",
    "Message",
    "MessageHandler",
    "Messages",
    "Response",
    "Session",
    "Snapshot",
    "VersionConflict",
    "fetch",
    "messages",
    "on_message",
    "session",
]
