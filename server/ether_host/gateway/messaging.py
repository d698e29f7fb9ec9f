"""Messages between agents by name, and topics.

Every agent has a bounded mailbox (RESOURCE_EXHAUSTED when full: a send
never silently drops). An agent takes messages out with the ``msg.receive``
host call, or the host hands them to its ``on_message`` action one at a time
and in order (the Python SDK's ``ether_agent.gateway.on_message``). A
message handed to a handler that crashes or is not running goes back to the
head of the mailbox and is delivered again (at least once); one taken with
``msg.receive`` is gone from the mailbox (at most once).

Topics need no creation: a message published on one goes to every current
subscriber (client streams, and agents that subscribed with
``msg.subscribe``, into their mailboxes), and the last ones are retained so a
subscriber can resume after a sequence number. A subscriber reads at its own
pace from that retained window; one that falls further behind is told how
many messages it missed.

The sender of a message is always who the transport says: the caller's
identity, or ``agent:<name>`` for an agent's host call.

Mailboxes (the messages not yet delivered), topic histories and agents'
subscriptions are written to the gateway store, so a restarted host
delivers what the last one accepted: a message leaves the store when a
handler has taken it or ``msg.receive`` has returned it, and the next one is
handed over only once that is committed.
"""

from __future__ import annotations

import re
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import anyio
import structlog
from anyio.abc import TaskStatus

from ether_host.agents import ERROR, Dispatcher, TaskInput
from ether_host.background import start_detached
from ether_host.bus import History
from ether_host.errors import (
    EtherError,
    FieldViolation,
    InvalidArgument,
    QuotaViolation,
    ResourceExhausted,
)
from ether_host.gateway.assignment import healthy
from ether_host.gateway.context import json_size
from ether_host.gateway.settings import GatewaySettings
from ether_host.gateway.store import GatewayStore, Saved
from ether_host.reasons import Reason
from ether_host.supervisor import ManagedAgent, Supervisor

log = structlog.get_logger("ether.gateway")

HANDLER_ACTION = "on_message"
TYPE_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,127}$")
TOPIC_PATTERN = re.compile(r"^[a-z0-9._-]{1,128}$")
REDELIVERY_PAUSE = 1.0  # seconds before handing a message back to a handler that failed to take it


@dataclass(frozen=True)
class Message:
    """A message in a mailbox (``agent`` set) or on a topic (``topic`` set)."""

    id: str
    sequence: int
    sender: str
    type: str
    data: Any
    agent: str = ""
    topic: str = ""
    correlation_id: str = ""
    session_id: str = ""
    sent_at: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "sequence": self.sequence,
            "sender": self.sender,
            "agent": self.agent,
            "topic": self.topic,
            "type": self.type,
            "data": self.data,
            "correlation_id": self.correlation_id,
            "session_id": self.session_id,
            "sent_at": self.sent_at,
        }


class SentRequest(NamedTuple):
    """What a SendMessage request_id is remembered by: enough to answer a retry, and never the
    message's data (up to max_message_bytes: 10,000 whole messages could hold gigabytes)."""

    agent: str
    message_id: str
    sequence: int
    sent_at: float
    depth: int


@dataclass(frozen=True)
class SubscriptionLagged:
    """A subscriber fell behind the retained window and missed messages."""

    dropped: int
    first_dropped_sequence: int


class Mailbox:
    """One agent's waiting messages, plus a retained copy of each for observers."""

    def __init__(self, agent: str, retention: int) -> None:
        self.agent = agent
        self.queue: deque[Message] = deque()
        self.copies: History[Message] = History(retention)
        self._wake = anyio.Event()

    def wake(self) -> None:
        self._wake.set()
        self._wake = anyio.Event()

    async def wait(self, at_most: float | None = None) -> None:
        with anyio.move_on_after(at_most):
            await self._wake.wait()


class Topic:
    """A named stream of published messages."""

    def __init__(self, name: str, retention: int) -> None:
        self.name = name
        self.history: History[Message] = History(retention)
        self.readers = 0
        self.agents: set[str] = set()


