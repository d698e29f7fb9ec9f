"""The directory follows the agent: the host keeps each agent's AgentInfo encoded between
ListAgents calls (transport/agent_entries.py), and an agent whose code changed and restarted
must show its new actions and version, and one scaled its new replica count, not the kept
ones."""

from __future__ import annotations

from pathlib import Path

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import deploy, until
from tests.support.host import HostProcess

MANIFEST = 'name = "shifting"\nlanguage = "python"\n'

AGENT = """
from ether_agent import Agent

agent = Agent("shifting", version="{version}")


@agent.action(description="{description}")
def {action}(count: int) -> dict:
    return {{"count": count}}
"""


def _write(folder: Path, action: str, version: str) -> None:
    text = AGENT.format(action=action, version=version, description=f"The {action} action.")
    (folder / "agent.py").write_text(text)


def _listed(host: HostProcess) -> agent_io_pb2.AgentInfo:
    listed = host.agents.ListAgents(agent_io_pb2.ListAgentsRequest(page_size=1000), timeout=10)
    return next(a for a in listed.agents if a.name == "shifting")


def test_list_and_get_show_the_actions_of_the_agents_new_code(
    host: HostProcess, tmp_path: Path
) -> None:
    """ListAgents and GetAgent show the actions an agent declared in its latest hello: after
    its code changes and RestartAgent, the old action is gone and the new one is listed, with
    its schema."""
    folder = tmp_path / "shifting"
    folder.mkdir()
    (folder / "agent.toml").write_text(MANIFEST)
    _write(folder, "before", "1.0.0")
    deploy(host, folder)
    try:
        first = _listed(host)
        assert [a.name for a in first.actions] == ["before"]
        assert first.version == "1.0.0"
        assert _listed(host).actions[0].description == "The before action."  # listed twice

        _write(folder, "after", "2.0.0")
        restarted = host.supervisor.RestartAgent(
            supervisor_pb2.RestartAgentRequest(name="shifting"), timeout=30
        )
        until(host, restarted.agent, {"RUNNING"})

        listed = _listed(host)
        assert [a.name for a in listed.actions] == ["after"]
        assert listed.version == "2.0.0"
        schema = dict(listed.actions[0].params_schema)
        assert schema["properties"]["count"]["type"] == "integer"
        got = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name="shifting"), timeout=10)
        assert [a.name for a in got.agent.actions] == ["after"]
    finally:
        host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name="shifting"), timeout=60)


def test_list_shows_a_scaled_agents_replicas_and_their_readiness(
    host: HostProcess, tmp_path: Path
) -> None:
    """After ScaleAgent from one replica to two, ListAgents shows 2 replicas, and 2 ready once
    the second runs; a listing before the scale does not linger."""
    folder = tmp_path / "shifting"
    folder.mkdir()
    (folder / "agent.toml").write_text(MANIFEST)
    _write(folder, "only", "1.0.0")
    deploy(host, folder)
    try:
        before = _listed(host)
        assert (before.replicas, before.ready_replicas) == (1, 1)
        scaled = host.supervisor.ScaleAgent(
            supervisor_pb2.ScaleAgentRequest(name="shifting", replicas=2), timeout=30
        )
        assert _listed(host).replicas == 2
        until(host, scaled.agent, {"RUNNING"}, replica=1)
        after = _listed(host)
        assert (after.replicas, after.ready_replicas) == (2, 2)
        assert after.state == agent_io_pb2.AGENT_STATE_RUNNING
    finally:
        host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name="shifting"), timeout=60)
