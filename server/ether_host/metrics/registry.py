"""The host's Prometheus metrics: one registry owned by the host, served at ``/metrics`` on the
HTTP listener (docs/telemetry.md, "Metrics").

Off by default (``[telemetry] metrics``). When off nothing here exists: the RPC wrapper and the
dispatcher hold ``None`` and pay one ``is None`` check per call. When on, the hot path records
two things only, each into plain lists (tallies.py) exposed when scraped: an RPC's end
(``rpc_ended``: a counter by method and code, a latency histogram by method) and a task's end
(``task_ended``: a counter by agent, action and status, a duration histogram by agent and
action). Everything else (agents and replicas, terminals, gateway, workflow runs) is read from
the host's own state when Prometheus scrapes (``scrape.HostCollector``), so it costs
nothing between scrapes; restarts and FATALs are counted from the supervisor's lifecycle events
by one follower task.

The registry is the host's, never prometheus_client's global REGISTRY: two hosts in one
process (tests) do not share counters, and nothing another library registers globally leaks
into the scrape.
"""

from __future__ import annotations

from collections import Counter as Tally

import anyio
from anyio.abc import TaskStatus
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.exposition import generate_latest

from ether_host.cluster import Cluster
from ether_host.gateway import Gateway
from ether_host.lifecycle import Lifecycle
from ether_host.metrics.scrape import HostCollector
from ether_host.metrics.tallies import Tallies
from ether_host.supervisor import State, Supervisor
from ether_host.terminals import TerminalManager
from ether_host.workflows import Workflows

# Seconds. An Execute on a warm agent takes a few hundred microseconds; a workflow task or a
# model call may take minutes. Fifteen buckets keep one histogram series per label set small.
LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    10.0,
    60.0,
    300.0,
)


class Metrics:
    """The host's metrics registry and the recorders the hot path calls.

    ``rpc_ended`` and ``task_ended`` are called once per RPC and per task; ``run`` follows the
    supervisor's events (restarts, FATALs) in the host's task group; ``render`` is what a scrape
    answers."""

    def __init__(
        self,
        supervisor: Supervisor,
        lifecycle: Lifecycle,
        *,
        terminals: TerminalManager | None = None,
        gateway: Gateway | None = None,
        workflows: Workflows | None = None,
        cluster: Cluster | None = None,
    ) -> None:
        # No ``_created`` series beside every counter and histogram: they double the scrape and
        # say only when the host started. prometheus_client's switch is process-wide, and the
        # process is the host's.
        disable_created_metrics()  # type: ignore[no-untyped-call] # untyped in 0.26
        self.registry = CollectorRegistry(auto_describe=False)
        self._supervisor = supervisor
        self._lifecycle = lifecycle
        # The two pairs recorded on every call: plain lists, exposed when scraped (tallies.py
        # says why not prometheus_client's Counter and Histogram for these).
        self._rpcs = Tallies(
            (
                "ether_rpcs",
                "gRPC calls the host answered, by full method name and status code.",
            ),
            (
                "ether_rpc_duration_seconds",
                "Time from a gRPC call's start to its status, by full method name.",
            ),
            ["method", "code"],
            LATENCY_BUCKETS,
        )
        self.registry.register(self._rpcs)
        self._tasks = Tallies(
            (
                "ether_tasks",
                "Tasks that ended, by agent, action and status (SUCCESS, PARTIAL, ERROR, or "
                "the code of the error that ended them: DEADLINE_EXCEEDED, UNAVAILABLE, "
                "CANCELLED, ...).",
            ),
            (
                "ether_task_duration_seconds",
                "Time from a task's dispatch (queue wait included) to its end, by agent and "
                "action.",
            ),
            ["agent", "action", "status"],
            LATENCY_BUCKETS,
        )
        self.registry.register(self._tasks)
        # The calling host's side of tasks sent to another host of the cluster (the host that
        # ran one counts it in ether_tasks): no action label, since the action is the caller's
        # word, not checked here against the agent's list.
        self._remote_tasks = Counter(
            "ether_remote_tasks",
            "Tasks this host sent to another host of its cluster that ended, by agent and status.",
            ["agent", "status"],
            registry=self.registry,
        )
        self._remote_task_seconds = Histogram(
            "ether_remote_task_duration_seconds",
            "Time from sending a task to another host to its answer here, by agent.",
            ["agent"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._cache_lookups = Counter(
            "ether_result_cache_lookups",
            "Result-cache lookups of tasks of cacheable actions, by agent, action and outcome: "
            "hit (answered from the cache, the agent not asked) or miss (run, then kept).",
            ["agent", "action", "outcome"],
            registry=self.registry,
        )
        # Counted from lifecycle events by ``run``; read at scrape time by the collector.
        self.restarts: Tally[str] = Tally()
        self.fatals: Tally[str] = Tally()
        self._collector = HostCollector(
            supervisor,
            restarts=self.restarts,
            fatals=self.fatals,
            terminals=terminals,
            gateway=gateway,
            workflows=workflows,
            cluster=cluster,
        )
        self.registry.register(self._collector)
        # The host process itself (process_cpu_seconds_total, process_resident_memory_bytes,
        # process_open_fds, ...), the standard names every Prometheus dashboard knows.
        ProcessCollector(registry=self.registry)

    # -- the hot path --------------------------------------------------------------------

    def rpc_ended(self, method: str, code: str, seconds: float) -> None:
        self._rpcs.record((method, code), seconds)

    def task_ended(self, agent: str, action: str, status: str, seconds: float) -> None:
        self._tasks.record((agent, action, status), seconds)

    def remote_task_ended(self, agent: str, status: str, seconds: float) -> None:
        self._remote_tasks.labels(agent, status).inc()
        self._remote_task_seconds.labels(agent).observe(seconds)

    def cache_looked_up(self, agent: str, action: str, hit: bool) -> None:
        self._cache_lookups.labels(agent, action, "hit" if hit else "miss").inc()

    # -- background and scrape -----------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Count restarts (a replica starting again after BACKOFF) and FATALs (a replica or an
        agent's install entering FATAL) from the supervisor's events until the host stops."""
        events = self._supervisor.events
        task_status.started()
        async for _, event in events.follow(
            events.last_sequence, until=lambda: self._lifecycle.is_stopping
        ):
            if event.state is State.FATAL:
                self.fatals[event.agent] += 1
            elif event.state is State.STARTING and event.previous is State.BACKOFF:
                self.restarts[event.agent] += 1

    async def render(self) -> bytes:
        """The scrape's body (Prometheus text format 0.0.4): first what must be read off the
        event loop (workflow runs by state, from the run store; the cluster's backlog, from
        Redis), then every metric."""
        await self._collector.refresh()
        return generate_latest(self.registry)
