"""agent.toml is the user's TOML: a key of the wrong kind (a number where a list belongs, a string
where a table does) is refused naming the key, never taken apart or crashed on. Through
DeployAgent it is INVALID_ARGUMENT with the key as the BadRequest field; in a host's
``agents_dir`` the host starts all the same, logs ``agent not deployed`` naming the key, runs the
other agents, and is not ready until that one runs (docs/health.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import grpc
import httpx
import pytest

from ether.v1 import supervisor_pb2
from tests.support.agents import AGENTS, watch_until
from tests.support.calls import details
from tests.support.host import HostProcess

ROGUE = AGENTS / "rogue"


def folder_with(root: Path, name: str, line: str) -> Path:
    """The rogue agent's folder under ``name``, its agent.toml given one more ``line``."""
    folder = root / name
    shutil.copytree(ROGUE, folder)
    manifest = folder / "agent.toml"
    kept = [k for k in manifest.read_text().splitlines() if not k.startswith(("name", "command"))]
    command = [] if line.startswith("command") else ['command = ["python3", "rogue.py"]']
    manifest.write_text("\n".join([*kept, *command, line]) + "\n")
    return folder


@pytest.mark.parametrize(
    ("line", "key", "problem"),
    [
        ("command = 42", "command", "is not a list of strings"),
        ('capabilities = "filesystem"', "capabilities", "is not a list of strings"),
        ("calls = [[1]]", "calls", "is not a list of strings"),
        ('env = "LEVEL=debug"', "env", "is not a table"),
        ("config = [1, 2]", "config", "is not a table"),
        # 44 arrays in a table in the config table: 3 + 3 + 88 protobuf levels, past the 90 a
        # Struct may take in GetAgent's answer (docs/limits.md)
        ("config = {deep = " + "[" * 44 + "]" * 44 + "}", "config", "nests tables and arrays"),
    ],
)
def test_a_key_of_the_wrong_kind_is_refused_naming_it(
    host: HostProcess, tmp_path: Path, line: str, key: str, problem: str
) -> None:
    folder = folder_with(tmp_path, f"kind-{key}", line)
    request = supervisor_pb2.DeployAgentRequest(spec=supervisor_pb2.AgentSpec(path=str(folder)))
    with pytest.raises(grpc.RpcError) as refused:
        host.supervisor.DeployAgent(request, timeout=30)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.value
    [violation] = details(refused.value)["BadRequest"].field_violations
    assert violation.field == f"agent.toml {key}", violation
    assert problem in violation.description, violation


def test_a_bad_agents_dir_folder_leaves_the_host_up_and_not_ready(tmp_path: Path) -> None:
    """``command = 42`` in one folder of agents_dir: the host serves, logs the refusal naming
    `command`, runs the good agent, and /readyz names the refused one (503) until an agent of
    that name is deployed (the folder mended, then DeployAgent), and not again once that agent
    is removed (docs/health.md: waited for "until an agent of that name is deployed")."""
    agents = tmp_path / "agents"
    agents.mkdir()
    folder_with(agents, "broken", "command = 42")
    folder_with(agents, "good", "")
    host = HostProcess(tmp_path / "state", "--agents-dir", str(agents), http=True)
    try:
        host.wait_serving()
        refusal = host.wait_for_log(lambda r: r.get("event") == "agent not deployed")
        assert refusal["path"].endswith("/broken"), refusal
        assert refusal["error"].startswith("agent.toml command: 42 is not a list"), refusal
        watch_until(host, "good", {"RUNNING"})
        with httpx.Client(base_url=host.http_address, timeout=30) as client:
            ready = client.get("/readyz")
            assert ready.status_code == 503, ready.text
            assert ready.json()["waiting_for"] == ["broken"], ready.json()
            mended = (agents / "good" / "agent.toml").read_text()  # names no agent: the folder's
            (agents / "broken" / "agent.toml").write_text(mended)
            spec = supervisor_pb2.AgentSpec(path=str(agents / "broken"))
            host.supervisor.DeployAgent(supervisor_pb2.DeployAgentRequest(spec=spec), timeout=30)
            watch_until(host, "broken", {"RUNNING"})
            assert client.get("/readyz").status_code == 200
            remove = supervisor_pb2.RemoveAgentRequest(name="broken")
            host.supervisor.RemoveAgent(remove, timeout=60)
            assert client.get("/readyz").status_code == 200
    finally:
        assert host.stop() == 0


def test_a_folders_name_is_folded_to_an_agents_name(host: HostProcess, tmp_path: Path) -> None:
    """Without a `name`, the folder's is used, lower-cased with dots as dashes (docs/agents.md):
    `My.Agent` runs as `my-agent`."""
    folder = folder_with(tmp_path, "My.Agent", "")
    request = supervisor_pb2.DeployAgentRequest(spec=supervisor_pb2.AgentSpec(path=str(folder)))
    deployed = host.supervisor.DeployAgent(request, timeout=30)
    try:
        assert deployed.agent.info.name == "my-agent"
    finally:
        remove = supervisor_pb2.RemoveAgentRequest(name=deployed.agent.info.name)
        host.supervisor.RemoveAgent(remove, timeout=60)
