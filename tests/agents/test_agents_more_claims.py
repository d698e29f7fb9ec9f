"""Claims of docs/agents.md no other test held, each as a user sees it: a real host, real agents
(tests/agents/*, and small SDK agents written into the test's folder), gRPC clients.

- "Install and build": the tools' output is streamed to the agent's log (StreamLogs, source
  `install`, no replica and no pid) -- pip's own lines, and go build's compiler message; a
  failed pip install leaves no cached target (the install goes to a temporary folder renamed at
  the end), so the same folder installs once the cause is mended; the hash covers the
  manifests, so a changed requirements.txt is installed anew beside the old one.
- "An agent folder" (`env`, `config`): the configuration reaches the agent in `welcome`, from
  agent.toml's `[config]`, or the request's when it sets one (the request wins).
- "States and restarts": a task for an agent whose process ended under `restart = never`
  (EXITED) is FAILED_PRECONDITION naming the state; a stop is three-phase (`shutdown` and
  stdin closed, then SIGTERM after `stop_grace`, then SIGKILL 3 s later), as the STOPPED
  event's exit code or signal shows; ScaleAgent up returns before its new replicas run; a
  replica scaled away leaves ListProcesses at once, while its process still stops, and the
  new replica at its index starts only after it is down.
- "Retries" (the last paragraph): a replica that answers `shutting_down` shows STOPPING with
  the reason `the agent is shutting down`, and is restarted once it has stayed
  `stop_grace` + 3 s.
- StreamLogs' `tail_lines` (proto): 0 sends the newest 100 lines, n the newest n, in order.
- The three-phase stop holds for a replica that has not said hello yet too (it used to wait
  for the hello or start_timeout).
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import grpc
import pytest
from google.protobuf import duration_pb2

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import (
    AGENTS,
    agent_pids,
    deploy,
    events_until,
    remove_agent,
    state_name,
    until,
    watch_until,
)
from tests.support.calls import budget, data, details, execute, struct
from tests.support.host import HostProcess
from tests.support.procs import wait_gone
from tests.support.wheel import build_wheel

ROGUE = AGENTS / "rogue"


def seconds(value: float) -> duration_pb2.Duration:
    duration = duration_pb2.Duration()
    duration.FromNanoseconds(int(value * 1e9))
    return duration


def log_lines(host: HostProcess, agent: str) -> list[supervisor_pb2.StreamLogsResponse]:
    """Every log line the host holds of ``agent`` (install output included)."""
    request = supervisor_pb2.StreamLogsRequest(agent=agent, tail_lines=10000)
    return [line for line in host.supervisor.StreamLogs(request, timeout=30)]


def sdk_agent(folder: Path, body: str, toml: str = "", requirements: str = "") -> Path:
    """A Python SDK agent in ``folder``: ``body`` after `agent = Agent(...)`."""
    folder.mkdir(parents=True)
    head = "import os\nfrom ether_agent import Agent, TaskContext\n"
    (folder / "agent.py").write_text(f"{head}agent = Agent({folder.name!r})\n{body}")
    (folder / "agent.toml").write_text('language = "python"\nstop_grace = 1\n' + toml)
    if requirements:
        (folder / "requirements.txt").write_text(requirements)
    return folder


ANSWER = (
    "import tinydep\n\n"
    "@agent.action(description='What the installed package says.')\n"
    "def answer() -> dict:\n    return {'answer': tinydep.ANSWER}\n"
)


def test_pips_own_output_is_in_the_agents_install_log(host: HostProcess, tmp_path: Path) -> None:
    """ "Tool output is streamed to the agent's log (StreamLogs, source install)": pip's own
    lines for a requirements.txt, as install lines of no replica (-1) and no pid (proto)."""
    wheel = build_wheel(tmp_path, "tinydep", "1.0", "ANSWER = 1\n")
    name = deploy(host, sdk_agent(tmp_path / "piplog", ANSWER, requirements=f"{wheel}\n"))
    try:
        lines = log_lines(host, name)
        done = [line for line in lines if "Successfully installed tinydep-1.0" in line.message]
        assert done, [(line.source, line.message) for line in lines]
        assert all(
            line.source == "install" and line.replica == -1 and line.pid == 0 for line in done
        )
    finally:
        remove_agent(host, name)


def test_go_builds_compiler_message_is_in_the_install_log(host: HostProcess) -> None:
    """The same for `go build`: a compile error ends the agent FATAL with it in the reason
    (tests/agents/test_polyglot.py), and the compiler's own line is a line of the install log
    of its own, as the compiler wrote it (not only inside the FATAL reason's log line)."""
    response = host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(name="brokengo-log", path=str(AGENTS / "broken_go"))
        ),
        timeout=30,
    )
    try:
        ended = until(host, response.agent, {"FATAL", "RUNNING"})
        assert state_name(ended.state) == "FATAL", ended.reason
        lines = log_lines(host, "brokengo-log")
        compiler = [
            line
            for line in lines
            if line.message.startswith("./main.go:")
            and line.message.endswith("undefined: undefinedFunction")
        ]
        assert compiler, [line.message for line in lines]
        assert all(
            line.source == "install" and line.replica == -1 and line.pid == 0 for line in compiler
        )
    finally:
        remove_agent(host, "brokengo-log")


