"""Deploying agents into a test host and waiting for their states (on events, not sleeps)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.host import HostProcess

AGENTS = Path(__file__).resolve().parents[1] / "agents"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"


def state_name(value: int) -> str:
    return agent_io_pb2.AgentState.Name(value).removeprefix("AGENT_STATE_")


def watch_until(
    host: HostProcess,
    agent: str,
    states: set[str],
    *,
    after: int = 0,
    timeout: float = 120.0,
    replica: int | None = None,
    metadata: Sequence[tuple[str, str]] = (),
) -> supervisor_pb2.WatchEventsResponse:
    """Follow WatchEvents until ``agent`` (or one replica) enters one of ``states``."""
    stream = host.supervisor.WatchEvents(
        supervisor_pb2.WatchEventsRequest(agent=agent, after_sequence=after),
        timeout=timeout,
        metadata=tuple(metadata),
    )
    try:
        for event in stream:
            if state_name(event.state) in states and (replica is None or event.replica == replica):
                return event
    finally:
        stream.cancel()
    raise AssertionError(f"{agent} never reached {states}")


def until(
    host: HostProcess,
    status: supervisor_pb2.AgentStatus,
    states: set[str],
    *,
    replica: int | None = None,
    timeout: float = 120.0,
    metadata: Sequence[tuple[str, str]] = (),
) -> supervisor_pb2.WatchEventsResponse:
    """The agent (or one replica) in one of ``states``, from an answer's AgentStatus on: at once
    when the status already shows it, else its event after the status's event_sequence.

    A status and its event_sequence are one snapshot (proto: AgentStatus.event_sequence), so
    what the status shows never comes again as an event: a deploy, start, restart or scale
    answered after its replica already ran (the answer waits for the agent store's write, and a
    fast agent runs meanwhile) would otherwise be waited for until the timeout (seen under
    load: a deploy that 'stalled' for 120 s). What `ether agents deploy --wait` does too."""
    name = status.info.name
    if replica is None:
        now, reason = status.info.state, status.reason
        running = [p.pid for p in status.processes if p.pid > 0]
        pid = running[0] if running else 0
    else:
        found = [p for p in status.processes if p.replica == replica]
        now, reason, pid = (found[0].state, found[0].reason, found[0].pid) if found else (0, "", 0)
    if state_name(now) in states:
        return supervisor_pb2.WatchEventsResponse(
            sequence=status.event_sequence,
            agent=name,
            replica=-1 if replica is None else replica,
            state=now,
            reason=reason,
            pid=pid,
        )
    return watch_until(
        host,
        name,
        states,
        after=status.event_sequence,
        timeout=timeout,
        replica=replica,
        metadata=metadata,
    )


def deploy(
    host: HostProcess,
    path: Path,
    *,
    name: str = "",
    wait: bool = True,
    metadata: Sequence[tuple[str, str]] = (),
    **spec: Any,
) -> str:
    """Deploy a folder and (by default) wait until every replica it asks for runs (each has a
    pid from then on); ``metadata`` goes with the calls (a host with auth needs a token)."""
    response = host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(name=name, path=str(path), **spec)
        ),
        timeout=30,
        metadata=tuple(metadata),
    )
    agent = response.agent.info.name
    if wait:
        # From the answer's status on: what it shows, then the events after it.
        event = until(host, response.agent, {"RUNNING", "FATAL"}, metadata=metadata)
        assert state_name(event.state) == "RUNNING", f"{agent}: {event.reason}\n" + "\n".join(
            event.stderr_tail
        )
        # The agent runs once one replica does (any of them); the others may still be starting.
        replicas = int(spec.get("replicas") or 1)
        for replica in range(replicas if replicas > 1 else 0):
            until(host, response.agent, {"RUNNING"}, replica=replica, metadata=metadata)
    return agent


def kill_once_running(stream: Any) -> int:
    """Given an ExecuteStream call of a task whose agent logs as it starts: wait until the agent
    has the task (its first log line for it), SIGKILL the process running it, and return that
    pid. The task was sent, so it may have run: only an idempotent one is tried again."""
    first = next(stream)
    assert first.WhichOneof("event") == "started"
    assert first.started.attempt == 1
    pid = first.started.pid
    assert pid > 0  # never os.kill(0, ...): that is our own process group
    # Before the agent's first log line the task might not be out yet ("never sent"), which
    # is retried whatever the idempotency: wait until the agent is running it.
    for event in stream:
        kind = event.WhichOneof("event")
        assert kind != "output", f"the task ended before its process was killed: {event}"
        if kind == "log":
            break
    os.kill(pid, signal.SIGKILL)
    return pid


def agent_pids(host: HostProcess, agent: str) -> list[int]:
    """The pids of ``agent``'s replicas, as ListProcesses gives them."""
    listed = host.supervisor.ListProcesses(
        supervisor_pb2.ListProcessesRequest(agent=agent), timeout=10
    )
    return [p.pid for p in listed.processes]


def remove_agent(host: HostProcess, name: str) -> None:
    host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=name), timeout=60)


def reasons_until_restarted(host: HostProcess, agent: str, timeout: float = 60.0) -> list[str]:
    """``agent``'s lifecycle events as "STATE: reason", from its first (WatchEvents replays the
    history) up to its first RUNNING after a BACKOFF: the replica died and came back."""
    seen: list[str] = []
    stream = host.supervisor.WatchEvents(
        supervisor_pb2.WatchEventsRequest(agent=agent), timeout=timeout
    )
    try:
        for event in stream:
            seen.append(f"{state_name(event.state)}: {event.reason}")
            if state_name(event.state) == "RUNNING" and any(s.startswith("BACKOFF") for s in seen):
                return seen
    finally:
        stream.cancel()
    raise AssertionError(f"{agent} was never restarted: {seen}")


def events_until(
    host: HostProcess,
    agent: str,
    *,
    after: int,
    last: Callable[[supervisor_pb2.WatchEventsResponse], bool],
    timeout: float = 120,
) -> list[supervisor_pb2.WatchEventsResponse]:
    """``agent``'s lifecycle events after sequence ``after``, up to the first one ``last``
    accepts (included); ``until`` gives only that last one."""
    seen = []
    stream = host.supervisor.WatchEvents(
        supervisor_pb2.WatchEventsRequest(agent=agent, after_sequence=after), timeout=timeout
    )
    try:
        for event in stream:
            seen.append(event)
            if last(event):
                return seen
    finally:
        stream.cancel()
    raise AssertionError(f"{agent}: the awaited event never came: {seen}")
