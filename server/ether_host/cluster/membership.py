"""This host's membership of the cluster: it claims its name, publishes its entry at every
heartbeat and at every change of its agents, reads the other hosts' entries, and goes on
serving its own agents, degraded, while Redis cannot be reached.

redis-py (its asyncio client) is imported when a host joins, so a host without ``[cluster]``
loads none of it.
"""

from __future__ import annotations

import math
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import structlog
from anyio.abc import TaskStatus

from ether_host.agents import Dispatcher, TaskEvent, TaskInput, TaskResult
from ether_host.cluster.backlog import StreamBacklog, read_backlog
from ether_host.cluster.reachability import Reachability, unreachable_notes
from ether_host.cluster.records import HOSTS_KEY, HostEntry, PublishedAgent, host_key
from ether_host.cluster.remote import BLOCK_MS, RemoteTasks
from ether_host.cluster.result_cache import RedisResultCache
from ether_host.cluster.view import ClusterView
from ether_host.config import ConfigError, userinfo_hidden
from ether_host.errors import NotFound
from ether_host.lifecycle import Lifecycle
from ether_host.reasons import Reason
from ether_host.supervisor import Supervisor
from ether_host.terminals import HostWhereabouts

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = structlog.get_logger("ether.cluster")

_WILDCARDS = {"", "0.0.0.0", "::", "[::]"}


class ClusterError(Exception):
    """The host cannot join its cluster (Redis out of reach, its name taken). The CLI prints it
    and exits 1."""


def _said(error: BaseException) -> str:
    """An exception as one line: its message, or its type when it has none (a timeout)."""
    return str(error) or type(error).__name__


@dataclass(frozen=True)
class ClusterSettings:
    """``[cluster]`` with its defaults resolved against the address the host bound."""

    redis_url: str
    host_name: str
    advertise: str
    heartbeat: float
    dropout: float
    # A task pending this long on a host gone from the directory is claimed by a live one.
    claim_idle: float = 5.0

    @classmethod
    def resolve(
        cls,
        *,
        redis_url: str,
        host_name: str,
        advertise: str,
        heartbeat: float,
        dropout: float,
        bound: str,
        claim_idle: float = 5.0,
    ) -> ClusterSettings:
        """``bound``: the TCP address the host listens on as bound (``127.0.0.1:43123``), or
        '' without TCP. A bad combination is a ConfigError naming the key."""
        if heartbeat <= 0:
            raise ConfigError("cluster_heartbeat: must be more than 0 seconds")
        if dropout <= heartbeat:
            raise ConfigError(
                f"cluster_dropout: {dropout:g} s must be longer than cluster_heartbeat "
                f"({heartbeat:g} s), or a live host would drop out between two heartbeats"
            )
        bound_host, _, bound_port = bound.rpartition(":")
        if not advertise:
            if not bound or bound_host in _WILDCARDS:
                raise ConfigError(
                    "cluster_advertise: set the gRPC address other hosts reach this one at "
                    f"(HOST:PORT): the listen address {bound or '(none)'!r} does not say it"
                )
            advertise = bound
        if not host_name:
            port = bound_port or advertise.rpartition(":")[2]
            host_name = f"{socket.gethostname()}:{port}"
        if claim_idle <= 0:
            raise ConfigError("cluster_claim_idle: must be more than 0 seconds")
        return cls(redis_url, host_name, advertise, heartbeat, dropout, claim_idle)


@dataclass(frozen=True)
class ClusterStatus:
    """What health and ``ether status`` say about the cluster."""

    host_name: str
    advertise: str
    redis: str  # the URL without its password
    degraded: str  # why this host is cut off from the cluster; '' when it is not
    hosts: tuple[str, ...]  # the live hosts this one knows of, itself included
    # Hosts this one cannot reach at their advertised address, and who cannot reach this one.
    unreachable: tuple[str, ...] = ()


