"""What DeployAgent's, ScaleAgent's and GetAgent's answers show of a replica the host is starting
(docs/agents.md, "States and restarts"): STARTING from the moment it is listed, before its
process is spawned and while it waits for the replica scaled away at its index, never the
STOPPED of a replica nothing starts; being listed is no event, so each spawn is still one
STARTING event (with its pid), the first one from STARTING. Scaling a stopped agent adds no
replica, and those it has stay STOPPED until StartAgent."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.agents.test_agents_more_claims import ROGUE, gated, sdk_agent, seconds
from tests.support.agents import deploy, events_until, remove_agent, state_name, until
from tests.support.host import HostProcess

EventCheck = Callable[[supervisor_pb2.WatchEventsResponse], bool]


def processes(status: supervisor_pb2.AgentStatus) -> dict[int, tuple[str, int]]:
    """Each listed replica's state and pid, by index."""
    return {p.replica: (state_name(p.state), p.pid) for p in status.processes}


def all_running(replicas: int) -> EventCheck:
    """An events_until ``last`` that accepts the event after which replicas 0 .. replicas-1
    have each had a RUNNING event (counted from the first event it is given)."""
    running: set[int] = set()

    def last(event: supervisor_pb2.WatchEventsResponse) -> bool:
        if state_name(event.state) == "RUNNING" and event.replica >= 0:
            running.add(event.replica)
        return running >= set(range(replicas))

    return last


def by_replica(
    events: list[supervisor_pb2.WatchEventsResponse],
) -> dict[int, list[supervisor_pb2.WatchEventsResponse]]:
    seen: dict[int, list[supervisor_pb2.WatchEventsResponse]] = {}
    for event in events:
        seen.setdefault(event.replica, []).append(event)
    return seen


def assert_started_once(events: list[supervisor_pb2.WatchEventsResponse]) -> None:
    """One replica's events from its creation: its spawn, from STARTING (the state it was
    listed in), with a pid; then its hello. No STOPPED on the way, no second STARTING."""
    states = [(state_name(e.state), state_name(e.previous_state)) for e in events]
    assert states == [("STARTING", "STARTING"), ("RUNNING", "STARTING")], states
    assert events[0].pid > 0 and events[1].pid == events[0].pid


def test_a_deploy_and_a_scale_up_show_their_replicas_starting(
    host: HostProcess, tmp_path: Path
) -> None:
    """Replicas 1 and up of this agent say hello only once the test lets them (a file in its
    folder). DeployAgent's answer shows no replica STOPPED; once replica 0 runs, GetAgent says
    RUNNING and replica 1 is STARTING; ScaleAgent to 3 answers with replica 2 STARTING. Each
    replica's events, from the first, are one spawn (STARTING from STARTING) and its RUNNING."""
    folder = sdk_agent(tmp_path / "gated", gated())
    try:
        deployed = host.supervisor.DeployAgent(
            supervisor_pb2.DeployAgentRequest(
                spec=supervisor_pb2.AgentSpec(
                    name="rising", path=str(folder), replicas=2, start_timeout=seconds(120)
                )
            ),
            timeout=30,
        ).agent
        assert state_name(deployed.info.state) in {"INSTALLING", "STARTING", "RUNNING"}, deployed
        assert {s for s, _ in processes(deployed).values()} <= {"STARTING", "RUNNING"}, deployed
        until(host, deployed, {"RUNNING"}, replica=0)

        info = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name="rising"), timeout=10).agent
        assert (state_name(info.state), info.replicas, info.ready_replicas) == ("RUNNING", 2, 1)
        listed = host.supervisor.ListProcesses(
            supervisor_pb2.ListProcessesRequest(agent="rising"), timeout=10
        )
        assert state_name(listed.processes[1].state) == "STARTING", listed

        scaled = host.supervisor.ScaleAgent(
            supervisor_pb2.ScaleAgentRequest(name="rising", replicas=3), timeout=30
        ).agent
        states = processes(scaled)
        assert (states[1][0], states[2][0]) == ("STARTING", "STARTING"), states
        assert state_name(scaled.info.state) == "RUNNING", scaled.info

        (folder / "go").write_text("")
        seen = by_replica(events_until(host, "rising", after=0, last=all_running(3)))
        assert [state_name(e.state) for e in seen.pop(-1)] == ["INSTALLING"], seen
        assert sorted(seen) == [0, 1, 2], seen
        for events in seen.values():
            assert_started_once(events)
    finally:
        (folder / "go").write_text("")  # a replica still waiting would hold up its stop
        remove_agent(host, "rising")