def test_a_failed_pip_install_is_not_cached_and_a_new_manifest_installs_anew(
    host: HostProcess, tmp_path: Path
) -> None:
    """ "The install goes to a temporary folder that is renamed at the end; an existing target
    is never reinstalled into", "the hash covering the manifests": requirements.txt names a
    wheel not there yet, so the install fails (FATAL) and leaves no target; with the wheel put
    in place, StartAgent installs it and the agent imports it. A requirements.txt naming
    another wheel is installed into a second target on redeploy, and the agent gets the new
    package."""
    deps = host.state_dir / "deps" / "python"
    before = set(deps.iterdir()) if deps.exists() else set()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    missing = wheels / "tinydep-1.0-py3-none-any.whl"
    folder = sdk_agent(tmp_path / "mended", ANSWER, requirements=f"{missing}\n")
    response = host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(spec=supervisor_pb2.AgentSpec(path=str(folder))),
        timeout=30,
    )
    name = response.agent.info.name
    try:
        failed = until(host, response.agent, {"FATAL", "RUNNING"})
        assert state_name(failed.state) == "FATAL" and "pip install failed" in failed.reason
        assert {p for p in deps.iterdir() if not p.name.startswith(".")} - before == set()
        assert build_wheel(wheels, "tinydep", "1.0", "ANSWER = 1\n") == missing
        started = host.supervisor.StartAgent(
            supervisor_pb2.StartAgentRequest(name=name), timeout=60
        )
        ran = until(host, started.agent, {"RUNNING", "FATAL"})
        assert state_name(ran.state) == "RUNNING", ran.reason
        assert data(execute(host, name, "answer")) == {"answer": 1}
        first = {p for p in deps.iterdir() if not p.name.startswith(".")} - before
        assert len(first) == 1, first

        (wheels / "v2").mkdir()
        newer = build_wheel(wheels / "v2", "tinydep", "2.0", "ANSWER = 2\n")
        (folder / "requirements.txt").write_text(f"{newer}\n")
        remove_agent(host, name)
        deploy(host, folder)
        assert data(execute(host, name, "answer")) == {"answer": 2}
        second = {p for p in deps.iterdir() if not p.name.startswith(".")} - before
        assert len(second) == 2 and first < second, second
        assert any(
            line.source == "install" and line.message.startswith("installing ")
            for line in log_lines(host, name)
        )
    finally:
        remove_agent(host, name)


CONFIG = (
    "\n@agent.action(description='The deployment config this process was welcomed with.')\n"
    "def config(ctx: TaskContext) -> dict:\n    return dict(ctx.config)\n"
)