class Cluster:
    """This host in the cluster directory (docs/cluster.md)."""

    def __init__(
        self,
        settings: ClusterSettings,
        supervisor: Supervisor,
        lifecycle: Lifecycle,
        dispatcher: Dispatcher,
    ) -> None:
        """``settings`` as configured; ``join`` resolves their defaults once the host is bound."""
        self.settings = settings
        self._supervisor = supervisor
        self._lifecycle = lifecycle
        self._dispatcher = dispatcher
        self._remote: RemoteTasks | None = None
        self._instance = secrets.token_hex(8)
        self._redis: Redis | None = None
        self._errors: tuple[type[BaseException], ...] = (OSError,)
        self._degraded = ""
        self._peers: list[HostEntry] = []
        self._peers_read_at = 0.0
        # Hosts seen leaving the directory, by name, with their last address: a terminal id
        # naming one is UNAVAILABLE (its host went), not NOT_FOUND (no such host).
        self._departed: dict[str, str] = {}
        self._shape: list[tuple[str, str, int, int]] | None = None
        self._changed = anyio.Event()
        self._reach = Reachability(timeout=max(1.0, min(settings.heartbeat, 3.0)))
        # A call to Redis waits at most this long: a heartbeat is never later than one period.
        self._timeout = max(0.5, min(settings.heartbeat, 5.0))

    @property
    def _url(self) -> str:
        return userinfo_hidden(self.settings.redis_url)

    async def join(self, bound: str) -> None:
        """Reach Redis and claim this host's name; ClusterError when either fails, ConfigError
        when the settings lack what ``bound`` (the TCP address as bound, '' without TCP) cannot
        give."""
        asked = self.settings
        self.settings = ClusterSettings.resolve(
            redis_url=asked.redis_url,
            host_name=asked.host_name,
            advertise=asked.advertise,
            heartbeat=asked.heartbeat,
            dropout=asked.dropout,
            bound=bound,
            claim_idle=asked.claim_idle,
        )
        self._timeout = max(0.5, min(self.settings.heartbeat, 5.0))
        from redis.asyncio import Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
        from redis.exceptions import RedisError

        self._errors = (RedisError, OSError, TimeoutError)
        # No retries inside redis-py: the heartbeat is the retry, and a call must not outlast it.
        self._redis = Redis.from_url(
            self.settings.redis_url,
            socket_connect_timeout=self._timeout,
            socket_timeout=self._timeout,
            retry=Retry(NoBackoff(), 0),
        )
        name, key = self.settings.host_name, host_key(self.settings.host_name)
        entry = self._entry()
        try:
            with anyio.fail_after(self._timeout * 2):
                await self._redis.ping()
                claimed = await self._redis.set(key, entry.encode(), nx=True, px=self._ttl_ms)
                holder = None if claimed else HostEntry.decode(await self._redis.get(key) or b"")
                if claimed:
                    await self._redis.sadd(HOSTS_KEY, name)
        except self._errors as error:
            await self._close()
            raise ClusterError(
                f"cluster: cannot reach Redis at {self._url} (cluster_redis_url): {_said(error)}"
            ) from None
        if not claimed:
            await self._close()
            where = holder.address if holder is not None else "an address it does not say"
            raise ClusterError(
                f"cluster: host_name {name!r} is taken by a live host at {where}; give this "
                f"host another cluster_host_name (a host that died frees its name within "
                f"cluster_dropout, {self.settings.dropout:g} s)"
            )
        self._note_shape(entry)
        await self._read_peers()
        # Blocking stream reads hold their connection up to BLOCK_MS: a client of their own,
        # whose reads wait longer than that. A command on a pooled connection that Redis
        # closed (it restarted) goes once more on a new one, or the first task after Redis
        # returned would fail; every command of this client may run twice (remote.py).
        streams = Redis.from_url(
            self.settings.redis_url,
            socket_connect_timeout=self._timeout,
            socket_timeout=BLOCK_MS / 1000 + self._timeout + 1,
            retry=Retry(NoBackoff(), 1),
        )
        self._dispatcher.host_name = name  # metadata.host: this host's name in the cluster
        self._remote = RemoteTasks(
            name,
            self._supervisor,
            self._dispatcher,
            streams,
            self._errors,
            lambda: self._lifecycle.is_stopping,
            instance=self._instance,
            claim_idle=self.settings.claim_idle,
            free_elsewhere=self.free_elsewhere,
        )
        self._dispatcher.other_hosts = self  # tasks for agents only other hosts run go there
        # One result cache for the cluster, in place of this host's own in memory.
        self._dispatcher.result_cache = RedisResultCache(self._redis, self._errors, self._timeout)
        log.info(
            "cluster joined",
            host=name,
            advertise=self.settings.advertise,
            redis=self._url,
            hosts=[p.name for p in self._peers],
        )

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Heartbeat until the host stops: every ``heartbeat`` seconds, and at once when an
        agent of this host changes state."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._follow_agents)
            tg.start_soon(self._wake_at_stop)
            tg.start_soon(self._probe_peers)
            if self._remote is not None:
                tg.start_soon(self._remote.serve)
                tg.start_soon(self._remote.read_replies)
                tg.start_soon(self._remote.send_batches)
            task_status.started()
            while not self._lifecycle.is_stopping:
                with anyio.move_on_after(self.settings.heartbeat):
                    await self._changed.wait()
                self._changed = anyio.Event()
                if not self._lifecycle.is_stopping:
                    await self._beat()
            tg.cancel_scope.cancel()

    async def leave(self) -> None:
        """Take this host's entry out of the directory (a clean stop: the others see it go at
        once instead of after ``dropout``)."""
        if self._redis is None:
            return
        key = host_key(self.settings.host_name)
        try:
            with anyio.fail_after(self._timeout):
                held = HostEntry.decode(await self._redis.get(key) or b"")
                if held is not None and held.instance == self._instance:
                    await self._redis.delete(key)
                    await self._redis.srem(HOSTS_KEY, self.settings.host_name)
            log.info("cluster left", host=self.settings.host_name)
        except self._errors as error:
            log.warning("cluster: could not leave the directory", error=str(error))
        await self._close()

    async def execute_elsewhere(
        self, task: TaskInput, on_event: Callable[[TaskEvent], None] | None
    ) -> TaskResult:
        """Run ``task`` on another host that runs its agent (docs/cluster.md, "Tasks across
        hosts"): the dispatcher asks when this host does not run it (agents/other_hosts.py)."""
        # The directory as last read, when read within a heartbeat and it names the agent (a
        # fresh read per call was 9 % of a calling host's CPU); else read afresh.
        if not self._runs_elsewhere(task.agent, within=self.settings.heartbeat):
            await self.view()
        if self._remote is None or not self._runs_elsewhere(task.agent, within=math.inf):
            raise NotFound(
                f"agent {task.agent!r} is not deployed on any host of the cluster",
                reason=Reason.AGENT_NOT_FOUND,
                resource=("agent", task.agent),
            )
        return await self._remote.execute(task, on_event)

    def _runs_elsewhere(self, agent: str, *, within: float) -> bool:
        """Whether another host ran ``agent`` when the directory was last read, if that was
        at most ``within`` seconds ago (and no longer than ``dropout``)."""
        age = time.monotonic() - self._peers_read_at
        if age > min(within, self.settings.dropout):
            return False
        return any(a.name == agent for peer in self._peers for a in peer.agents)

    def idempotent_elsewhere(self, agent: str, action: str) -> bool:
        """Whether another host declares ``agent``'s ``action`` idempotent, as last read."""
        return any(
            a.name == action and a.idempotent
            for peer in self._peers
            for published in peer.agents
            if published.name == agent
            for a in published.actions
        )

    def free_elsewhere(self, agent: str) -> bool:
        """Whether another host had a free slot for ``agent`` at its last heartbeat (its ready
        replicas' slots more than its tasks in flight and queued), as last read."""
        if time.monotonic() - self._peers_read_at > self.settings.dropout:
            return False
        return any(
            published.in_flight + published.queued
            < published.ready_replicas * published.max_concurrency
            for peer in self._peers
            for published in peer.agents
            if published.name == agent
        )

    async def actions_elsewhere(self) -> dict[str, list[str]]:
        """The agents only other hosts run, with their actions' names, read afresh."""
        return (await self.view()).actions_elsewhere()

    async def view(self) -> ClusterView:
        """The cluster now: the directory read afresh, or as last read while Redis is out of
        reach (hosts read longer than ``dropout`` ago are left out: they may be gone)."""
        if not self._degraded:
            try:
                with anyio.fail_after(self._timeout):
                    await self._read_peers()
            except self._errors as error:
                self._degrade(error)
        fresh = time.monotonic() - self._peers_read_at <= self.settings.dropout
        return ClusterView(self._supervisor, self._entry(), self._peers if fresh else [])

    @property
    def degraded(self) -> str:
        """Why this host cannot read the directory now (Redis out of reach); '' when it can."""
        return self._degraded

    def whereabouts(self, host: str) -> HostWhereabouts | None:
        """Where another host is, as last read (terminals.HostDirectory): its address, and
        whether it is still in the directory; None for a host this one never saw."""
        fresh = time.monotonic() - self._peers_read_at <= self.settings.dropout
        for peer in self._peers if fresh else []:
            if peer.name == host:
                return HostWhereabouts(peer.address, live=True)
        if host in self._departed:
            return HostWhereabouts(self._departed[host], live=False)
        return None

    async def peer_addresses(self) -> dict[str, str]:
        """The other live hosts' advertised gRPC addresses by name, the directory read afresh
        (as last read while Redis is out of reach): where terminal calls are forwarded."""
        await self.view()
        fresh = time.monotonic() - self._peers_read_at <= self.settings.dropout
        return {peer.name: peer.address for peer in self._peers} if fresh else {}

    async def events_host(self, agent: str, host: str) -> tuple[str, str] | None:
        """Where WatchEvents of ``agent`` ('' for every agent) asked of ``host`` is followed
        (docs/cluster.md, "Events across hosts"): None for this host; else the other host's
        name and address: ``host`` when named, or for an agent only other hosts run the
        first of them. NotFound for a ``host`` that is not a live host of the cluster."""
        me = self.settings.host_name
        if host == me or (not host and (not agent or agent in self._supervisor.agents)):
            return None
        view = await self.view()
        if host:
            fresh = time.monotonic() - self._peers_read_at <= self.settings.dropout
            for peer in self._peers if fresh else []:
                if peer.name == host:
                    return peer.name, peer.address
            raise NotFound(
                f"host {host!r} is not a live host of the cluster (live: "
                f"{', '.join(self.status().hosts)})",
                reason=Reason.HOST_NOT_FOUND,
                resource=("host", host),
            )
        elsewhere = [h for h in view.hosts_of(agent) if not h.local]
        return (elsewhere[0].host, elsewhere[0].address) if elsewhere else None

    async def backlog(self) -> dict[str, StreamBacklog]:
        """The tasks waiting in Redis for each agent this host runs; empty while Redis is out
        of reach (the metrics say the host is degraded instead)."""
        if self._redis is None or self._degraded:
            return {}
        with anyio.move_on_after(self._timeout):
            try:
                return await read_backlog(self._redis, sorted(self._supervisor.agents))
            except self._errors:
                pass
        return {}

    def status(self) -> ClusterStatus:
        fresh = time.monotonic() - self._peers_read_at <= self.settings.dropout
        peers = [p.name for p in self._peers] if fresh else []
        return ClusterStatus(
            host_name=self.settings.host_name,
            advertise=self.settings.advertise,
            redis=self._url,
            degraded=self._degraded,
            hosts=tuple(sorted([self.settings.host_name, *peers])),
            unreachable=unreachable_notes(
                self.settings.host_name,
                self.settings.advertise,
                self._reach.failed,
                self._peers if fresh else [],
            ),
        )

    # --- heartbeats ---------------------------------------------------------------------------

    @property
    def _ttl_ms(self) -> int:
        return int(self.settings.dropout * 1000)

    def _entry(self) -> HostEntry:
        agents = tuple(PublishedAgent.of(a) for a in self._supervisor.agents.values())
        return HostEntry(
            self.settings.host_name,
            self.settings.advertise,
            self._instance,
            agents,
            unreachable=tuple(sorted(self._reach.failed)),
        )

    def _note_shape(self, entry: HostEntry) -> None:
        """Log the agents this host publishes when they change (what tests and operators wait
        on: "cluster published" says the others can now see it)."""
        shape = sorted(a.shape() for a in entry.agents)
        if shape != self._shape:
            self._shape = shape
            log.info(
                "cluster published",
                host=entry.name,
                agents={a.name: a.state for a in entry.agents},
            )

    async def _beat(self) -> None:
        assert self._redis is not None
        entry = self._entry()
        try:
            with anyio.fail_after(self._timeout * 2):
                async with self._redis.pipeline(transaction=False) as pipe:
                    pipe.set(host_key(entry.name), entry.encode(), px=self._ttl_ms)
                    pipe.sadd(HOSTS_KEY, entry.name)
                    await pipe.execute()
                await self._read_peers()
        except self._errors as error:
            self._degrade(error)
            return
        if self._degraded:
            log.info("cluster recovered", host=entry.name, redis=self._url)
            self._degraded = ""
            self._shape = None  # say again what the directory holds
        self._note_shape(entry)

    def _degrade(self, error: BaseException) -> None:
        reason = f"Redis at {self._url} out of reach: {_said(error)}"
        if not self._degraded:
            log.warning(
                "cluster degraded: serving this host's agents only",
                host=self.settings.host_name,
                reason=reason,
            )
        self._degraded = reason

    async def _read_peers(self) -> None:
        """Read every other host's entry; forget the names whose entries expired."""
        assert self._redis is not None
        members: set[bytes | str] = await self._redis.smembers(HOSTS_KEY)
        names = sorted(n.decode() if isinstance(n, bytes) else n for n in members)
        others = [n for n in names if n != self.settings.host_name]
        values: list[Any] = await self._redis.mget([host_key(n) for n in others]) if others else []
        peers, expired = [], []
        for name, raw in zip(others, values, strict=True):
            entry = HostEntry.decode(raw) if raw is not None else None
            if raw is None:
                expired.append(name)
            elif entry is None:
                log.warning("cluster: an entry this host cannot read", host=name)
            else:
                peers.append(entry)
        if expired:
            await self._redis.srem(HOSTS_KEY, *expired)
        before = {p.name: p for p in self._peers}
        now = {p.name: p for p in peers}
        for name in now.keys() - before.keys():
            log.info("cluster host joined", host=name, address=now[name].address)
        for name in before.keys() - now.keys():
            log.info("cluster host left", host=name, address=before[name].address)
            self._departed[name] = before[name].address
        for name in now:
            self._departed.pop(name, None)
        self._peers, self._peers_read_at = peers, time.monotonic()

    async def _follow_agents(self) -> None:
        events = self._supervisor.events
        async for _ in events.follow(
            events.last_sequence, until=lambda: self._lifecycle.is_stopping
        ):
            self._changed.set()

    async def _probe_peers(self) -> None:
        """Once a heartbeat, try the other hosts' advertised addresses (reachability.py); a
        change goes out with the next heartbeat."""
        while not self._lifecycle.is_stopping:
            before = set(self._reach.failed)
            await self._reach.probe(list(self._peers))
            if set(self._reach.failed) != before:
                self._changed.set()
            await anyio.sleep(self.settings.heartbeat)

    async def _wake_at_stop(self) -> None:
        await self._lifecycle.stopping.wait()
        self._changed.set()

    async def _close(self) -> None:
        self._dispatcher.other_hosts = None
        if self._remote is not None:
            remote, self._remote = self._remote, None
            await remote.close()
        if self._redis is not None:
            redis, self._redis = self._redis, None
            await redis.aclose()
