"""Agents use terminals through term.* host calls (Python SDK helpers), as their owner."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2
from ether.v1 import terminal_pb2 as pb
from tests.support.agents import deploy, watch_until
from tests.support.calls import data, execute
from tests.support.host import HostProcess
from tests.terminals.support import alive, processes_at_least

AGENT = Path(__file__).parent / "agents" / "termuser"


@pytest.fixture(scope="module")
def agent(host: HostProcess) -> Iterator[str]:
    yield deploy(host, AGENT)


def call(host: HostProcess, agent: str, action: str, **params: Any) -> dict[str, Any]:
    output = execute(host, agent, action, params, timeout=60)
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error.message
    return data(output)  # type: ignore[no-any-return]


def test_run_returns_head_and_tail_of_a_long_output_and_the_exit_code(
    host: HostProcess, agent: str
) -> None:
    """term.run of a command that prints 3000 lines and exits 3: head, tail, exit code, terminal gone."""
    result = call(host, agent, "run_command", command="seq 1 3000; exit 3", limit=200)
    assert result["reason"] == "exit" and result["exit_code"] == 3 and not result["running"]
    assert result["head"].startswith("1\n2\n3\n") and result["tail"].endswith("2999\n3000\n")
    assert result["truncated"] and result["total_chars"] == sum(
        len(f"{n}\n") for n in range(1, 3001)
    )
    listed = host.terminals.ListTerminals(
        pb.ListTerminalsRequest(owner="agent:termuser"), timeout=10
    )
    assert result["terminal_id"] not in [t.id for t in listed.terminals]


def test_run_stops_at_a_pattern_and_leaves_the_program_running(
    host: HostProcess, agent: str
) -> None:
    """term.run waiting for a banner returns the match's groups while the server keeps running."""
    result = call(
        host,
        agent,
        "run_command",
        command="echo starting; sleep 0.1; echo READY port=8123; sleep 600",
        pattern=r"READY port=(\d+)",
    )
    assert result["reason"] == "pattern" and result["groups"] == ["8123"] and result["running"]
    assert result["output"].startswith("starting\nREADY port=8123")
    info = host.terminals.GetTerminal(
        pb.GetTerminalRequest(terminal_id=result["terminal_id"]), timeout=10
    ).terminal
    assert info.owner == "agent:termuser" and info.state == pb.TERMINAL_STATE_RUNNING
    call(host, agent, "close", terminal_id=result["terminal_id"])


def test_run_stops_when_the_output_goes_quiet(host: HostProcess, agent: str) -> None:
    """term.run with a quiet period returns once a program stops printing, without waiting for its exit."""
    # Quiet counts from the command's start too: a second, not 0.3 s, so a sandboxed shell slow
    # to start on a loaded machine still prints before the period ends (README's walk-through
    # once lost that race with 0.3 s).
    result = call(host, agent, "run_command", command="echo one; echo two; sleep 600", quiet=1.0)
    assert result["reason"] == "quiet" and result["output"] == "one\ntwo\n" and result["running"]
    call(host, agent, "close", terminal_id=result["terminal_id"])


def test_an_agent_drives_a_python_repl(host: HostProcess, agent: str) -> None:
    """The SDK's Terminal waits for the prompt, types an expression and reads the answer."""
    result = call(host, agent, "python", expression="6 * 7")
    assert result["answer"] == "42"
    assert result["lines"] == [">>> 6 * 7", "42", ">>>"]


def test_an_agent_cannot_touch_terminals_it_does_not_own(host: HostProcess, agent: str) -> None:
    """A client's terminal is invisible to an agent: term.read answers not_found."""
    mine = host.terminals.CreateTerminal(
        pb.CreateTerminalRequest(command_line="sleep 600", cwd="/tmp"), timeout=10
    ).terminal
    output = execute(host, agent, "peek", {"terminal_id": mine.id}, timeout=30)
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR and output.error.code == "not_found"
    host.terminals.CloseTerminal(pb.CloseTerminalRequest(terminal_id=mine.id), timeout=30)


def test_an_agents_terminals_close_when_it_stops(host: HostProcess, agent: str) -> None:
    """Stopping the agent closes its terminals (reason owner_gone) and ends their grandchildren."""
    opened = call(host, agent, "open_shell")
    terminal_id = opened["terminal_id"]
    pids = list(processes_at_least(terminal_id, 5))
    assert len(pids) >= 5  # bash, setsid and three sleeps (one in a session of its own)
    watch = host.terminals.WatchTerminals(
        pb.WatchTerminalsRequest(owner="agent:termuser"), timeout=60
    )
    sequence = host.supervisor.StopAgent(
        supervisor_pb2.StopAgentRequest(name=agent), timeout=60
    ).agent.event_sequence
    closed = next(
        e for e in watch if e.terminal.id == terminal_id and e.WhichOneof("event") == "closed"
    )
    watch.cancel()
    assert closed.closed.reason == "owner_gone"
    assert alive(pids) == []
    host.supervisor.StartAgent(supervisor_pb2.StartAgentRequest(name=agent), timeout=60)
    watch_until(host, agent, {"RUNNING"}, after=sequence)


def test_an_agent_not_granted_term_calls_is_refused_by_the_host(host: HostProcess) -> None:
    """The same agent deployed without term.* in its allowed calls: its term.run comes back
    permission_denied from the host, and no terminal is created for it."""
    name = deploy(host, AGENT, name="termless", allowed_calls=["agent.call"])
    output = execute(host, name, "run_command", {"command": "echo hi"}, timeout=60)
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR
    assert output.error.code == "permission_denied", output.error.message
    assert "term." in output.error.message
    listed = host.terminals.ListTerminals(
        pb.ListTerminalsRequest(owner="agent:termless"), timeout=10
    )
    assert list(listed.terminals) == []
    host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=name), timeout=30)
