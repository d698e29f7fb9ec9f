"""The gateway across hosts (docs/cluster.md, "The gateway across hosts"): messages to an agent
another host runs, topics published on one host reaching subscribers on every other, and
sessions any host answers for.

``ClusterGateway`` is the gateway's ``OtherGateways`` (gateway/elsewhere.py):

- a message for an agent this host does not run goes to a host that does, as a request on that
  host's stream (``gateway_link.py``); that host keeps it in the agent's mailbox, on disk, before
  it answers, so the sender is told only of a message a ``kill -9`` there would not take back;
- a message published here is added to ``ether:topics`` before it is kept here; every host
  follows that stream and keeps the messages of the others in its own copy of each topic,
  numbered there, and copies them to the mailboxes of its agents that subscribed;
- sessions are written to Redis (``gateway_sessions.py``) by the host that holds them; any host
  reads them there, and one asked to change a session brings it over (``bring_session``): it
  claims it, and the host that held it lets it go (``_release_here``); an agent of this host
  running a turn of a session another host holds reaches its context there
  (``session_call``);
- the gateway agents other hosts run are candidates to serve a session (``gateway_agents``).

Built by the composition root only with ``[cluster] redis_url``; it joins after the cluster
directory, with a Redis client of its own (its blocking reads hold connections of the pool).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import orjson
import structlog
from anyio.abc import TaskStatus

from ether_host.agents import RunningTask, TaskInput
from ether_host.cluster.gateway_link import GatewayLink
from ether_host.cluster.gateway_sessions import RedisSessionRecords
from ether_host.cluster.membership import Cluster
from ether_host.cluster.view import RemoteAgent
from ether_host.errors import EtherError, NotFound, Unavailable
from ether_host.gateway import Gateway, GatewayAgentElsewhere, Message, SavedSession
from ether_host.lifecycle import Lifecycle
from ether_host.link import TaskFailure
from ether_host.reasons import Reason

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = structlog.get_logger("ether.cluster")

TOPICS = "ether:topics"
TOPICS_LENGTH = 10_000  # published messages the stream holds for hosts that fall behind
BLOCK_MS = 1000
SEND_TIMEOUT = 30.0  # seconds a SendMessage waits for the agent's host to answer
RELEASE_TIMEOUT = 15.0  # seconds the host that holds a session has to let it go
CTX_TIMEOUT = 30.0  # seconds a ctx.* call waits for the host that holds the session
ACTIONS_TIMEOUT = 10.0  # seconds a turn waits for the schemas of an agent another host runs


def topics_read_key(host: str) -> str:
    """Where a host notes the last entry of ``ether:topics`` it has kept: restarted under the
    same name, it goes on from there."""
    return f"ether:topics:read:{host}"


class ClusterGateway:
    """This host's gateway in the cluster: the gateway's ``OtherGateways``."""

    def __init__(
        self,
        cluster: Cluster,
        gateway: Gateway,
        lifecycle: Lifecycle,
        sessions: RedisSessionRecords,
    ) -> None:
        """``sessions``: the store the gateway writes its sessions to (main.py gives both)."""
        self._cluster = cluster
        self._gateway = gateway
        self._lifecycle = lifecycle
        self._sessions = sessions
        self._host = ""
        self._redis: Redis | None = None
        self._errors: tuple[type[BaseException], ...] = (OSError,)
        self._link: GatewayLink | None = None

    async def join(self) -> None:
        """Connect (after the cluster has joined: the host's name is settled) and take over the
        gateway's ways to the other hosts."""
        from redis.asyncio import Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
        from redis.exceptions import RedisError

        settings = self._cluster.settings
        self._host = settings.host_name
        self._errors = (RedisError, OSError, TimeoutError)
        # Blocking reads (XREAD, BLPOP) wait up to a few seconds: a socket timeout above that.
        self._redis = Redis.from_url(
            settings.redis_url,
            socket_connect_timeout=max(0.5, min(settings.heartbeat, 5.0)),
            socket_timeout=BLOCK_MS / 1000 + 5.0,
            # One retry on a new connection: after Redis restarts, each pooled connection fails
            # its first command, which a caller should not see.
            retry=Retry(NoBackoff(), 1),
        )
        self._link = GatewayLink(
            self._host,
            self._redis,
            self._errors,
            lambda: self._lifecycle.is_stopping,
            {
                "send": self._send_here,
                "release": self._release_here,
                "ctx": self._ctx_here,
                "actions": self._actions_here,
            },
        )
        kept = self._gateway.settings
        self._sessions.event_history = kept.event_history
        self._sessions.retention = kept.retention
        self._sessions.connect(self._redis, self._host, self._errors)
        self._sessions.on_lost = self._lost
        self._gateway.elsewhere = self

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Answer other hosts' requests and follow their published messages until the host
        stops."""
        assert self._link is not None, "join first"
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._link.serve)
            await tg.start(self._follow_topics)
            tg.start_soon(self._sessions.run)
            tg.start_soon(self._watch_for_an_empty_redis)
            task_status.started()
            await self._lifecycle.stopping.wait()
            # The sessions' last writes (turns ended at the stop) go out before the writer ends.
            with anyio.move_on_after(5):
                await self._sessions.durable()
            tg.cancel_scope.cancel()

    async def close(self) -> None:
        self._gateway.elsewhere = None
        if self._redis is not None:
            redis, self._redis = self._redis, None
            await redis.aclose()

    # --- messages by agent name ----------------------------------------------------------------

    async def send_message(
        self,
        sender: str,
        agent: str,
        kind: str,
        data: Any,
        *,
        correlation_id: str,
        session_id: str,
        request_id: str,
    ) -> tuple[Message, int]:
        assert self._link is not None
        # The first host (by name) that can take it: the same one while it lives, so messages
        # from one sender arrive in the order sent.
        hosts = [h for h in (await self._cluster.view()).hosts_of(agent) if not h.local]
        if not hosts:
            raise NotFound(
                f"agent {agent!r} is not deployed on any host of the cluster",
                reason=Reason.AGENT_NOT_FOUND,
                resource=("agent", agent),
            )
        running = [h for h in hosts if h.state == "RUNNING"] or hosts
        value = await self._link.call(
            running[0].host,
            "send",
            {
                "sender": sender,
                "agent": agent,
                "type": kind,
                "data": data,
                "correlation_id": correlation_id,
                "session_id": session_id,
                "request_id": request_id,
            },
            SEND_TIMEOUT,
        )
        return Message(**value["message"]), int(value["depth"])

    async def _send_here(self, payload: dict[str, Any]) -> Any:
        """Another host's SendMessage for an agent this host runs (never sent on again: an
        agent gone from here meanwhile is NOT_FOUND)."""
        message, depth = self._gateway.messaging.send(
            str(payload["sender"]),
            str(payload["agent"]),
            str(payload["type"]),
            payload.get("data"),
            correlation_id=str(payload.get("correlation_id") or ""),
            session_id=str(payload.get("session_id") or ""),
            request_id=str(payload.get("request_id") or ""),
        )
        await self._gateway.store.durable()
        log.info(
            "cluster message kept",
            agent=message.agent,
            message=message.id,
            sender=message.sender,
        )
        return {"message": message.as_json(), "depth": depth}

    # --- topics --------------------------------------------------------------------------------

    async def publish(self, message: Message) -> None:
        assert self._redis is not None
        value = {"origin": self._host, "message": message.as_json()}
        try:
            await self._redis.xadd(
                TOPICS, {"m": orjson.dumps(value)}, maxlen=TOPICS_LENGTH, approximate=True
            )
        except self._errors as error:
            raise Unavailable(
                f"the message was not published: Redis, which carries topics to the other "
                f"hosts, is out of reach ({error}); publish it again",
                reason=Reason.CLUSTER_UNAVAILABLE,
                retry_after=1.0,
            ) from None

    async def _follow_topics(
        self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Keep the messages other hosts publish, in the stream's order. Started once the place
        to read from is known (or Redis did not answer within BLOCK_MS), which is before the
        host serves: a message published once a subscriber here could see it is kept."""
        assert self._redis is not None
        redis = self._redis
        last = ""
        with anyio.move_on_after(BLOCK_MS / 1000):
            last = await self._topics_start(redis)
        task_status.started()
        while not self._lifecycle.is_stopping:
            try:
                if not last:
                    last = await self._topics_start(redis)
                found: Any = await redis.xread({TOPICS: last}, count=256, block=BLOCK_MS)
            except self._errors:
                await anyio.sleep(BLOCK_MS / 1000)
                continue
            for _, entries in found or ():
                for entry_id, fields in entries:
                    last = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
                    value = orjson.loads(fields[b"m"])
                    if value.get("origin") == self._host:
                        continue
                    try:
                        message, reached = self._gateway.messaging.publish_draft(
                            Message(**value["message"])
                        )
                    except EtherError as error:
                        log.warning("cluster: a topic message not kept", error=error.message)
                        continue
                    log.info(
                        "cluster topic message kept",
                        topic=message.topic,
                        message=message.id,
                        origin=value.get("origin"),
                        sequence=message.sequence,
                        reached=reached,
                    )
            if not found:
                continue
            try:
                await self._gateway.store.durable()  # kept here before noted as read
                await redis.set(topics_read_key(self._host), last)
            except EtherError as error:
                log.warning("cluster: topic messages not recorded", error=error.message)
            except self._errors as error:
                log.warning("cluster: could not note the topics read", error=str(error))

    async def _topics_start(self, redis: Redis) -> str:
        """Where this host's name left off in the topics' stream, else its end (from now on);
        "" while Redis is out of reach."""
        try:
            noted: Any = await redis.get(topics_read_key(self._host))
            newest: Any = await redis.xrevrange(TOPICS, count=1)
        except self._errors:
            return ""
        if noted:
            return str(noted.decode())
        if not newest:
            return "0-0"
        found = newest[0][0]
        return found.decode() if isinstance(found, bytes) else str(found)

    # --- sessions ------------------------------------------------------------------------------

    async def gateway_agents(self) -> list[GatewayAgentElsewhere]:
        view = await self._cluster.view()
        found: list[GatewayAgentElsewhere] = []
        token = ""
        while True:
            page = view.list_agents(0, token, kind="io_gateway")
            for agent in page.items:
                if isinstance(agent, RemoteAgent):
                    found.append(
                        GatewayAgentElsewhere(
                            name=agent.name,
                            capabilities=agent.info.capabilities,
                            healthy=any(
                                h.state == "RUNNING" and h.ready_replicas > 0 for h in agent.hosts
                            ),
                            in_flight=sum(h.in_flight + h.queued for h in agent.hosts),
                        )
                    )
            token = page.next_page_token
            if not token:
                return found

    async def saved_session(self, session_id: str) -> SavedSession | None:
        return await self._sessions.load(session_id)

    async def owned_sessions(self, owner: str) -> list[SavedSession]:
        return await self._sessions.owned(owner)

    async def bring_session(self, session_id: str, owner: str) -> SavedSession | None:
        assert self._link is not None
        previous = await self._sessions.claim(session_id, owner)
        if previous is None:
            return None
        if previous and previous != self._host:
            await self._cluster.view()  # the directory read afresh: is that host alive?
            if previous in self._cluster.status().hosts:
                await self._link.call(
                    previous, "release", {"session_id": session_id}, RELEASE_TIMEOUT
                )
            else:
                log.info(
                    "cluster session taken from a host gone", session=session_id, host=previous
                )
        await self._sessions.released(session_id)  # from now on, only this host writes it
        return await self._sessions.load(session_id)

    async def _watch_for_an_empty_redis(self) -> None:
        """Every heartbeat: a Redis that came back empty gets every session held here again."""
        while not self._lifecycle.is_stopping:
            if await self._sessions.emptied():
                held = list(self._gateway.sessions.sessions.values())
                for session in held:
                    self._sessions.save_whole(self._gateway.saved(session))
                try:
                    await self._sessions.durable()
                except EtherError as error:  # gone again: they stay queued until it is back
                    log.warning("cluster sessions not written again yet", error=error.message)
                else:
                    log.warning(
                        "cluster sessions written again: Redis came back empty",
                        sessions=len(held),
                    )
            with anyio.move_on_after(self._cluster.settings.heartbeat):
                await self._lifecycle.stopping.wait()

    def _lost(self, session_id: str) -> None:
        """A session this host still held was taken over (this host was slow to let it go):
        its copy here is let go, its streams told where it went."""
        session = self._gateway.sessions.sessions.get(session_id)
        if session is not None:
            self._gateway.sessions.release(session, "another host")
            self._sessions.forget(session_id)

    async def _release_here(self, payload: dict[str, Any]) -> Any:
        """Another host took over a session this host holds: let it go, its last state
        written before the answer."""
        session = self._gateway.sessions.sessions.get(str(payload["session_id"]))
        if session is None:
            return {"released": False}
        holder = await self._sessions.holder(session.id)
        self._gateway.sessions.release(session, holder or "another host")
        await self._gateway.durable()
        self._sessions.forget(session.id)
        return {"released": True}

    async def session_call(
        self, session_id: str, root_task: str, agent: str, method: str, params: dict[str, Any]
    ) -> Any:
        assert self._link is not None
        holder = await self._sessions.holder(session_id)
        if not holder or holder == self._host:
            raise TaskFailure(
                "session_not_found",
                f"session {session_id[:64]!r} is not open to this task: no host holds it",
            )
        payload = {
            "session_id": session_id,
            "root_task": root_task,
            "agent": agent,
            "method": method,
            "params": params,
        }
        return await self._link.call(holder, "ctx", payload, CTX_TIMEOUT)

    async def _ctx_here(self, payload: dict[str, Any]) -> Any:
        """An agent's ctx.* call from another host, for a session this host holds: answered as
        for the agent's task itself (the root task must be one this session started)."""
        session_id = str(payload["session_id"])
        if session_id not in self._gateway.sessions.sessions:
            raise TaskFailure(
                "session_not_found",
                f"session {session_id[:64]!r} is not open to this task: it moved meanwhile",
            )
        agent = str(payload["agent"])
        task = TaskInput(agent=agent, task_id=str(payload["root_task"]), session_id=session_id)
        caller = RunningTask(task=task, agent=agent)
        return await self._gateway.calls.ctx(caller, str(payload["method"]), payload["params"])

    async def actions_elsewhere(self) -> dict[str, list[str]]:
        return await self._cluster.actions_elsewhere()

    async def actions_of(self, agent: str) -> dict[str, dict[str, Any]]:
        assert self._link is not None
        hosts = [h for h in (await self._cluster.view()).hosts_of(agent) if not h.local]
        running = [h for h in hosts if h.state == "RUNNING"] or hosts
        if not running:
            return {}
        value = await self._link.call(running[0].host, "actions", {"agent": agent}, ACTIONS_TIMEOUT)
        return dict(value)

    async def _actions_here(self, payload: dict[str, Any]) -> Any:
        """The actions of one of this host's agents with their params schemas (the directory
        carries their names only)."""
        found = self._gateway.supervisor.agents.get(str(payload["agent"]))
        return {} if found is None else {a.name: a.params_schema for a in found.actions}
