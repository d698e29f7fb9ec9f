"""The INSTALLING phase ends within its install_timeout, whatever it waits for."""

from __future__ import annotations

import fcntl
import json
from pathlib import Path

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import deploy, state_name, watch_until
from tests.support.host import HostProcess


def test_build_lock_held_elsewhere_ends_fatal(host: HostProcess, tmp_path: Path) -> None:
    """A TypeScript folder whose build lock another process holds (a stuck host, a concurrent
    test run) makes the deploy end FATAL naming the timeout; before, it stayed INSTALLING for
    good, past every timeout, and a test waiting for RUNNING stalled."""
    folder = tmp_path / "locked"
    folder.mkdir()
    (folder / "package.json").write_text(json.dumps({"name": "locked", "version": "1.0.0"}))
    (folder / "agent.toml").write_text('language = "typescript"\ninstall_timeout = 2\n')
    with (folder / ".ether-build.lock").open("a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        agent = deploy(host, folder, wait=False)
        event = watch_until(host, agent, {"FATAL", "RUNNING"})
    assert state_name(event.state) == "FATAL", event
    assert "install_timeout of 2 s" in event.reason, event.reason
    info = host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name=agent), timeout=10).agent
    assert state_name(info.state) == "FATAL"
    host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=agent), timeout=30)