class Messaging:
    """Mailboxes by agent name, topics by name, and delivery to on_message handlers."""

    def __init__(
        self,
        supervisor: Supervisor,
        dispatcher: Dispatcher,
        settings: GatewaySettings,
        store: GatewayStore,
    ) -> None:
        self.supervisor = supervisor
        self.dispatcher = dispatcher
        self.settings = settings
        self.store = store
        self.mailboxes: dict[str, Mailbox] = {}
        self.topics: dict[str, Topic] = {}
        self._sent: OrderedDict[tuple[str, str], SentRequest] = OrderedDict()
        self._tg: anyio.abc.TaskGroup | None = None
        # Set by the gateway: lets a delivery task on a session use ctx.* (root task id, session id).
        self.authorize: Callable[[str, str], None] = lambda task_id, session_id: None
        self.revoke: Callable[[str, str], None] = lambda task_id, session_id: None

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Own the delivery tasks; wake mailboxes when their agent changes state."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            for box in self.mailboxes.values():
                tg.start_soon(self._deliver, box)
            task_status.started()
            events = self.supervisor.events
            async for _, event in events.follow(events.last_sequence):
                mailbox = self.mailboxes.get(event.agent)
                if mailbox is not None:
                    mailbox.wake()

    def restore(self, saved: Saved) -> None:
        """Take back the mailboxes, topics and subscriptions the last host stored (before
        ``run``, which starts delivery; an agent not deployed yet gets its messages once it is)."""
        for agent, (last, waiting) in saved.mailboxes.items():
            box = self.mailboxes[agent] = Mailbox(agent, self.settings.topic_retention)
            box.queue.extend(Message(**body) for body in waiting)
            box.copies.restore([], max([last] + [m.sequence for m in box.queue]))
        for name, retained in saved.topics.items():
            channel = self.topics[name] = Topic(name, self.settings.topic_retention)
            channel.history.restore([(n, Message(**body)) for n, body in retained], retained[-1][0])
        for name, agent in saved.subscriptions:
            self.topic(name).agents.add(agent)
        for sender, request_id, agent, message_id, sequence, sent_at, depth in saved.sent:
            self._remember(
                sender, request_id, SentRequest(agent, message_id, sequence, sent_at, depth)
            )
        if saved.mailboxes or saved.topics:
            log.info(
                "messages restored",
                waiting=sum(len(box.queue) for box in self.mailboxes.values()),
                topics=len(saved.topics),
            )

    # -- mailboxes -----------------------------------------------------------------------

    def mailbox(self, agent: str) -> Mailbox:
        """The agent's mailbox (NOT_FOUND for an agent that is not deployed)."""
        self.supervisor.get(agent)
        if agent in self.mailboxes:
            return self.mailboxes[agent]
        box = self.mailboxes[agent] = Mailbox(agent, self.settings.topic_retention)
        if self._tg is not None:  # not in the context of the call that made the box first
            start_detached(self._tg, self._deliver, box)
        return box

    def capacity(self, agent: ManagedAgent) -> int:
        configured = agent.spec.config.get("mailbox_size")
        if isinstance(configured, int) and not isinstance(configured, bool) and configured > 0:
            return configured
        return self.settings.mailbox_size

    def send(
        self,
        sender: str,
        agent: str,
        kind: str,
        data: Any,
        *,
        correlation_id: str = "",
        session_id: str = "",
        request_id: str = "",
    ) -> tuple[Message, int]:
        """Put a message in ``agent``'s mailbox; returns it and the mailbox depth after it.

        A ``request_id`` already seen from ``sender`` puts nothing: the answer is the first
        message's (its id, sequence and the depth after it)."""
        target = self.supervisor.get(agent)
        earlier = self._sent.get((sender, request_id)) if request_id else None
        if earlier is not None:
            return self._answer_again(earlier, sender, kind, data, correlation_id, session_id)
        self._check(kind, data)
        box = self.mailbox(agent)
        limit = self.capacity(target)
        if len(box.queue) >= limit:
            # The host's [gateway] mailbox_size, unless the agent's config set its own.
            own = limit != self.settings.mailbox_size or "mailbox_size" in target.spec.config
            raise ResourceExhausted(
                f"the mailbox of {agent} is full ({limit} messages waiting); retry later",
                reason=Reason.MAILBOX_FULL,
                retry_after=1.0,
                resource=("agent", agent),
                metadata={"capacity": str(limit), "limit": str(limit)}
                | ({} if own else {"setting": "mailbox_size"}),
                quota_violations=[
                    QuotaViolation(f"agent:{agent}", f"at most {limit} messages waiting")
                ],
            )
        message = Message(
            _message_id(),
            box.copies.last_sequence + 1,
            sender,
            kind,
            data,
            agent=agent,
            correlation_id=correlation_id,
            session_id=session_id,
            sent_at=time.time(),
        )
        box.copies.append(message)
        box.queue.append(message)
        box.wake()
        outcome = (message, len(box.queue))
        self.store.put_message(
            agent, message.as_json(), (sender, request_id, len(box.queue)) if request_id else None
        )
        if request_id:
            sent = SentRequest(box.agent, message.id, message.sequence, message.sent_at, outcome[1])
            self._remember(sender, request_id, sent)
        return outcome

    def _remember(self, sender: str, request_id: str, sent: SentRequest) -> None:
        """Keep the last ``remembered_request_ids`` (the store keeps as many)."""
        self._sent[(sender, request_id)] = sent
        self._sent.move_to_end((sender, request_id))
        while len(self._sent) > self.settings.remembered_request_ids:
            self._sent.popitem(last=False)

    def _answer_again(
        self,
        sent: SentRequest,
        sender: str,
        kind: str,
        data: Any,
        correlation_id: str,
        session_id: str,
    ) -> tuple[Message, int]:
        """The answer to a retry: the first message while its mailbox still holds a copy;
        after that (or a restart) rebuilt from the retry, which repeats the first request."""
        box = self.mailboxes.get(sent.agent)
        held = box.copies.at(sent.sequence) if box is not None else None
        if held is not None and held.id == sent.message_id:
            return held, sent.depth
        message = Message(
            sent.message_id,
            sent.sequence,
            sender,
            kind,
            data,
            agent=sent.agent,
            correlation_id=correlation_id,
            session_id=session_id,
            sent_at=sent.sent_at,
        )
        return message, sent.depth

    async def receive(self, agent: str, max_count: int, wait: float) -> list[Message]:
        """Take up to ``max_count`` messages, waiting up to ``wait`` seconds for the first."""
        box = self.mailbox(agent)
        with anyio.move_on_after(wait):
            while not box.queue:
                await box.wait()
        taken = [box.queue.popleft() for _ in range(min(max_count, len(box.queue)))]
        self.store.take_messages([m.id for m in taken])
        return taken

    async def _deliver(self, box: Mailbox) -> None:
        """Hand messages to the agent's on_message action, in order, one at a time."""
        while True:
            agent = self.supervisor.agents.get(box.agent)
            if not box.queue or agent is None or not healthy(agent) or not _has_handler(agent):
                await box.wait()
                continue
            message = box.queue.popleft()
            task = TaskInput(
                agent=box.agent,
                action=HANDLER_ACTION,
                params={"message": message.as_json()},
                task_id=f"{message.id}.{secrets.token_hex(2)}",
                session_id=message.session_id,
            )
            if message.session_id:
                self.authorize(task.task_id, message.session_id)
            try:
                result = await self.dispatcher.execute(task)
            except EtherError as error:
                box.queue.appendleft(message)  # not taken: it stays first in line
                log.warning(
                    "message not delivered; will retry",
                    agent=box.agent,
                    message=message.id,
                    error=error.message,
                )
                await box.wait(REDELIVERY_PAUSE)
                continue
            finally:
                if message.session_id:
                    self.revoke(task.task_id, message.session_id)
            # Taken (whatever its handler answered): committed before the next is handed over,
            # so a restart delivers again at most this one, if it came in the very instant.
            self.store.take_messages([message.id])
            try:
                await self.store.durable()
            except EtherError as error:
                log.error("message delivery not recorded", agent=box.agent, error=error.message)
            log.info("message delivered", agent=box.agent, message=message.id)
            if result.status == ERROR and result.error is not None:
                log.warning(
                    "on_message handler failed",
                    agent=box.agent,
                    message=message.id,
                    code=result.error.code,
                    error=result.error.message,
                )

    # -- topics --------------------------------------------------------------------------

    def topic(self, name: str) -> Topic:
        check_topic(name)
        found = self.topics.get(name)
        if found is None:
            found = self.topics[name] = Topic(name, self.settings.topic_retention)
        return found

    def publish(
        self,
        sender: str,
        topic: str,
        kind: str,
        data: Any,
        *,
        correlation_id: str = "",
        session_id: str = "",
    ) -> tuple[Message, int]:
        """Publish to a topic; returns the message and how many subscribers it reached."""
        draft = self.draft(
            sender, topic, kind, data, correlation_id=correlation_id, session_id=session_id
        )
        return self.publish_draft(draft)

    def draft(
        self,
        sender: str,
        topic: str,
        kind: str,
        data: Any,
        *,
        correlation_id: str = "",
        session_id: str = "",
    ) -> Message:
        """A message for a topic, checked, with its id and time but not yet its sequence
        number (which the topic gives it here, and each other host's copy of the topic there)."""
        check_topic(topic)
        self._check(kind, data)
        return Message(
            _message_id(),
            0,
            sender,
            kind,
            data,
            topic=topic,
            correlation_id=correlation_id,
            session_id=session_id,
            sent_at=time.time(),
        )

    def publish_draft(self, draft: Message) -> tuple[Message, int]:
        """Keep ``draft`` as the topic's next message and copy it to the subscribed agents'
        mailboxes; returns it numbered, and how many subscribers of this host it reached. Also
        how a message another host published arrives here."""
        channel = self.topic(draft.topic)
        message = replace(draft, sequence=channel.history.last_sequence + 1, agent="")
        channel.history.append(message)
        self.store.put_topic_message(channel.name, message.as_json())
        reached = channel.readers
        for agent in sorted(channel.agents):
            try:
                self.send(
                    message.sender,
                    agent,
                    message.type,
                    message.data,
                    correlation_id=message.correlation_id,
                    session_id=message.session_id,
                )
            except EtherError as error:
                log.warning(
                    "topic message not copied to an agent's mailbox",
                    topic=channel.name,
                    agent=agent,
                    error=error.message,
                )
            else:
                reached += 1
        return message, reached

    def subscribe_agent(self, agent: str, topic: str, on: bool = True) -> list[str]:
        """Copy a topic's messages into the agent's mailbox (or stop); returns its topics."""
        channel = self.topic(topic)
        self.mailbox(agent)
        if on:
            channel.agents.add(agent)
        else:
            channel.agents.discard(agent)
        self.store.subscription(topic, agent, on)
        return sorted(t.name for t in self.topics.values() if agent in t.agents)

    async def follow(
        self, history: History[Message], after: int | None, until: Callable[[], bool]
    ) -> AsyncIterator[Message | SubscriptionLagged]:
        """Retained messages after ``after`` (None: only new ones), then new ones; gaps as
        SubscriptionLagged."""
        cursor = history.last_sequence if after is None else max(0, after)
        async for sequence, message in history.follow(cursor, until=until):
            if sequence > cursor + 1:
                yield SubscriptionLagged(sequence - cursor - 1, cursor + 1)
            cursor = sequence
            yield message

    async def follow_topic(
        self, topic: str, after: int | None, until: Callable[[], bool]
    ) -> AsyncIterator[Message | SubscriptionLagged]:
        channel = self.topic(topic)
        channel.readers += 1
        try:
            async for item in self.follow(channel.history, after, until):
                yield item
        finally:
            channel.readers -= 1

    def _check(self, kind: str, data: Any) -> None:
        if not TYPE_PATTERN.match(kind):
            raise InvalidArgument(
                f"message type {kind[:64]!r} must be lower_snake: a-z, 0-9 and _, from a letter",
                reason=Reason.INVALID_MESSAGE_TYPE,
                violations=[FieldViolation("type", "lower_snake")],
            )
        size = json_size(data)
        if size > self.settings.max_message_bytes:
            raise ResourceExhausted(
                f"the message is {size} bytes as JSON, over the limit of {self.settings.max_message_bytes}",
                reason=Reason.MESSAGE_TOO_LARGE,
                metadata={"size": str(size), "limit": str(self.settings.max_message_bytes)},
            )


def check_topic(name: str) -> None:
    if not TOPIC_PATTERN.match(name):
        raise InvalidArgument(
            f"topic {name[:64]!r} must be 1-128 characters of a-z 0-9 . _ -",
            reason=Reason.INVALID_TOPIC,
            violations=[FieldViolation("topic", "[a-z0-9._-]{1,128}")],
        )


def _has_handler(agent: ManagedAgent) -> bool:
    return any(a.name == HANDLER_ACTION for a in agent.actions)


def _message_id() -> str:
    return f"msg-{secrets.token_hex(8)}"
