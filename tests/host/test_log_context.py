"""The host's log credits each line to the call it belongs to: work that outlives a request
(an agent, its replicas and restarts, a workflow run, a terminal) logs without that request's
method and peer."""

from __future__ import annotations

import os
import signal
from typing import Any

from ether.v1 import supervisor_pb2
from tests.support.agents import AGENTS, deploy, until, watch_until
from tests.support.host import HostProcess
from tests.terminals.support import create as create_terminal
from tests.terminals.support import wait_exit
from tests.workflows.runs import run_to_end

DEPLOY = "/ether.v1.SupervisorService/DeployAgent"


def _credited(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if "method" in r or "peer" in r]


def test_background_work_logs_without_the_call_that_started_it(fresh_host: HostProcess) -> None:
    """An agent deployed and scaled over gRPC, one of its replicas killed and restarted, a
    workflow run and a terminal: once their calls have ended, none of the lines they log (up to
    the agent stopping at host shutdown) carry the method or peer of DeployAgent, ScaleAgent,
    CreateRun or CreateTerminal."""
    host = fresh_host
    name = deploy(host, AGENTS / "worker", name="ctx")
    status = host.supervisor.ScaleAgent(
        supervisor_pb2.ScaleAgentRequest(name=name, replicas=2), timeout=60
    ).agent
    added = until(host, status, {"RUNNING"}, replica=1)
    os.kill(added.pid, signal.SIGKILL)  # the restart loop logs too
    watch_until(host, name, {"RUNNING"}, after=added.sequence, replica=1)
    run_to_end(host, "name: ctx\nstages:\n  - {name: a, agent: ctx, action: echo}\n")
    terminal = create_terminal(host, ["true"])
    wait_exit(host, terminal.id)
    assert host.stop() == 0

    records = host.records
    # The calls' own lines do carry them: the context is bound, and must stay with its call;
    # so does a line the call logs while it runs (CreateTerminal's "terminal started").
    assert any(r.get("event") == "rpc" and r.get("method") == DEPLOY for r in records)
    started = [
        r
        for r in records
        if r.get("event") == "terminal started" and r.get("terminal") == terminal.id
    ]
    assert [r.get("method") for r in started] == ["/ether.v1.TerminalService/CreateTerminal"]
    assert str(started[0].get("peer")).startswith("ipv4:127.0.0.1:"), started
    agent_lines = [r for r in records if r.get("agent") == name]
    assert any(r.get("state") == "STOPPED" for r in agent_lines)  # its stop at shutdown
    assert any(r.get("state") == "BACKOFF" for r in agent_lines)  # the restart
    run_lines = [r for r in records if r.get("event") == "run ended"]
    # ("terminal started" is logged by CreateTerminal itself, and rightly carries its call.)
    terminal_lines = [
        r for r in records if r.get("terminal") == terminal.id and r["event"] == "terminal exited"
    ]
    assert run_lines and terminal_lines
    assert _credited(agent_lines + run_lines + terminal_lines) == []
