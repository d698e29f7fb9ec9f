"""Supervision: restart policy, FATAL, stops that leave nothing behind, host death, installs."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import grpc
import pytest

from ether.v1 import agent_io_pb2, supervisor_pb2, terminal_pb2
from tests.support.agents import AGENTS, deploy, state_name, until, watch_until
from tests.support.calls import data, execute, struct
from tests.support.host import HostProcess
from tests.support.procs import host_pid, path_without, wait_gone
from tests.support.wheel import build_wheel


def alive(pid: int) -> bool:
    """True while /proc shows the process and it is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def group_alive(pgid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(name))
    return found


def processes(host: HostProcess, agent: str) -> list[supervisor_pb2.ProcessInfo]:
    request = supervisor_pb2.ListProcessesRequest(agent=agent)
    return list(host.supervisor.ListProcesses(request, timeout=10).processes)


def test_crash_loop_ends_fatal_with_the_stderr_tail(host: HostProcess) -> None:
    """An agent that exits 1 at once is retried start_retries times, then FATAL (sticky)."""
    response = host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(
                name="crashloop", path=str(AGENTS / "lifecycle"), env={"ROGUE_EXIT": "1"}
            )
        ),
        timeout=10,
    )
    event = watch_until(host, "crashloop", {"FATAL"}, after=response.agent.event_sequence)
    assert "failed to start 3 times" in event.reason
    assert any("exiting as asked" in line for line in event.stderr_tail)
    with pytest.raises(grpc.RpcError) as error:
        execute(host, "crashloop", "echo", {})
    assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "FATAL" in error.value.details() and "StartAgent" in error.value.details()


def test_exit_78_is_fatal_without_retry(host: HostProcess) -> None:
    response = host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(
                name="exit78", path=str(AGENTS / "lifecycle"), env={"ROGUE_EXIT": "78"}
            )
        ),
        timeout=10,
    )
    event = watch_until(host, "exit78", {"FATAL", "BACKOFF"}, after=response.agent.event_sequence)
    assert state_name(event.state) == "FATAL"
    assert event.exit_code == 78
    assert processes(host, "exit78")[0].restarts == 0


def test_fatal_frame_is_fatal_without_retry(host: HostProcess) -> None:
    response = host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(
                name="fatalframe", path=str(AGENTS / "lifecycle"), env={"ROGUE_FATAL": "1"}
            )
        ),
        timeout=10,
    )
    event = watch_until(
        host, "fatalframe", {"FATAL", "BACKOFF"}, after=response.agent.event_sequence
    )
    assert state_name(event.state) == "FATAL"
    assert "missing API key" in event.reason


def test_operator_restart_leaves_fatal(host: HostProcess) -> None:
    """FATAL is sticky until StartAgent/RestartAgent, which reset the counters."""
    response = host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(
                name="revive", path=str(AGENTS / "lifecycle"), env={"ROGUE_EXIT": "78"}
            )
        ),
        timeout=10,
    )
    watch_until(host, "revive", {"FATAL"}, after=response.agent.event_sequence)
    restarted = host.supervisor.RestartAgent(
        supervisor_pb2.RestartAgentRequest(name="revive"), timeout=30
    )
    event = until(host, restarted.agent, {"FATAL", "RUNNING"})
    assert state_name(event.state) == "FATAL"  # still exits 78: FATAL again, once


def test_stop_kills_a_child_ignoring_sigterm_and_its_grandchild(host: HostProcess) -> None:
    """StopAgent ends an agent that ignores SIGTERM and a grandchild that ignores it too:
    nothing of the process group is left in /proc."""
    deploy(host, AGENTS / "lifecycle", name="stubborn", env={"ROGUE_IGNORE_TERM": "1"})
    pid = processes(host, "stubborn")[0].pid
    grandchild = data(execute(host, "stubborn", "grandchild", {}))
    assert host_pid(grandchild["pgid"], pid) == pid
    grandchild_pid = host_pid(grandchild["pid"], pid)
    assert alive(grandchild_pid)
    stopped = host.supervisor.StopAgent(
        supervisor_pb2.StopAgentRequest(name="stubborn"), timeout=60
    )
    assert stopped.agent.info.state == agent_io_pb2.AGENT_STATE_STOPPED
    assert group_alive(pid) == []
    assert not alive(pid) and not alive(grandchild_pid)


