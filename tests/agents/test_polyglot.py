"""Go and TypeScript agents are first-class: built by the host, called over gRPC, and calling
each other through the host."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, EXAMPLES, deploy, state_name, watch_until
from tests.support.calls import data, execute
from tests.support.host import ROOT, HostProcess
from tests.support.procs import thread_policies


@pytest.fixture(scope="module", autouse=True)
def agents(host: HostProcess) -> None:
    for name in ("scout", "wordcount", "report"):
        deploy(host, EXAMPLES / name)


def test_go_agent_counts_words(host: HostProcess) -> None:
    output = execute(
        host, "wordcount", "count_text", {"text": "the cat sat on the mat with the cat"}
    )
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    counts = data(output)
    assert counts["words"] == 9
    assert {"term": "cat", "count": 2} in counts["top_terms"]
    info = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name="wordcount"), timeout=10).agent
    assert info.language == 2  # LANGUAGE_GO


def test_typescript_agent_renders_markdown(host: HostProcess) -> None:
    output = execute(
        host,
        "report",
        "render",
        {
            "title": "Audit",
            "findings": [
                {"title": "Hard-coded token", "severity": "high", "file": "a.py"},
            ],
        },
    )
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    assert "# Audit" in data(output)["markdown"]
    assert "Hard-coded token" in data(output)["markdown"]


def test_python_agent_calls_go_and_typescript(host: HostProcess) -> None:
    """scout (Python) -> wordcount (Go) and report (TypeScript), through the host."""
    output = execute(host, "scout", "survey", {"path": str(ROOT / "proto")}, timeout=60)
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    result = data(output)
    assert result["markdown"].startswith("# Survey of proto")
    assert result["words"] > 1000
    assert "files in proto" in result["markdown"]


def test_compile_error_is_fatal_with_the_compilers_message(host: HostProcess) -> None:
    response = host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(path=str(AGENTS / "broken_go"))
        ),
        timeout=30,
    )
    event = watch_until(host, "brokengo", {"FATAL", "RUNNING"}, after=response.agent.event_sequence)
    assert state_name(event.state) == "FATAL"
    assert "go build failed" in event.reason
    assert "undefinedFunction" in event.reason


def test_agent_that_never_says_hello_fails_with_its_stderr(host: HostProcess) -> None:
    response = host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(path=str(AGENTS / "silent_go"))
        ),
        timeout=30,
    )
    event = watch_until(host, "silentgo", {"FATAL", "RUNNING"}, after=response.agent.event_sequence)
    assert state_name(event.state) == "FATAL"
    assert "no hello within 1s" in event.reason
    assert any("do not speak the protocol" in line for line in event.stderr_tail)


def test_a_go_agent_builds_and_runs_under_a_host_without_home(tmp_path: Path) -> None:
    """A host started by a service manager may have no HOME (nor GOCACHE): the Go build gets
    both inside the state directory, and the agent runs and answers."""
    state = tmp_path / "state"
    host = HostProcess(state, unset=("HOME", "GOCACHE", "GOPATH", "XDG_CACHE_HOME"))
    try:
        host.wait_serving()
        deploy(host, EXAMPLES / "wordcount")
        output = execute(host, "wordcount", "count_text", {"text": "no home no home"})
        assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
        assert data(output)["words"] == 4
        assert any((state / "cache" / "go-build").iterdir())
        listed = host.supervisor.ListProcesses(
            supervisor_pb2.ListProcessesRequest(agent="wordcount"), timeout=10
        ).processes
        environ = Path(f"/proc/{listed[0].pid}/environ").read_bytes().split(b"\0")
        # In its sandbox an agent's HOME is its private scratch directory (docs/agents.md).
        assert f"HOME={state.absolute() / 'scratch' / 'wordcount' / '0'}".encode() in environ
    finally:
        host.stop()


def test_a_typescript_agent_builds_under_a_host_with_node_env_production(tmp_path: Path) -> None:
    """NODE_ENV=production in the host's environment (common on servers) would make `npm ci`
    skip devDependencies, tsc among them; the host does not pass it on, so a fresh copy of the
    report agent installs, compiles and answers."""
    # The same depth as in the repository: its file: dependency is ../../../adapters.
    folder = tmp_path / "examples" / "agents" / "report"
    shutil.copytree(
        EXAMPLES / "report",
        folder,
        ignore=shutil.ignore_patterns("node_modules", "dist", ".ether*"),
    )
    (tmp_path / "adapters").symlink_to(ROOT / "adapters")
    host = HostProcess(tmp_path / "state", env={"NODE_ENV": "production"})
    try:
        host.wait_serving()
        deploy(host, folder, name="report-prod")
        output = execute(host, "report-prod", "render", {"title": "Prod", "findings": []})
        assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
        assert data(output)["markdown"].startswith("# Prod")
        assert (folder / "node_modules" / ".bin" / "tsc").exists()
    finally:
        host.stop()


def _thread_policies(host: HostProcess, name: str) -> set[int]:
    listed = host.supervisor.ListProcesses(
        supervisor_pb2.ListProcessesRequest(agent=name), timeout=10
    )
    return set(thread_policies(listed.processes[0].pid).values())


def test_agents_in_every_language_run_under_the_batch_cpu_policy(host: HostProcess) -> None:
    """Every thread of a Python, Go and TypeScript agent is SCHED_BATCH by default, including
    the threads their runtimes start before hello and the ones they start while working, so a
    frame written to an agent never preempts the host in the middle of a burst."""
    output = execute(host, "wordcount", "count_text", {"text": "threads " * 5000})
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    for name in ("scout", "wordcount", "report"):
        assert _thread_policies(host, name) == {os.SCHED_BATCH}, name
