"""What an agent's sandbox keeps and what it may ask for (docs/agents.md, "The sandbox").

An agent's scratch directory (``<state>/scratch/<agent>/<replica>``, its HOME) is wiped each
time a replica starts -- after RestartAgent and after a crash alike -- unless the host config
says ``[sandbox] keep_scratch = true``; then a file the agent wrote there is still there for
the next process. An agent.toml whose ``[sandbox]`` asks for a ``read_only`` or ``read_write``
path the host config does not give it is refused at deploy: PERMISSION_DENIED, reason
SANDBOX_NOT_ALLOWED, naming the setting and the path; nothing is deployed.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy, state_name, until
from tests.support.calls import agent_input, data, details
from tests.support.host import HostProcess

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (make terminal-tools)"
)

PROBER = AGENTS / "prober"


def probe(host: HostProcess, agent: str, action: str, **params: Any) -> Any:
    """What the prober agent ``agent`` found doing ``action`` inside its sandbox."""
    request = agent_io_pb2.ExecuteRequest(input=agent_input(agent, action, params))
    output = host.agents.Execute(request, timeout=90).output
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    return data(output)


def start_host(folder: Path, config: str) -> HostProcess:
    """A serving host with ``config`` as its host config."""
    path = folder / "ether.toml"
    path.write_text(config)
    host = HostProcess(folder / "state", "--config", str(path))
    host.wait_serving()
    return host


@pytest.fixture(params=[False, True], ids=["wiped", "keep_scratch"])
def keep(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
def scratch_host(tmp_path: Path, keep: bool) -> Iterator[HostProcess]:
    """A host whose config sets ``[sandbox] keep_scratch`` as the test asks, running the
    prober (an agent that writes and reads files from inside its sandbox)."""
    setting = "true" if keep else "false"
    host = start_host(tmp_path, f"[sandbox]\nkeep_scratch = {setting}\n")
    try:
        deploy(host, PROBER)
        yield host
    finally:
        host.stop()


def restarted_after_kill(host: HostProcess, after: int) -> supervisor_pb2.WatchEventsResponse:
    """SIGKILL the prober's process (the pid ListProcesses reports) and follow its events
    from ``after`` until a new process of replica 0 runs."""
    listed = host.supervisor.ListProcesses(
        supervisor_pb2.ListProcessesRequest(agent="prober"), timeout=10
    )
    pid = listed.processes[0].pid
    assert pid > 0  # never os.kill(0, ...): that is our own process group
    os.kill(pid, signal.SIGKILL)
    stream = host.supervisor.WatchEvents(
        supervisor_pb2.WatchEventsRequest(agent="prober", after_sequence=after), timeout=120
    )
    try:
        for event in stream:
            if state_name(event.state) == "FATAL":
                raise AssertionError(f"prober went FATAL after SIGKILL: {event.reason}")
            if state_name(event.state) == "RUNNING" and event.replica == 0 and event.pid != pid:
                return event
    finally:
        stream.cancel()
    raise AssertionError("prober never ran again after SIGKILL")


def test_a_replicas_scratch_is_wiped_at_each_start_unless_kept(
    scratch_host: HostProcess, tmp_path: Path, keep: bool
) -> None:
    """A file the agent writes into its scratch directory (its HOME) is gone once the replica
    starts again -- after RestartAgent and after its process was killed and restarted by the
    host -- unless the host config says keep_scratch = true, when it is still there for the
    agent (and on the host, under the state directory)."""
    scratch = (tmp_path / "state").absolute() / "scratch" / "prober" / "0"
    home = probe(scratch_host, "prober", "look")["env"]["HOME"]
    assert home == str(scratch)
    marker = f"{home}/marker.txt"
    missing = {"ok": False, "error": "FileNotFoundError"}

    # Restarted by the operator.
    assert probe(scratch_host, "prober", "write", path=marker)["ok"]
    assert probe(scratch_host, "prober", "read", path=marker)["ok"]
    assert (scratch / "marker.txt").is_file()  # the host sees what the agent wrote
    restarted = scratch_host.supervisor.RestartAgent(
        supervisor_pb2.RestartAgentRequest(name="prober"), timeout=60
    )
    running = until(scratch_host, restarted.agent, {"RUNNING"}, replica=0)
    after_restart = probe(scratch_host, "prober", "read", path=marker)
    if keep:
        assert after_restart["ok"], after_restart
        assert (scratch / "marker.txt").is_file()
    else:
        assert after_restart == missing
        assert not (scratch / "marker.txt").exists()
        assert scratch.is_dir()  # wiped, not taken away: the agent still writes there

    # Restarted by the host after the process was killed.
    assert probe(scratch_host, "prober", "write", path=marker)["ok"]
    restarted_after_kill(scratch_host, after=running.sequence)
    after_crash = probe(scratch_host, "prober", "read", path=marker)
    if keep:
        assert after_crash["ok"], after_crash
        assert (scratch / "marker.txt").is_file()
    else:
        assert after_crash == missing
        assert not (scratch / "marker.txt").exists()
    assert probe(scratch_host, "prober", "look")["env"]["HOME"] == str(scratch)


@pytest.mark.parametrize("key", ["read_only", "read_write"])
def test_an_agent_toml_asking_for_a_path_the_host_does_not_grant_is_refused(
    tmp_path: Path, key: str
) -> None:
    """An agent.toml asking for a path in [sandbox] read_only / read_write that the host
    config does not list is refused at deploy with PERMISSION_DENIED and reason
    SANDBOX_NOT_ALLOWED, naming the setting and the path; nothing is deployed. The same agent
    asking for a path the host does list is deployed and sees it."""
    granted = tmp_path / "granted"
    granted.mkdir()
    (granted / "shared.txt").write_text("shared with agents\n")
    secret = tmp_path / "secret"  # exists, but the host config does not list it
    secret.mkdir()
    (secret / "private.txt").write_text("not for agents\n")

    def agent_asking_for(path: Path, name: str) -> Path:
        folder = tmp_path / name
        shutil.copytree(PROBER, folder)
        with (folder / "agent.toml").open("a") as manifest:
            manifest.write(f'\n[sandbox]\n{key} = ["{path}"]\n')
        return folder

    host = start_host(tmp_path, f'[sandbox]\n{key} = ["{granted}"]\n')
    try:
        with pytest.raises(grpc.RpcError) as refused:
            deploy(host, agent_asking_for(secret, "greedy"), name="greedy", wait=False)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert details(refused.value)["ErrorInfo"].reason == "SANDBOX_NOT_ALLOWED"
        message = refused.value.details() or ""
        assert f"agent.toml sandbox.{key}" in message, message
        assert str(secret) in message, message
        listed = host.agents.ListAgents(agent_io_pb2.ListAgentsRequest(), timeout=10)
        assert "greedy" not in [agent.name for agent in listed.agents]

        deploy(host, agent_asking_for(granted, "modest"), name="modest")
        seen = probe(host, "modest", "read", path=str(granted / "shared.txt"))
        assert seen["ok"], seen
        assert probe(host, "modest", "read", path=str(secret / "private.txt")) == {
            "ok": False,
            "error": "FileNotFoundError",
        }
    finally:
        host.stop()