def test_crashed_agent_leaves_no_grandchild(host: HostProcess) -> None:
    """When an agent dies, the grandchildren it left in its group are killed before the restart."""
    deploy(host, AGENTS / "lifecycle", name="orphaner")
    pid = processes(host, "orphaner")[0].pid
    grandchild = host_pid(data(execute(host, "orphaner", "grandchild", {}))["pid"], pid)
    after = host.supervisor.StartAgent(
        supervisor_pb2.StartAgentRequest(name="orphaner"), timeout=10
    )
    with pytest.raises(grpc.RpcError) as error:
        execute(host, "orphaner", "crash", {})
    assert error.value.code() == grpc.StatusCode.UNAVAILABLE
    watch_until(host, "orphaner", {"RUNNING"}, after=after.agent.event_sequence + 1)
    assert group_alive(pid) == []
    assert not alive(grandchild)


def test_stream_logs_tail_and_follow(host: HostProcess) -> None:
    """StreamLogs shows what an agent printed (its stdout is moved to stderr, the log), with the
    tail first; with follow, lines written later arrive on the open stream."""
    deploy(host, AGENTS.parent / "conformance" / "agents" / "python", name="talker")
    execute(host, "talker", "print", {"text": "first line from the agent"})
    tail = list(
        host.supervisor.StreamLogs(
            supervisor_pb2.StreamLogsRequest(agent="talker", tail_lines=50), timeout=10
        )
    )
    printed = [line for line in tail if line.message == "first line from the agent"]
    assert printed and printed[0].source == "stderr" and printed[0].pid > 0
    follow = host.supervisor.StreamLogs(
        supervisor_pb2.StreamLogsRequest(agent="talker", tail_lines=1, follow=True), timeout=30
    )
    execute(host, "talker", "print", {"text": "second line, while following"})
    try:
        assert any(line.message == "second line, while following" for line in follow)
    finally:
        follow.cancel()
    with pytest.raises(grpc.RpcError) as error:
        list(
            host.supervisor.StreamLogs(supervisor_pb2.StreamLogsRequest(agent="nobody"), timeout=10)
        )
    assert error.value.code() == grpc.StatusCode.NOT_FOUND


def test_replicas_share_the_load(host: HostProcess) -> None:
    """ScaleAgent to 3 replicas: three processes, tasks spread across them."""
    deploy(host, AGENTS / "worker", name="scaled")
    scaled = host.supervisor.ScaleAgent(
        supervisor_pb2.ScaleAgentRequest(name="scaled", replicas=3), timeout=10
    )
    for replica in (1, 2):
        until(host, scaled.agent, {"RUNNING"}, replica=replica)
    outputs = [
        host.agents.Execute.future(
            agent_io_pb2.ExecuteRequest(
                input=agent_io_pb2.AgentInput(
                    agent="scaled", action="nap", params=struct({"ms": 300})
                )
            ),
            timeout=60,
        )
        for _ in range(9)
    ]
    pids = {future.result().output.metadata.pid for future in outputs}
    assert len(pids) == 3
    with pytest.raises(grpc.RpcError) as error:
        host.supervisor.ScaleAgent(
            supervisor_pb2.ScaleAgentRequest(name="scaled", replicas=0), timeout=10
        )
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_install_failure_is_fatal_with_pips_message(host: HostProcess, tmp_path: Path) -> None:
    folder = tmp_path / "badinstall"
    folder.mkdir()
    (folder / "requirements.txt").write_text(f"{tmp_path}/missing_pkg-1.0-py3-none-any.whl\n")
    (folder / "agent.py").write_text("from ether_agent import Agent\nagent = Agent('badinstall')\n")
    response = host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(spec=supervisor_pb2.AgentSpec(path=str(folder))),
        timeout=10,
    )
    event = watch_until(
        host, "badinstall", {"FATAL", "RUNNING"}, after=response.agent.event_sequence
    )
    assert state_name(event.state) == "FATAL"
    assert "pip install failed" in event.reason
    assert "missing_pkg" in event.reason


