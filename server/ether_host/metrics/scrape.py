"""What a scrape reads from the host's state as it is now: agents and their replicas (with each
replica's CPU, memory and descriptors from /proc), terminals, the gateway and workflow runs.

Nothing here runs between scrapes. Gauges are the state at the scrape; the counters among them
(CPU seconds, terminal bytes, egress decisions, restarts) are totals the host keeps anyway.
Labels stay bounded: agent names, replica indexes, states and outcomes; never a task, session,
terminal or run id.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter as Tally
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import anyio
import anyio.to_thread
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ether_host.cluster import Cluster, StreamBacklog
from ether_host.gateway import Gateway
from ether_host.supervisor import State, Supervisor
from ether_host.terminals import TerminalManager
from ether_host.workflows import Workflows

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")
# Agent states and replica states, as SupervisorService shows them: every one is written at
# each scrape (0 when none), so a dashboard sees a state go to 0 rather than vanish.
STATES = tuple(state.value for state in State)


@dataclass
class ProcessUsage:
    """What a replica's processes use: its own process and every descendant (bwrap and its
    init when sandboxed, and whatever the agent starts)."""

    cpu_seconds: float = 0.0
    resident_bytes: int = 0
    open_fds: int = 0


def process_tree_usage(pid: int) -> ProcessUsage | None:
    """CPU seconds (user and system, the reaped children's included), resident memory and open
    descriptors of ``pid`` and its descendants, from /proc; None when ``pid`` is gone. Resident
    memory is summed per process, so pages two processes share count twice."""
    usage = ProcessUsage()
    found = False
    for member in _tree(pid):
        try:
            with open(f"/proc/{member}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:  # exited since it was listed
            continue
        found = True
        # After the command's closing parenthesis: [0] is field 3 (state), so utime (14),
        # stime (15), cutime (16), cstime (17) are [11:15] and rss (24, in pages) is [21].
        usage.cpu_seconds += sum(int(ticks) for ticks in fields[11:15]) / TICKS
        usage.resident_bytes += int(fields[21]) * PAGE_SIZE
        with contextlib.suppress(OSError):  # exited, or not ours to look into
            usage.open_fds += len(os.listdir(f"/proc/{member}/fd"))
    return usage if found else None


def _usage_of(running: list[tuple[str, int, int]]) -> list[tuple[str, int, ProcessUsage]]:
    """What each (agent, replica index, pid) uses; replicas whose process is gone are left out."""
    found = []
    for agent, index, pid in running:
        usage = process_tree_usage(pid)
        if usage is not None:
            found.append((agent, index, usage))
    return found


def _tree(pid: int) -> Iterator[int]:
    """``pid`` and its descendants, by the kernel's per-thread children lists."""
    waiting = [pid]
    while waiting:
        current = waiting.pop()
        yield current
        try:
            threads = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for thread in threads:
            try:
                with open(f"/proc/{current}/task/{thread}/children", "rb") as children:
                    waiting.extend(int(child) for child in children.read().split())
            except OSError:
                continue


class HostCollector(Collector):
    """The scrape-time metrics of one host (docs/telemetry.md has the table)."""

    def __init__(
        self,
        supervisor: Supervisor,
        *,
        restarts: Tally[str],
        fatals: Tally[str],
        terminals: TerminalManager | None,
        gateway: Gateway | None,
        workflows: Workflows | None,
        cluster: Cluster | None = None,
    ) -> None:
        self._supervisor = supervisor
        self._restarts = restarts
        self._fatals = fatals
        self._terminals = terminals
        self._gateway = gateway
        self._workflows = workflows
        self._runs: dict[str, int] = {}
        self._cluster = cluster
        self._backlog: dict[str, StreamBacklog] = {}
        self._usage: list[tuple[str, int, ProcessUsage]] = []  # (agent, replica, usage)

    async def refresh(self) -> None:
        """Read what lives in a store (workflow runs by state) or in Redis (the cluster's
        backlog) before ``collect`` runs."""
        if self._workflows is not None:
            self._runs = await self._workflows.runs_by_state()
        # Each replica's /proc files are read in a worker thread: ~0.1 ms a replica, 50 ms
        # of a stalled event loop at a scrape of 500 agents if read on it.
        running = [
            (agent.name, replica.index, replica.pid)
            for agent in list(self._supervisor.agents.values())
            for replica in agent.replicas
            if replica.pid
        ]
        self._usage = await anyio.to_thread.run_sync(_usage_of, running)
        if self._cluster is not None:
            self._backlog = await self._cluster.backlog()

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return ()  # names are not checked against other collectors: the registry is ours alone

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        yield from self._agents()
        yield from self._replicas()
        if self._terminals is not None:
            yield from self._terminal_metrics(self._terminals)
        if self._gateway is not None:
            yield from self._gateway_metrics(self._gateway)
        if self._workflows is not None:
            runs = GaugeMetricFamily(
                "ether_workflow_runs",
                "Workflow runs the host holds (live and kept ended ones), by state.",
                labels=["state"],
            )
            for state, count in sorted(self._runs.items()):
                runs.add_metric([state], count)
            yield runs
        if self._cluster is not None:
            yield from _cluster_metrics(self._cluster, self._backlog)

    def _agents(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        agents = list(self._supervisor.agents.values())
        state = GaugeMetricFamily(
            "ether_agent_state",
            "1 for the state each deployed agent is in (as ListAgents shows it), 0 for the others.",
            labels=["agent", "state"],
        )
        in_flight = GaugeMetricFamily(
            "ether_agent_tasks_in_flight",
            "Tasks placed on the agent's replicas and not finished yet.",
            labels=["agent"],
        )
        queued = GaugeMetricFamily(
            "ether_agent_tasks_queued",
            "Tasks waiting for a free slot on the agent.",
            labels=["agent"],
        )
        replicas = GaugeMetricFamily(
            "ether_agent_replicas",
            "The agent's replicas, by the state each is in.",
            labels=["agent", "state"],
        )
        for agent in agents:
            now = agent.state.value
            counts = Tally(replica.state.value for replica in agent.replicas)
            for name in STATES:
                state.add_metric([agent.name, name], 1 if name == now else 0)
                replicas.add_metric([agent.name, name], counts.get(name, 0))
            in_flight.add_metric([agent.name], agent.in_flight)
            queued.add_metric([agent.name], agent.queued)
        yield from (state, replicas, in_flight, queued)
        yield _counter(
            "ether_agent_restarts",
            "Replica restarts after an exit the host did not ask for (BACKOFF, then STARTING).",
            "agent",
            self._restarts,
        )
        yield _counter(
            "ether_agent_fatals",
            "Times a replica (or an agent's install) entered FATAL: it is not restarted again.",
            "agent",
            self._fatals,
        )

    def _replicas(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        labels = ["agent", "replica"]
        cpu = CounterMetricFamily(
            "ether_replica_cpu_seconds",
            "CPU time (user and system) of a running replica's process and its descendants.",
            labels=labels,
        )
        memory = GaugeMetricFamily(
            "ether_replica_resident_memory_bytes",
            "Resident memory of a running replica's process and its descendants.",
            labels=labels,
        )
        fds = GaugeMetricFamily(
            "ether_replica_open_fds",
            "Open file descriptors of a running replica's process and its descendants.",
            labels=labels,
        )
        for agent, index, usage in self._usage:
            names = [agent, str(index)]
            cpu.add_metric(names, usage.cpu_seconds)
            memory.add_metric(names, usage.resident_bytes)
            fds.add_metric(names, usage.open_fds)
        yield from (cpu, memory, fds)

    @staticmethod
    def _terminal_metrics(
        terminals: TerminalManager,
    ) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        sessions = list(terminals.sessions.values())
        yield GaugeMetricFamily(
            "ether_terminals_open",
            "Terminals the host holds open (running, or exited and not closed yet).",
            value=len(sessions),
        )
        yield GaugeMetricFamily(
            "ether_terminal_attached_clients",
            "Clients attached to a terminal, over every open terminal.",
            value=sum(session.attached for session in sessions),
        )
        yield CounterMetricFamily(
            "ether_terminal_input_bytes",
            "Bytes written to terminals' programs (WriteInput, attach, term.* calls).",
            value=terminals.closed_input_bytes + sum(s.input_bytes for s in sessions),
        )
        yield CounterMetricFamily(
            "ether_terminal_output_bytes",
            "Bytes terminals' programs wrote.",
            value=terminals.closed_output_bytes + sum(s.buffer.end for s in sessions),
        )

    @staticmethod
    def _gateway_metrics(gateway: Gateway) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        sessions = GaugeMetricFamily(
            "ether_gateway_sessions",
            "Gateway sessions the host holds, by state (OPEN, CLOSED).",
            labels=["state"],
        )
        held = Tally(session.state for session in list(gateway.sessions.sessions.values()))
        for state in sorted({"OPEN", "CLOSED", *held}):
            sessions.add_metric([state], held.get(state, 0))
        yield sessions
        mailboxes = GaugeMetricFamily(
            "ether_gateway_mailbox_messages",
            "Messages waiting in an agent's mailbox.",
            labels=["agent"],
        )
        for agent, box in sorted(gateway.messaging.mailboxes.items()):
            mailboxes.add_metric([agent], len(box.queue))
        yield mailboxes
        decisions = CounterMetricFamily(
            "ether_egress_decisions",
            "net.fetch requests decided by the egress policy, by agent and outcome "
            "(ALLOWED, DENIED).",
            labels=["agent", "outcome"],
        )
        for (agent, outcome), count in sorted(gateway.audit.decisions.items()):
            decisions.add_metric([agent, outcome], count)
        yield decisions


def _cluster_metrics(
    cluster: Cluster, backlog: dict[str, StreamBacklog]
) -> Iterator[GaugeMetricFamily]:
    status = cluster.status()
    yield GaugeMetricFamily(
        "ether_cluster_hosts",
        "Live hosts of the cluster this host knows of, itself included.",
        value=len(status.hosts),
    )
    yield GaugeMetricFamily(
        "ether_cluster_degraded",
        "1 while this host cannot reach Redis and serves its own agents only, else 0.",
        value=1 if status.degraded else 0,
    )
    unread = GaugeMetricFamily(
        "ether_cluster_unread_tasks",
        "Tasks on an agent's stream in Redis that no host has read yet (the Redis bus's lag), "
        "for the agents this host runs.",
        labels=["agent"],
    )
    pending = GaugeMetricFamily(
        "ether_cluster_pending_tasks",
        "Tasks on an agent's stream in Redis that a host has read and not answered yet, for the "
        "agents this host runs.",
        labels=["agent"],
    )
    for agent, waiting in sorted(backlog.items()):
        unread.add_metric([agent], waiting.unread)
        pending.add_metric([agent], waiting.pending)
    yield unread
    yield pending


def _counter(name: str, documentation: str, label: str, counts: Tally[str]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, documentation, labels=[label])
    for key, count in sorted(counts.items()):
        family.add_metric([key], count)
    return family