def test_config_reaches_the_agent_from_agent_toml_or_the_request(
    host: HostProcess, tmp_path: Path
) -> None:
    """`env`, `config`: "configuration sent in welcome". agent.toml's [config] is what the
    agent reads as its config; a DeployAgent that sets config wins over the file's table."""
    folder = sdk_agent(tmp_path / "tuned", CONFIG, '[config]\ncolour = "red"\ndepth = 3\n')
    from_file = deploy(host, folder)
    from_request = deploy(host, folder, name="tuned-by-request", config=struct({"colour": "blue"}))
    try:
        assert data(execute(host, from_file, "config")) == {"colour": "red", "depth": 3}
        assert data(execute(host, from_request, "config")) == {"colour": "blue"}
    finally:
        remove_agent(host, from_file)
        remove_agent(host, from_request)


def test_a_task_for_an_exited_agent_names_the_state(host: HostProcess, tmp_path: Path) -> None:
    """The table's "agent stopped, FATAL, or EXITED (its process ended under restart = never)
    -> FAILED_PRECONDITION naming the state and how to start it (ErrorInfo AGENT_NOT_RUNNING,
    metadata state)", for EXITED: refused at once, not queued until the deadline."""
    folder = tmp_path / "ended"
    shutil.copytree(ROGUE, folder)
    response = host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(
                name="ended",
                path=str(folder),
                restart=supervisor_pb2.RESTART_POLICY_NEVER,
                env={"ROGUE_EXIT_AFTER_WELCOME": "0"},
            )
        ),
        timeout=30,
    )
    try:
        ended = until(host, response.agent, {"EXITED", "FATAL"})
        assert state_name(ended.state) == "EXITED", ended.reason
        with pytest.raises(grpc.RpcError) as refused:
            execute(host, "ended", "echo", {"n": 1}, timeout=60)
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION, refused.value
        message = refused.value.details() or ""
        assert "EXITED" in message and "StartAgent" in message, message
        info = details(refused.value)["ErrorInfo"]
        assert info.reason == "AGENT_NOT_RUNNING" and info.metadata["state"] == "EXITED", info
    finally:
        remove_agent(host, "ended")


@pytest.mark.parametrize(
    ("env", "code", "signum"),
    [
        ({}, 0, None),
        ({"ROGUE_LINGER": "1"}, None, signal.SIGTERM),
        ({"ROGUE_LINGER": "1", "ROGUE_IGNORE_TERM": "1"}, None, signal.SIGKILL),
    ],
    ids=["exits-on-shutdown", "sigterm-after-stop-grace", "sigkill-after-sigterm"],
)
def test_a_stop_is_shutdown_then_sigterm_then_sigkill(
    host: HostProcess, env: dict[str, str], code: int | None, signum: int | None
) -> None:
    """ "A stop sends shutdown and closes stdin, waits stop_grace, sends SIGTERM to the process
    group, waits 3 s, sends SIGKILL": an agent that ends on the shutdown frame stops with exit
    code 0 and no signal; one that stays up after it is ended by SIGTERM; one that also ignores
    SIGTERM by SIGKILL -- as the STOPPED event of its replica says."""
    name = deploy(host, ROGUE, name=f"phases-{signum or 0}", env=env, stop_grace=seconds(0.5))
    try:
        stopped = host.supervisor.StopAgent(
            supervisor_pb2.StopAgentRequest(name=name), timeout=60
        ).agent
        event = events_until(
            host,
            name,
            after=0,
            last=lambda e: e.replica == 0 and state_name(e.state) == "STOPPED",
        )[-1]
        assert state_name(stopped.info.state) == "STOPPED"
        if code is None:
            assert not event.HasField("exit_code") and event.signal == signum, event
        else:
            assert event.HasField("exit_code") and event.exit_code == code, event
            assert not event.HasField("signal"), event
    finally:
        remove_agent(host, name)


def gated(first_too: bool = False) -> str:
    """An agent whose replicas but the first (or every one) wait, before their hello, for a
    file named `go` in the agent's folder (which it sees read-only, at the same path)."""
    return GATED.replace("!= '0'", "!= ''" if first_too else "!= '0'")


