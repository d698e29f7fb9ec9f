"""Deploying agents into a test host and waiting for their states (on events, not sleeps)."""

from __future__ import annotations

from collections.abc import Sequence
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
        # The status was taken right after registration: events from before
        # the deploy call are skipped, the install and start are not.
        event = watch_until(
            host,
            agent,
            {"RUNNING", "FATAL"},
            after=response.agent.event_sequence,
            metadata=metadata,
        )
        assert state_name(event.state) == "RUNNING", f"{agent}: {event.reason}\n" + "\n".join(
            event.stderr_tail
        )
        # The agent runs once one replica does (any of them); the others may still be starting.
        replicas = int(spec.get("replicas") or 1)
        for replica in range(replicas if replicas > 1 else 0):
            watch_until(
                host,
                agent,
                {"RUNNING"},
                after=response.agent.event_sequence,
                replica=replica,
                metadata=metadata,
            )
    return agent
