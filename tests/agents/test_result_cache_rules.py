"""What the result cache keys and keeps (docs/agents.md, "The result cache"): an agent's new
`version` starts with an empty cache, so the same params run again after a redeploy with a new
version, while a redeploy at the same version is still answered from the cache; and only
SUCCESS results are kept: a PARTIAL result of a cached action runs again every time."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import data, execute
from tests.support.host import HostProcess

CACHED = AGENTS / "cached"  # version 1.0.0, `draw` kept an hour (tests/agents/cached)
SHIPPED_VERSION = "1.0.0"


def _cached_at(parent: Path, version: str) -> Path:
    """A copy of the cached agent whose code says ``version`` (the version its hello sends)."""
    folder = parent / f"cached-{version}"
    shutil.copytree(CACHED, folder)
    code = folder / "agent.py"
    shipped = f'version="{SHIPPED_VERSION}"'
    assert shipped in code.read_text(), "the cached test agent no longer declares its version"
    code.write_text(code.read_text().replace(shipped, f'version="{version}"'))
    return folder


def _redeploy(host: HostProcess, folder: Path) -> None:
    """Remove the deployed ``cached`` agent and deploy ``folder`` under that name, running."""
    host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name="cached"), timeout=60)
    deploy(host, folder)


def _version(host: HostProcess, name: str) -> str:
    got = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name=name), timeout=10)
    return str(got.agent.version)


def _draw(host: HostProcess, topic: str) -> agent_io_pb2.AgentOutput:
    output = execute(host, "cached", "draw", {"topic": topic})
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output
    return output


@pytest.fixture
def cached(host: HostProcess) -> Iterator[None]:
    """The cached agent as shipped (version 1.0.0); removed after the test, whatever version it
    was redeployed at."""
    deploy(host, CACHED)
    try:
        yield
    finally:
        host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name="cached"), timeout=60)


@pytest.fixture(scope="module")
def halfway(host: HostProcess) -> Iterator[None]:
    deploy(host, AGENTS / "halfway")
    try:
        yield
    finally:
        host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name="halfway"), timeout=60)


@pytest.mark.usefixtures("cached")
def test_a_new_agent_version_runs_the_same_params_again(host: HostProcess, tmp_path: Path) -> None:
    """After a redeploy with a new version, a call with params the old version's answer is
    cached for is run by the new code (a fresh result, not marked cached), and that result is
    then the new version's cached answer."""
    first = _draw(host, "upgrade")
    hit = _draw(host, "upgrade")
    assert not first.metadata.cached
    assert hit.metadata.cached and data(hit) == data(first)  # the cache is on for `draw`

    _redeploy(host, _cached_at(tmp_path, "2.0.0"))
    assert _version(host, "cached") == "2.0.0"

    upgraded = _draw(host, "upgrade")
    assert not upgraded.metadata.cached
    assert data(upgraded)["nonce"] != data(first)["nonce"]  # the new code ran
    assert upgraded.metadata.pid != first.metadata.pid
    again = _draw(host, "upgrade")
    assert again.metadata.cached and data(again) == data(upgraded)


@pytest.mark.usefixtures("cached")
def test_a_redeploy_at_the_same_version_keeps_its_cached_answers(
    host: HostProcess, tmp_path: Path
) -> None:
    """What empties the cache is the version, not the redeploy: the agent removed and deployed
    again at the same version answers from the first deploy's entry, and after a round at
    another version, going back to the old version finds the old version's entry again."""
    first = _draw(host, "redeploy")

    _redeploy(host, _cached_at(tmp_path, SHIPPED_VERSION))
    assert _version(host, "cached") == SHIPPED_VERSION
    same = _draw(host, "redeploy")
    assert same.metadata.cached and data(same) == data(first)

    _redeploy(host, _cached_at(tmp_path, "3.0.0"))
    other = _draw(host, "redeploy")
    assert not other.metadata.cached and data(other)["nonce"] != data(first)["nonce"]

    _redeploy(host, CACHED)
    back = _draw(host, "redeploy")
    assert back.metadata.cached and data(back) == data(first)


def _gather(host: HostProcess, topic: str, *, complete: bool) -> agent_io_pb2.AgentOutput:
    params: dict[str, Any] = {"topic": topic, "complete": complete}
    return execute(host, "halfway", "gather", params)


@pytest.mark.usefixtures("halfway")
def test_a_partial_result_is_not_cached(host: HostProcess) -> None:
    """A cached action that stops halfway returns PARTIAL (what it did, and why it stopped)
    every time it is called with the same params, each a run of its own: a partial answer is
    never served in place of trying again."""
    runs = [_gather(host, "halfway", complete=False) for _ in range(3)]
    for run in runs:
        assert run.status == agent_io_pb2.TASK_STATUS_PARTIAL, run
        assert run.error.code == "stopped_halfway"
        assert data(run)["topic"] == "halfway"
        assert not run.metadata.cached
    assert len({data(run)["nonce"] for run in runs}) == len(runs)  # the agent ran each time


@pytest.mark.usefixtures("halfway")
def test_the_same_action_complete_is_cached(host: HostProcess) -> None:
    """The same action's SUCCESS is kept: its second call with the same params is the first
    one's result, marked cached (the action's cache_ttl is in effect)."""
    first = _gather(host, "whole", complete=True)
    second = _gather(host, "whole", complete=True)
    assert first.status == second.status == agent_io_pb2.TASK_STATUS_SUCCESS
    assert not first.metadata.cached
    assert second.metadata.cached and data(second) == data(first)