GATED = (
    "import pathlib\nimport time\n\n"
    "if pathlib.Path(os.environ.get('ETHER_SCRATCH', '0')).name != '0':\n"
    "    while not (pathlib.Path(__file__).parent / 'go').exists():\n"
    "        time.sleep(0.01)\n\n"
    "@agent.action(description='The replica index of this process (its scratch folder).')\n"
    "def which() -> dict:\n"
    "    return {'replica': pathlib.Path(os.environ.get('ETHER_SCRATCH', '0')).name}\n"
)


def test_scaling_up_returns_before_the_new_replicas_run(host: HostProcess, tmp_path: Path) -> None:
    """ "Scaling up starts new replicas at the free indices ... and returns at once; watch the
    events ... to know when they run." Replica 1 of this agent says hello only once the test
    lets it (a file in its folder): ScaleAgent answers while it is still STARTING, and the
    event from the answer's event_sequence shows it RUNNING once let go."""
    folder = sdk_agent(tmp_path / "gated", gated())
    name = deploy(host, folder, start_timeout=seconds(120))
    try:
        status = host.supervisor.ScaleAgent(
            supervisor_pb2.ScaleAgentRequest(name=name, replicas=2), timeout=30
        ).agent
        assert status.spec.replicas == 2
        # Replica 1 is listed, and has not run: it cannot say hello before the file exists
        # (the answer shows it STARTING: tests/agents/test_scale_answer_states.py).
        states = {p.replica: (state_name(p.state), p.pid) for p in status.processes}
        assert states[0][0] == "RUNNING" and states[1][0] != "RUNNING", states
        (folder / "go").write_text("")
        running = until(host, status, {"RUNNING"}, replica=1)
        assert running.pid > 0 and running.pid != states[0][1]
        assert data(execute(host, name, "which")) in ({"replica": "0"}, {"replica": "1"})
    finally:
        (folder / "go").write_text("")  # a replica still waiting would hold up its stop
        remove_agent(host, name)


def test_a_replica_scaled_away_leaves_the_list_at_once_and_its_index_waits_for_it(
    host: HostProcess,
) -> None:
    """ "scaling down stops the highest ones (three-phase) ...; they leave ListProcesses at
    once. Scaling up starts new replicas at the free indices (after the one scaled away at
    that index, if it is still stopping)". Replica 1 of the rogue agent ignores the shutdown
    frame and SIGTERM, so its stop lasts stop_grace + 3 s; while it stops (the ScaleAgent that
    stops it given up: the stop runs on), ListProcesses shows replica 0 alone, and a scale back
    to 2 starts the new replica 1 only after the old one's STOPPED event."""
    name = deploy(
        host,
        ROGUE,
        name="lingering",
        replicas=2,
        env={"ROGUE_LINGER": "1", "ROGUE_IGNORE_TERM": "1"},
        stop_grace=seconds(5),
    )
    try:
        listed = host.supervisor.ListProcesses(
            supervisor_pb2.ListProcessesRequest(agent=name), timeout=10
        ).processes
        old = next(p.pid for p in listed if p.replica == 1)
        down = host.supervisor.ScaleAgent.future(
            supervisor_pb2.ScaleAgentRequest(name=name, replicas=1), timeout=60
        )
        stopping = events_until(
            host,
            name,
            after=0,
            last=lambda e: e.replica == 1 and state_name(e.state) == "STOPPING",
        )[-1]
        down.cancel()
        listed = host.supervisor.ListProcesses(
            supervisor_pb2.ListProcessesRequest(agent=name), timeout=10
        ).processes
        assert [p.replica for p in listed] == [0], listed
        os.kill(old, 0)  # still there: it is stopping (SIGKILL comes stop_grace + 3 s on)
        host.supervisor.ScaleAgent(
            supervisor_pb2.ScaleAgentRequest(name=name, replicas=2), timeout=60
        )
        after = events_until(
            host,
            name,
            after=stopping.sequence,
            last=lambda e: e.replica == 1 and state_name(e.state) == "RUNNING",
        )
        mine = [(state_name(e.state), e.pid) for e in after if e.replica == 1]
        assert mine[0][0] == "STOPPED", mine  # the old process's end comes first
        assert mine[-1][1] not in (0, old), mine
        assert wait_gone([old], within=0) == []
    finally:
        remove_agent(host, name)


