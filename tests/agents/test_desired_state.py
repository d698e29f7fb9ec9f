"""Deployed agents are desired state: what DeployAgent, ScaleAgent, StopAgent, StartAgent and
RemoveAgent left is deployed again by a host restarted on the same state directory (after a
SIGTERM or a kill -9); the host config's agents win over recorded ones of the same name; an
agent whose folder went away between runs comes back FATAL with the reason."""

from __future__ import annotations

import shutil
from pathlib import Path

import grpc
import pytest
from google.protobuf import duration_pb2

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy, state_name, until, watch_until
from tests.support.calls import data, execute, struct
from tests.support.host import HostProcess
from tests.workflows.test_restart import restart

WORKER = AGENTS / "worker"
STOPS = pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "kill-9"])


def listed(host: HostProcess) -> dict[str, agent_io_pb2.AgentInfo]:
    response = host.agents.ListAgents(agent_io_pb2.ListAgentsRequest(), timeout=10)
    return {agent.name: agent for agent in response.agents}


def running(host: HostProcess, agent: str, replicas: int) -> None:
    """Wait until every replica of ``agent`` has run on this host (events from its start)."""
    for index in range(replicas):
        watch_until(host, agent, {"RUNNING"}, replica=index)


def environment(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def scale(host: HostProcess, agent: str, replicas: int) -> supervisor_pb2.AgentStatus:
    request = supervisor_pb2.ScaleAgentRequest(name=agent, replicas=replicas)
    return host.supervisor.ScaleAgent(request, timeout=60).agent


@STOPS
def test_deployed_scaled_stopped_and_removed_agents_come_back_as_left(
    tmp_path: Path, kill: bool
) -> None:
    """alpha (deployed with 2 replicas, env, config and tunables, then scaled to 3) runs again
    with 3 replicas and the same resolved spec; beta (stopped) comes back stopped; gamma
    (removed) does not come back. Execute reaches alpha with no redeploy."""
    host = HostProcess(tmp_path / "state")
    try:
        host.wait_serving()
        deploy(
            host,
            WORKER,
            name="alpha",
            replicas=2,
            env={"ALPHA_MARK": "kept"},
            config=struct({"colour": "blue"}),
            restart=supervisor_pb2.RESTART_POLICY_ALWAYS,
            stop_grace=duration_pb2.Duration(seconds=1),
            max_restarts=7,
        )
        deploy(host, WORKER, name="beta")
        beta = host.supervisor.StopAgent(
            supervisor_pb2.StopAgentRequest(name="beta"), timeout=60
        ).agent
        deploy(host, WORKER, name="gamma")
        host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name="gamma"), timeout=60)
        alpha = scale(host, "alpha", 3)
        assert alpha.spec.replicas == 3

        host = restart(host, kill=kill)
        running(host, "alpha", 3)
        agents = listed(host)
        assert sorted(agents) == ["alpha", "beta"]
        assert state_name(agents["beta"].state) == "STOPPED"
        assert state_name(agents["alpha"].state) == "RUNNING"
        assert agents["alpha"].replicas == 3
        assert scale(host, "alpha", 3).spec == alpha.spec  # the resolved spec, defaults and all
        again = host.supervisor.StopAgent(supervisor_pb2.StopAgentRequest(name="beta"), timeout=60)
        assert again.agent.spec == beta.spec and not again.agent.processes

        processes = host.supervisor.ListProcesses(
            supervisor_pb2.ListProcessesRequest(agent="alpha"), timeout=10
        ).processes
        assert sorted(p.replica for p in processes) == [0, 1, 2]
        assert all(environment(p.pid).get("ALPHA_MARK") == "kept" for p in processes)
        assert data(execute(host, "alpha", "echo", {"n": 1})) == {"n": 1}
        with pytest.raises(grpc.RpcError) as error:
            execute(host, "gamma", "echo", {})
        assert error.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        host.stop()


def test_the_host_config_wins_over_a_recorded_agent_of_the_same_name(tmp_path: Path) -> None:
    """A recorded `alpha` is replaced by the config file's `alpha` at start (and forgotten);
    what is done to a config agent is not recorded; a deployed `solo` still comes back."""
    state = tmp_path / "state"
    config = tmp_path / "ether.toml"
    config.write_text(
        f'[[agents]]\npath = "{WORKER}"\nname = "alpha"\nenv = {{ ALPHA_MARK = "file" }}\n'
    )
    host = HostProcess(state)
    try:
        host.wait_serving()
        deploy(host, WORKER, name="alpha", replicas=2, env={"ALPHA_MARK": "deployed"})
        assert host.stop() == 0

        host = HostProcess(state, "--config", str(config))
        host.wait_serving()
        running(host, "alpha", 1)
        host.wait_for_log(
            lambda r: r.get("event") == "recorded agent replaced by the host config's"
        )
        (process,) = host.supervisor.ListProcesses(
            supervisor_pb2.ListProcessesRequest(agent="alpha"), timeout=10
        ).processes
        assert environment(process.pid).get("ALPHA_MARK") == "file"
        assert scale(host, "alpha", 2).spec.env["ALPHA_MARK"] == "file"
        deploy(host, WORKER, name="solo", wait=False)
        assert host.stop() == 0

        host = HostProcess(state)  # without the config: its alpha was never recorded
        host.wait_serving()
        assert sorted(listed(host)) == ["solo"]
    finally:
        host.stop()


def test_an_agent_whose_folder_went_away_comes_back_fatal(tmp_path: Path) -> None:
    """A recorded agent whose folder is gone at start is FATAL with the reason; the host and
    the other agents run; once the folder is back, StartAgent runs it."""
    folder = tmp_path / "moving"
    shutil.copytree(WORKER, folder, ignore=shutil.ignore_patterns("__pycache__"))
    host = HostProcess(tmp_path / "state")
    try:
        host.wait_serving()
        deploy(host, folder, name="moving")
        deploy(host, WORKER, name="steady")
        assert host.stop() == 0
        shutil.move(folder, tmp_path / "elsewhere")

        host = HostProcess(tmp_path / "state")
        host.wait_serving()
        event = watch_until(host, "moving", {"FATAL", "RUNNING"})
        assert state_name(event.state) == "FATAL"
        assert f"the agent folder {folder} is gone" in event.reason
        running(host, "steady", 1)
        assert data(execute(host, "steady", "echo", {"up": True})) == {"up": True}
        with pytest.raises(grpc.RpcError) as error:
            execute(host, "moving", "echo", {})
        assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION

        shutil.move(tmp_path / "elsewhere", folder)
        started = host.supervisor.StartAgent(
            supervisor_pb2.StartAgentRequest(name="moving"), timeout=60
        ).agent
        until(host, started, {"RUNNING"})
        assert data(execute(host, "moving", "echo", {"n": 2})) == {"n": 2}
    finally:
        host.stop()