def test_a_replica_waiting_for_its_predecessor_shows_starting(host: HostProcess) -> None:
    """Replica 1 of the rogue agent ignores the shutdown frame and SIGTERM, so a scale down to
    1 takes stop_grace + 3 s to end it; a scale back to 2 meanwhile answers at once with the
    new replica 1 STARTING (pid 0: it is spawned only once the old one is down). Its events
    then are the old process's STOPPED, and one spawn, from STARTING, with a new pid."""
    name = deploy(
        host,
        ROGUE,
        name="waiting",
        replicas=2,
        env={"ROGUE_LINGER": "1", "ROGUE_IGNORE_TERM": "1"},
        stop_grace=seconds(5),
    )
    try:
        old = next(p.pid for p in agent_processes(host, name) if p.replica == 1)
        down = host.supervisor.ScaleAgent.future(
            supervisor_pb2.ScaleAgentRequest(name=name, replicas=1), timeout=60
        )
        events_until(
            host,
            name,
            after=0,
            last=lambda e: e.replica == 1 and state_name(e.state) == "STOPPING",
        )
        down.cancel()  # its stop goes on
        up = host.supervisor.ScaleAgent(
            supervisor_pb2.ScaleAgentRequest(name=name, replicas=2), timeout=60
        ).agent
        os.kill(old, 0)  # not reaped yet: the new replica 1 cannot have been spawned
        assert processes(up)[1] == ("STARTING", 0), processes(up)
        assert state_name(up.info.state) == "RUNNING", up.info

        after = events_until(
            host,
            name,
            after=up.event_sequence,
            last=lambda e: e.replica == 1 and state_name(e.state) == "RUNNING",
        )
        ended, *new = by_replica(after)[1]
        assert (state_name(ended.state), state_name(ended.previous_state)) == (
            "STOPPED",
            "STOPPING",
        ), ended
        assert_started_once(new)
        assert new[0].pid != old
    finally:
        host.supervisor.StopAgent(
            supervisor_pb2.StopAgentRequest(name=name, grace=seconds(0)), timeout=60
        )
        remove_agent(host, name)


def test_scaling_a_stopped_agent_keeps_its_replicas_stopped(host: HostProcess) -> None:
    """ScaleAgent of a stopped agent answers with the count wanted and its one replica still
    STOPPED, adds none and makes no event: after the stop's, this agent's next event is the
    install of the StartAgent that follows, which then starts the three."""
    name = deploy(host, ROGUE, name="parked")
    try:
        stopped = host.supervisor.StopAgent(
            supervisor_pb2.StopAgentRequest(name=name), timeout=60
        ).agent
        scaled = host.supervisor.ScaleAgent(
            supervisor_pb2.ScaleAgentRequest(name=name, replicas=3), timeout=30
        ).agent
        assert scaled.spec.replicas == 3
        assert processes(scaled) == {0: ("STOPPED", 0)}, processes(scaled)
        assert state_name(scaled.info.state) == "STOPPED", scaled.info
        assert [state_name(p.state) for p in agent_processes(host, name)] == ["STOPPED"]

        host.supervisor.StartAgent(supervisor_pb2.StartAgentRequest(name=name), timeout=60)
        seen = by_replica(
            events_until(host, name, after=stopped.event_sequence, last=all_running(3))
        )
        assert [state_name(e.state) for e in seen.pop(-1)] == ["INSTALLING"], seen
        assert sorted(seen) == [0, 1, 2], seen
        for events in seen.values():
            assert_started_once(events)
    finally:
        remove_agent(host, name)


def agent_processes(host: HostProcess, name: str) -> list[supervisor_pb2.ProcessInfo]:
    listed = host.supervisor.ListProcesses(
        supervisor_pb2.ListProcessesRequest(agent=name), timeout=10
    )
    return list(listed.processes)