def test_a_replica_refusing_tasks_as_shutting_down_shows_stopping_with_the_reason(
    host: HostProcess,
) -> None:
    """Retries, last paragraph: "The first such answer takes that process out of the rotation
    ...: it shows STOPPING (reason `the agent is shutting down`) until it exits and is restarted
    by its policy, and one still running stop_grace + 3 s later is restarted by the host". The
    refuser agent answers every task shutting_down and never exits: its one replica's event is
    STOPPING with that reason and its pid, then a restart (BACKOFF) and a new process."""
    name = deploy(host, AGENTS / "refuser", name="drainer")
    try:
        [pid] = agent_pids(host, name)
        with pytest.raises(grpc.RpcError):
            execute(
                host,
                name,
                "serve",
                context=agent_io_pb2.TaskContext(budget=budget(max_time=1)),
                timeout=60,
            )
        seen = events_until(
            host,
            name,
            after=0,
            last=lambda e: (
                e.replica == 0 and e.pid not in (0, pid) and state_name(e.state) == "RUNNING"
            ),
        )
        after_hello = [(state_name(e.state), e.reason, e.pid) for e in seen if e.replica == 0]
        states = [state for state, _, _ in after_hello]
        at = states.index("STOPPING")
        assert after_hello[at][1:] == ("the agent is shutting down", pid), after_hello
        assert states[at + 1] == "BACKOFF", after_hello
    finally:
        remove_agent(host, name)


def test_a_stop_ends_a_replica_that_has_not_said_hello_yet(
    host: HostProcess, tmp_path: Path
) -> None:
    """ "A stop (operator, restart, host shutdown) sends shutdown and closes stdin, waits
    stop_grace, sends SIGTERM to the process group, waits 3 s, sends SIGKILL to the group, and
    reaps" -- for a replica still STARTING too. This agent's process waits before its hello
    (start_timeout 600 s); StopAgent (stop_grace 1 s) must answer once it is ended, well
    within the call's 30 s, not when start_timeout runs out."""
    folder = sdk_agent(tmp_path / "slowstart", gated(first_too=True))
    response = host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(path=str(folder), start_timeout=seconds(600))
        ),
        timeout=30,
    )
    name = response.agent.info.name
    try:
        starting = watch_until(host, name, {"STARTING"}, replica=0)  # its spawn, with the pid
        stopped = host.supervisor.StopAgent(
            supervisor_pb2.StopAgentRequest(name=name), timeout=30
        ).agent
        assert state_name(stopped.info.state) == "STOPPED"
        assert wait_gone([starting.pid], within=0) == []
    finally:
        (folder / "go").write_text("")  # lets a process that is still waiting say hello
        remove_agent(host, name)


def test_stream_logs_sends_the_newest_lines_100_by_default(host: HostProcess) -> None:
    """StreamLogsRequest.tail_lines: "Lines of history to send first, 0 to 10000; 0 means 100":
    after 120 stderr lines, a request without tail_lines gets the newest 100 in order, and
    tail_lines 3 the newest 3 (the same as the last 3 of those)."""
    name = deploy(host, ROGUE, name="talkative")
    try:
        for _ in range(20):  # six lines each
            assert data(execute(host, name, "stderr")) == {"written": True}

        def tail(lines: int) -> list[str]:
            request = supervisor_pb2.StreamLogsRequest(agent=name, tail_lines=lines)
            return [line.message for line in host.supervisor.StreamLogs(request, timeout=30)]

        default, three = tail(0), tail(3)
        six = [  # what each call writes, as the host reads it (the levels are fields)
            "disk almost full",
            "upstream failed",
            "Traceback (most recent call last):",
            '  File "worker.py", line 7, in <module>',
            "ValueError: bad value",
            "back to normal",
        ]
        assert default == (six * 20)[-100:], default
        assert three == default[-3:], (three, default[-3:])
    finally:
        remove_agent(host, name)
