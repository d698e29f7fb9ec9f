"""The README's commands, run verbatim against a real host (only the address changes).

The grpcurl walk-through (between the `walkthrough` markers) must print what the README
promises; the agent calls (between the `agents` markers) must succeed with the example agents
they name deployed (scout, and whatever else the README calls)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ether.v1.agent_io_pb2 import ListAgentsRequest
from tests.support.agents import EXAMPLES, deploy
from tests.support.host import ROOT, TOOLS

from ._support import (
    ETHER_SERVICES,
    HEALTH,
    README,
    README_ADDRESS,
    REFLECTION,
    Host,
    readme_commands,
)


def run_shell(command: str, address: str) -> subprocess.CompletedProcess[str]:
    """Run a README command as a user would in the repository, with grpcurl on PATH and the
    test host's address instead of the default one."""
    assert README_ADDRESS in command, f"README command does not name {README_ADDRESS}: {command}"
    env = os.environ | {"PATH": f"{TOOLS}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(
        ["bash", "-c", command.replace(README_ADDRESS, address)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
        check=False,
    )
    # grpcurl exits 0 when it cannot render a response (say a Value with no kind): catch it here.
    assert "Failed to format" not in result.stdout + result.stderr, f"{command}\n{result.stdout}"
    return result


@pytest.fixture(scope="module")
def readme_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    """A host run from the repository root, like `make run`."""
    state = tmp_path_factory.mktemp("readme-state")
    # Go builds reuse the build cache the conformance suite shares (safe for concurrent use):
    # without it each run compiles the Go example cold (~10 s). Only speed depends on this.
    shared = Path(tempfile.gettempdir()) / "ether-gocache"
    shared.mkdir(exist_ok=True)
    (state / "cache").mkdir()
    (state / "cache" / "go-build").symlink_to(shared)
    # As examples/ether.toml does for `make run`: the sandboxed scout and wordcount may read
    # this checkout, which the README's calls name.
    config = state / "ether.toml"
    config.write_text(
        "".join(
            f'[sandbox.agents.{name}]\nread_only = ["{ROOT}"]\n' for name in ("scout", "wordcount")
        )
    )
    process = Host(
        "--listen", "127.0.0.1:0", "--state-dir", str(state), "--log-format", "json",
        "--config", str(config), cwd=ROOT,
    )  # fmt: skip
    try:
        process.wait_serving()
        yield process
    finally:
        assert process.stop() == 0


def test_walkthrough_runs_verbatim(
    readme_host: Host, agent_calls: list[tuple[str, subprocess.CompletedProcess[str]]]
) -> None:
    """list shows the services, describe shows AgentIOService, the health checks say SERVING
    (AgentIO's and scout's own: with the example agents deployed, as `make run` has them)."""
    commands = readme_commands("walkthrough")
    outputs = []
    for command in commands:
        result = run_shell(command, readme_host.address)
        assert result.returncode == 0, f"{command}\n{result.stderr}"
        outputs.append((command, result.stdout))

    kinds = {"list": False, "describe": False, "health": False}
    for command, stdout in outputs:
        if re.search(r"\blist\b", command):
            kinds["list"] = True
            assert {*ETHER_SERVICES, HEALTH, REFLECTION} <= set(stdout.split()), stdout
        elif "describe" in command:
            kinds["describe"] = True
            service = command.split()[-1]
            assert f"{service} is a service:" in stdout
            assert re.search(r"^\s*rpc \w+ \(", stdout, flags=re.MULTILINE), stdout
        elif "grpc.health.v1.Health/Check" in command:
            kinds["health"] = True
            assert json.loads(stdout) == {"status": "SERVING"}
    assert all(kinds.values()), f"the walk-through should list, describe and check health: {kinds}"


@pytest.fixture(scope="module")
def agent_calls(readme_host: Host) -> list[tuple[str, subprocess.CompletedProcess[str]]]:
    """The README's agent calls, run once against the host with the example agents they name
    deployed (what `make run` deploys)."""
    commands = readme_commands("agents")
    names = sorted(
        {name for command in commands for name in re.findall(r'"agent": "([\w-]+)"', command)}
    )
    assert "scout" in names
    for name in names:
        assert (EXAMPLES / name).is_dir(), f"README calls agent {name!r}, not in examples/agents"
        deploy(readme_host, EXAMPLES / name)
    return [(command, run_shell(command, readme_host.address)) for command in commands]


def test_agent_calls_run_verbatim(
    agent_calls: list[tuple[str, subprocess.CompletedProcess[str]]],
) -> None:
    """Every agent call of the README exits 0 and answers for the agent it names."""
    for command, result in agent_calls:
        assert result.returncode == 0, f"{command}\n{result.stderr}"
        if "ListAgents" in command:
            assert '"name": "scout"' in result.stdout
        else:
            agent = re.search(r'"agent": "([\w-]+)"', command)
            assert agent and f'"agent": "{agent.group(1)}"' in result.stdout, (
                f"{command}\n{result.stdout}"
            )


def test_agent_tasks_succeed(
    agent_calls: list[tuple[str, subprocess.CompletedProcess[str]]],
) -> None:
    """The README's tasks succeed (a failed task is not an RPC error: grpcurl still exits 0)."""
    failed = []
    for command, result in agent_calls:
        if "TASK_STATUS_ERROR" in result.stdout or (
            "/Execute" in command and "TASK_STATUS_SUCCESS" not in result.stdout
        ):
            messages = re.findall(r'"message": "([^"]*)"', result.stdout)
            failed.append(f"{command}: {messages}")
    assert not failed, "tasks of the README that do not succeed:\n" + "\n".join(failed)


def test_buf_curl_block_runs_verbatim(
    readme_host: Host, agent_calls: list[tuple[str, subprocess.CompletedProcess[str]]]
) -> None:
    """buf curl, with reflection and with --schema proto, reads scout's directory entry and runs
    a task whose answer counts the README's own lines."""
    get_agent, execute = readme_commands("bufcurl")
    found = run_shell(get_agent, readme_host.address)
    assert found.returncode == 0, f"{get_agent}\n{found.stderr}"
    agent = json.loads(found.stdout)["agent"]
    assert agent["name"] == "scout" and "analyze_file" in {a["name"] for a in agent["actions"]}
    ran = run_shell(execute, readme_host.address)
    assert ran.returncode == 0, f"{execute}\n{ran.stderr}"
    output = json.loads(ran.stdout)["output"]
    assert output["status"] == "TASK_STATUS_SUCCESS", output
    assert output["data"]["lines"] == len(README.read_text(encoding="utf-8").splitlines())


def test_readme_points_here() -> None:
    """The README says which test runs its commands; keep the pointer true."""
    assert f"tests/host/{Path(__file__).name}" in README.read_text(encoding="utf-8")


def test_session_walkthrough_runs_verbatim(readme_host: Host) -> None:
    """The README's session commands (ether chat, a Converse turn, the context, the session
    list) run verbatim against the concierge example and show its answers."""
    for name in ("scout", "concierge"):
        if name not in {
            a.name for a in readme_host.agents.ListAgents(ListAgentsRequest(), timeout=10).agents
        }:
            deploy(readme_host, EXAMPLES / name)
    outputs = []
    for command in readme_commands("sessions"):
        result = run_shell(command, readme_host.address)
        assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
        outputs.append(result.stdout)
    chat, converse, sessions = outputs
    assert "scout" in chat
    assert '"reply"' in converse and '"version"' in converse
    assert '"sessions"' in sessions


def test_terminal_walkthrough_runs_verbatim(readme_host: Host) -> None:
    """The README's terminal commands create bash, run a command, read the screen and close it."""
    [command] = readme_commands("terminals")
    result = run_shell(command, readme_host.address)
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    assert '"$ ls /usr | head -3"' in result.stdout
    assert '"bin"' in result.stdout


def test_cli_block_runs_verbatim(
    readme_host: Host, agent_calls: list[tuple[str, subprocess.CompletedProcess[str]]]
) -> None:
    """The README's `ether` commands, with $ETHER_ADDRESS naming the test host: each exits 0;
    list names the example agents, the calls print JSON, ps, status and top show scout's two
    replicas."""
    env = os.environ | {"ETHER_ADDRESS": readme_host.address}
    outputs = {}
    for command in readme_commands("cli"):
        result = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
        )
        assert result.returncode == 0, f"{command}\n{result.stderr}"
        outputs[command.split()[1] + " " + command.split()[2]] = result.stdout
    assert "scout" in outputs["agents list"] and "wordcount" in outputs["agents list"]
    assert json.loads(outputs["call scout"])  # the survey: the last call to scout
    assert json.loads(outputs["call wordcount"])["files"] > 0
    assert (
        len([line for line in outputs["agents ps"].splitlines() if line.startswith("scout ")]) == 2
    )
    status = json.loads(outputs["status -o"])
    scout = next(agent for agent in status["agents"] if agent["name"] == "scout")
    assert (scout["state"], scout["replicas"], scout["running"]) == ("RUNNING", 2, 2)
    top = [line.split() for line in outputs["top --once"].splitlines()]
    assert ["scout", "RUNNING", "2/2"] in [row[:3] for row in top]