def test_two_agents_sharing_a_manifest_install_once(host: HostProcess, tmp_path: Path) -> None:
    """Dependencies are installed once per manifest hash and imported by both agents."""
    wheel = build_wheel(tmp_path, "tinydep", "1.0", "ANSWER = 42\n")
    for name in ("dep-one", "dep-two"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "requirements.txt").write_text(f"{wheel}\n")
        (folder / "agent.py").write_text(
            "import tinydep\nfrom ether_agent import Agent\n"
            f"agent = Agent({name!r})\n\n"
            "@agent.action(description='The answer from the installed package.')\n"
            "def answer() -> dict:\n    return {'answer': tinydep.ANSWER}\n"
        )
    deploy(host, tmp_path / "dep-one")
    deploy(host, tmp_path / "dep-two")
    assert data(execute(host, "dep-one", "answer", {})) == {"answer": 42}
    assert data(execute(host, "dep-two", "answer", {})) == {"answer": 42}
    installs = 0
    for name in ("dep-one", "dep-two"):
        for line in host.supervisor.StreamLogs(
            supervisor_pb2.StreamLogsRequest(agent=name, tail_lines=1000), timeout=10
        ):
            if line.source == "install" and line.message.startswith("installing "):
                installs += 1
    assert installs == 1
    deps = list((host.state_dir / "deps" / "python").iterdir())
    assert len([d for d in deps if not d.name.startswith(".")]) == 1


def test_two_languages_and_no_manifest_is_refused(host: HostProcess, tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text("module x\n")
    (tmp_path / "package.json").write_text("{}")
    with pytest.raises(grpc.RpcError) as error:
        host.supervisor.DeployAgent(
            supervisor_pb2.DeployAgentRequest(spec=supervisor_pb2.AgentSpec(path=str(tmp_path))),
            timeout=10,
        )
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "go.mod" in error.value.details() and "package.json" in error.value.details()


def test_kill_minus_nine_of_the_host_leaves_nothing(tmp_path: Path) -> None:
    """kill -9 of the host: every agent and grandchild exits within 5 s."""
    host = HostProcess(tmp_path / "state")
    host.wait_serving()
    deploy(host, AGENTS / "worker")
    deploy(host, AGENTS.parent / "conformance" / "agents" / "python", name="other")
    agents = [p.pid for name in ("worker", "other") for p in processes(host, name)]
    grandchild = host_pid(data(execute(host, "worker", "grandchild", {}))["pid"], agents[0])
    host.process.kill()
    host.process.wait()
    survivors = wait_gone([*agents, grandchild], within=5.0)
    assert survivors == [], f"processes {survivors} survived the host by more than 5 s"


def test_ctrl_c_to_the_hosts_process_group_stops_it_cleanly(tmp_path: Path) -> None:
    """Ctrl-C where `ether serve` runs in a shell (SIGINT to its whole process group) stops the
    host as SIGTERM does: it exits 0, and no agent, grandchild or terminal program is left.
    Agents and terminals run in process groups of their own, so the SIGINT reaches only the
    host, which stops them in order."""
    host = HostProcess(tmp_path / "state", own_process_group=True)
    host.wait_serving()
    deploy(host, AGENTS / "worker")
    agents = [p.pid for p in processes(host, "worker")]
    grandchild = host_pid(data(execute(host, "worker", "grandchild", {}))["pid"], agents[0])
    terminal = host.terminals.CreateTerminal(
        terminal_pb2.CreateTerminalRequest(argv=terminal_pb2.Argv(args=["sleep", "600"])),
        timeout=30,
    ).terminal
    os.killpg(host.process.pid, signal.SIGINT)
    assert host.process.wait(60) == 0
    host.wait_for_log(lambda r: r.get("event") == "stopping" and r.get("signal") == "SIGINT")
    survivors = wait_gone([*agents, grandchild, terminal.pid], within=5.0)
    assert survivors == [], f"processes {survivors} outlived the host"


def test_next_host_kills_what_a_killed_host_left(tmp_path: Path) -> None:
    """Where the host cannot run agents in PID namespaces (no bubblewrap here), a raw agent
    without an adapter cannot notice its host died; the next host started on the same state
    directory kills the process group it left behind."""
    state = tmp_path / "state"
    no_bwrap = {"PATH": path_without(tmp_path / "bin", "bwrap")}
    first = HostProcess(state, env=no_bwrap)
    first.wait_serving()
    deploy(first, AGENTS / "lifecycle", name="raw")
    leader = processes(first, "raw")[0].pid
    grandchild = host_pid(data(execute(first, "raw", "grandchild", {}))["pid"], leader)
    first.process.kill()
    first.process.wait()
    assert alive(grandchild)  # nothing in a raw agent ends it
    second = HostProcess(state, env=no_bwrap)
    try:
        second.wait_serving()
        assert not alive(grandchild)
        assert group_alive(leader) == []
    finally:
        second.stop()
