"""Every change to an agent shows in the very next ListAgents and GetAgent.

The host keeps each agent's directory entry encoded between calls and makes it again when the
agent's revision moves (transport/agent_entries.py), reading only the load and readiness live:
a change that does not move the revision would be answered stale. Each step below lists the
agent first, so the entry is kept, then changes it and reads the directory once, with no wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import deploy, until
from tests.support.calls import agent_input
from tests.support.host import HostProcess

NAME = "changing"
MANIFEST = f'name = "{NAME}"\nlanguage = "python"\n'
AGENT = """
import asyncio

from ether_agent import Agent

agent = Agent("{name}", version="{version}", description="{description}")


@agent.action(description="Sleeps ms milliseconds.")
async def nap(ms: int) -> dict:
    await asyncio.sleep(ms / 1000)
    return {{"slept": ms}}
"""


def _folder(parent: Path, version: str, description: str) -> Path:
    folder = parent / f"{NAME}-{version}"
    folder.mkdir()
    (folder / "agent.toml").write_text(MANIFEST)
    text = AGENT.format(name=NAME, version=version, description=description)
    (folder / "agent.py").write_text(text)
    return folder


def _listed(host: HostProcess) -> agent_io_pb2.AgentInfo | None:
    listed = host.agents.ListAgents(agent_io_pb2.ListAgentsRequest(page_size=1000), timeout=10)
    return next((a for a in listed.agents if a.name == NAME), None)


def _got(host: HostProcess) -> agent_io_pb2.AgentInfo:
    return host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name=NAME), timeout=10).agent


def _both(host: HostProcess) -> agent_io_pb2.AgentInfo:
    """The agent as ListAgents shows it, checked to be what GetAgent shows too."""
    listed = _listed(host)
    assert listed is not None, f"{NAME} is not listed"
    assert _got(host) == listed
    return listed


def _until(condition: Callable[[], bool], within: float = 60.0) -> None:
    """Ask the host again until ``condition()`` holds: its state, not time, is waited on."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "the host never reached the expected state"


def _remove(host: HostProcess) -> None:
    host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=NAME), timeout=60)


def test_a_stop_a_start_and_a_scale_show_in_the_next_listing(
    host: HostProcess, tmp_path: Path
) -> None:
    """StopAgent, StartAgent and ScaleAgent, each followed by one listing: STOPPED with no
    ready replica once the stop returns, the new replica count once the scale returns, and
    RUNNING again once the start's RUNNING event has come."""
    deploy(host, _folder(tmp_path, "1.0.0", "First."))
    try:
        running = _both(host)
        assert (running.state, running.ready_replicas) == (agent_io_pb2.AGENT_STATE_RUNNING, 1)

        host.supervisor.StopAgent(supervisor_pb2.StopAgentRequest(name=NAME), timeout=60)
        stopped = _both(host)
        assert (stopped.state, stopped.ready_replicas) == (agent_io_pb2.AGENT_STATE_STOPPED, 0)

        scaled = host.supervisor.ScaleAgent(
            supervisor_pb2.ScaleAgentRequest(name=NAME, replicas=2), timeout=60
        )
        assert scaled.agent.info.replicas == 2
        assert _both(host).replicas == 2  # stopped still: only the count wanted moved

        started = host.supervisor.StartAgent(
            supervisor_pb2.StartAgentRequest(name=NAME), timeout=60
        )
        until(host, started.agent, {"RUNNING"}, replica=0)
        until(host, started.agent, {"RUNNING"}, replica=1)
        again = _both(host)
        assert again.state == agent_io_pb2.AGENT_STATE_RUNNING
        assert (again.replicas, again.ready_replicas) == (2, 2)
    finally:
        _remove(host)


def test_a_task_in_flight_shows_while_it_runs_and_not_after(
    host: HostProcess, tmp_path: Path
) -> None:
    """The load is live: a running task shows as in_flight 1, and 0 again once it has
    answered, though nothing else about the agent changed in between."""
    deploy(host, _folder(tmp_path, "1.0.0", "First."))
    try:
        assert _both(host).in_flight == 0
        nap = agent_io_pb2.ExecuteRequest(input=agent_input(NAME, "nap", {"ms": 3000}))
        running = host.agents.Execute.future(nap, timeout=60)
        _until(lambda: _both(host).in_flight == 1)
        assert running.result().output.status == agent_io_pb2.TASK_STATUS_SUCCESS
        assert _both(host).in_flight == 0
    finally:
        _remove(host)


def test_a_removed_and_redeployed_agent_shows_as_it_is_now(
    host: HostProcess, tmp_path: Path
) -> None:
    """Once RemoveAgent returns, the next listing no longer has the agent and GetAgent does
    not find it; deployed again under the same name with a new version and description, the
    next listing shows those, not the removed agent's."""
    deploy(host, _folder(tmp_path, "1.0.0", "First."))
    first = _both(host)
    assert (first.version, first.description) == ("1.0.0", "First.")

    _remove(host)
    assert _listed(host) is None
    with pytest.raises(grpc.RpcError) as error:
        _got(host)
    assert error.value.code() == grpc.StatusCode.NOT_FOUND

    deploy(host, _folder(tmp_path, "2.0.0", "Second."))
    try:
        second = _both(host)
        assert (second.version, second.description) == ("2.0.0", "Second.")
        assert (second.state, second.ready_replicas) == (agent_io_pb2.AGENT_STATE_RUNNING, 1)
        assert [a.name for a in second.actions] == ["nap"]
    finally:
        _remove(host)
