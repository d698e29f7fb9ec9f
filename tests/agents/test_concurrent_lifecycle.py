"""Lifecycle calls for one agent that overlap (docs/agents.md, "States and restarts"): a stop
that takes its time (the rogue agent ignores the shutdown frame and SIGTERM, so its stop lasts
stop_grace + 3 s) with a ScaleAgent or a StartAgent arriving while it runs.

Before, a scale up while the agent stopped started replicas the stop had not asked to stop,
and the stop -- and a RemoveAgent, or the host's own stop, after it -- waited for them for
ever; a StartAgent while it stopped answered STOPPING and was lost: the agent ended STOPPED,
though no longer recorded as stopped (a host restart would have started it).
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.agents.test_agents_more_claims import ROGUE, seconds
from tests.agents.test_scale_answer_states import (
    agent_processes,
    all_running,
    by_replica,
    processes,
)
from tests.support.agents import deploy, events_until, remove_agent, state_name
from tests.support.host import HostProcess
from tests.support.procs import wait_gone
from tests.workflows.test_restart import restart


def deploy_slow_to_stop(host: HostProcess, name: str) -> str:
    """A rogue agent deployed as ``name`` whose stop lasts stop_grace (1 s) + 3 s."""
    return deploy(
        host,
        ROGUE,
        name=name,
        env={"ROGUE_LINGER": "1", "ROGUE_IGNORE_TERM": "1"},
        stop_grace=seconds(1),
    )


def slow_to_stop(
    host: HostProcess, name: str
) -> tuple[grpc.Future, supervisor_pb2.WatchEventsResponse]:
    """deploy_slow_to_stop's agent, a StopAgent of it under way (its future), and its
    replica's STOPPING event."""
    deploy_slow_to_stop(host, name)
    stop = host.supervisor.StopAgent.future(supervisor_pb2.StopAgentRequest(name=name), timeout=60)
    stopping = events_until(
        host, name, after=0, last=lambda e: e.replica == 0 and state_name(e.state) == "STOPPING"
    )[-1]
    return stop, stopping


def test_a_scale_up_while_the_agent_stops_adds_no_replica_and_the_stop_ends(
    fresh_host: HostProcess,
) -> None:
    """A ScaleAgent to 3 while the agent stops: the scale adds no replica (nothing is started
    under a stop), the StopAgent answers once its replica is down, with the agent STOPPED and
    no process left, and the next StartAgent runs the three asked for."""
    host = fresh_host
    stop, stopping = slow_to_stop(host, "scaled-stopping")
    scaled = host.supervisor.ScaleAgent(
        supervisor_pb2.ScaleAgentRequest(name="scaled-stopping", replicas=3), timeout=30
    ).agent
    assert scaled.spec.replicas == 3
    assert sorted(processes(scaled)) == [0], processes(scaled)
    stopped = stop.result().agent
    assert state_name(stopped.info.state) == "STOPPED", stopped.info
    assert [state_name(p.state) for p in agent_processes(host, "scaled-stopping")] == ["STOPPED"]
    after = events_until(
        host,
        "scaled-stopping",
        after=stopping.sequence,
        last=lambda e: state_name(e.state) == "STOPPED",
    )
    assert {e.replica for e in after} == {0}, after

    request = supervisor_pb2.StartAgentRequest(name="scaled-stopping")
    host.supervisor.StartAgent(request, timeout=60)
    seen = by_replica(
        events_until(host, "scaled-stopping", after=stopped.event_sequence, last=all_running(3))
    )
    assert sorted(r for r in seen if r >= 0) == [0, 1, 2], seen
    remove_agent(host, "scaled-stopping")


def test_a_start_while_the_agent_stops_runs_it_once_the_stop_has_ended(
    fresh_host: HostProcess,
) -> None:
    """A StartAgent while the agent stops answers once the stop has ended and the agent runs
    again (a start asked after a stop wins): the StopAgent answers, the StartAgent with the
    agent starting, and the agent's events show the old process STOPPED, then one
    new process RUNNING; ListProcesses shows that one alone."""
    host = fresh_host
    stop, stopping = slow_to_stop(host, "started-stopping")
    started = host.supervisor.StartAgent(
        supervisor_pb2.StartAgentRequest(name="started-stopping"), timeout=60
    ).agent
    stop.result()  # answered: the stop ended (its answer shows the agent as it is by then)
    assert state_name(started.info.state) in ("INSTALLING", "STARTING", "RUNNING"), started.info
    after = events_until(
        host,
        "started-stopping",
        after=stopping.sequence,
        last=lambda e: e.replica == 0 and state_name(e.state) == "RUNNING",
    )
    ends = [(state_name(e.state), e.pid) for e in after if e.replica == 0]
    assert ends[0][0] == "STOPPED" and ends[-1][0] == "RUNNING", ends
    assert ends[-1][1] not in (0, stopping.pid), ends
    listed = agent_processes(host, "started-stopping")
    assert [(p.replica, state_name(p.state), p.pid) for p in listed] == [
        (0, "RUNNING", ends[-1][1])
    ]
    remove_agent(host, "started-stopping")


def test_a_start_racing_a_removal_is_refused_and_nothing_runs_behind_it(
    fresh_host: HostProcess,
) -> None:
    """A StartAgent and a RemoveAgent while the agent stops: the removal wins whichever came
    first -- the start is refused NOT_FOUND (`is being removed`), the removal answers, and
    the agent is gone from the directory with no process of it left. (A start that waited
    for the stop, then ran the agent, would leave it running out of the directory.)"""
    host = fresh_host
    name = "removed-stopping"
    stop, stopping = slow_to_stop(host, name)
    start = host.supervisor.StartAgent.future(
        supervisor_pb2.StartAgentRequest(name=name), timeout=60
    )
    host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=name), timeout=60)
    with pytest.raises(grpc.RpcError) as refused:
        start.result()
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND, refused.value
    assert "is being removed" in (refused.value.details() or "")
    stop.result()
    listed = host.agents.ListAgents(agent_io_pb2.ListAgentsRequest(), timeout=10).agents
    assert name not in [a.name for a in listed]
    assert wait_gone([stopping.pid], within=0) == []


def test_a_stop_whose_caller_gives_up_still_ends_stopped_and_recorded(tmp_path: Path) -> None:
    """A StopAgent whose deadline passes while the agent stops (its caller gone): the stop
    runs to its end all the same -- the agent ends STOPPED -- and is recorded, so a host
    restarted on the same state directory brings the agent back STOPPED, not running. (grpc
    cancels a handler's task itself, which anyio's shield does not hold off: the stop's
    record was skipped, and the restarted host ran the agent again.)"""
    host = HostProcess(tmp_path / "state")
    try:
        host.wait_serving()
        name = deploy_slow_to_stop(host, "stop-abandoned")
        with pytest.raises(grpc.RpcError) as gave_up:
            host.supervisor.StopAgent(supervisor_pb2.StopAgentRequest(name=name), timeout=0.5)
        assert gave_up.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, gave_up.value
        events_until(host, name, after=0, last=lambda e: state_name(e.state) == "STOPPED")
        host = restart(host, kill=False)
        listed = host.agents.ListAgents(agent_io_pb2.ListAgentsRequest(), timeout=10).agents
        assert [(a.name, state_name(a.state)) for a in listed] == [(name, "STOPPED")], listed
    finally:
        host.stop()
