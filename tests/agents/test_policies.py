"""What the supervisor decides after an exit, the queue bound, removal, the deadline an agent is
told, Pipe's flow control, the directory's filters, and agents deployed from an agents dir."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2

from ether.v1 import agent_io_pb2, common_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy, remove_agent, state_name, until, watch_until
from tests.support.calls import agent_input, budget, data, details, execute
from tests.support.host import HostProcess
from tests.support.procs import thread_policies, wait_gone

ROGUE = AGENTS / "rogue"


def _deploy_rogue(host: HostProcess, name: str, **spec: Any) -> int:
    """Deploy the rogue agent as ``name`` (a name new to this module's host); returns the event
    sequence to watch from: 0, every event of the name, since the answer's own sequence is
    taken once the deploy is recorded, and the agent may have run (and exited) by then."""
    host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(name=name, path=str(ROGUE), **spec)
        ),
        timeout=30,
    )
    return 0


def _rogue_folder(folder: Path, settings: str) -> Path:
    """A copy of the rogue agent in ``folder``, with ``settings`` (agent.toml lines) of its own."""
    folder.mkdir(parents=True)
    shutil.copy(ROGUE / "rogue.py", folder / "rogue.py")
    (folder / "agent.toml").write_text(
        'language = "python"\ncommand = ["python3", "rogue.py"]\n' + settings
    )
    return folder


def _agent(host: HostProcess, name: str) -> agent_io_pb2.AgentInfo:
    return host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name=name), timeout=10).agent


@pytest.mark.parametrize(
    ("policy", "code", "after"),
    [
        (supervisor_pb2.RESTART_POLICY_NEVER, 3, "EXITED"),
        (supervisor_pb2.RESTART_POLICY_ON_FAILURE, 0, "BACKOFF"),
        (supervisor_pb2.RESTART_POLICY_ON_FAILURE, 3, "BACKOFF"),
        (supervisor_pb2.RESTART_POLICY_ALWAYS, 0, "BACKOFF"),
    ],
    ids=["never-after-a-failure", "on-failure-after-exit-0", "on-failure-after-exit-3", "always"],
)
def test_the_restart_policy_decides_what_follows_an_exit(
    host: HostProcess, policy: int, code: int, after: str
) -> None:
    """An agent that exits on its own (no task in flight) is restarted or left EXITED, as its
    policy says: an agent is a server, so even its exit 0 is a failure under on-failure; a
    restart brings up a new process."""
    name = f"policy-{policy}-{code}"
    sequence = _deploy_rogue(
        host, name, restart=policy, env={"ROGUE_EXIT_AFTER_WELCOME": str(code)}
    )
    try:
        running = watch_until(host, name, {"RUNNING", "FATAL"}, after=sequence)
        assert state_name(running.state) == "RUNNING", running.reason
        ended = watch_until(host, name, {"EXITED", "BACKOFF", "FATAL"}, after=running.sequence)
        assert state_name(ended.state) == after, ended.reason
        assert ended.exit_code == code
        if after == "EXITED":
            assert state_name(_agent(host, name).state) == "EXITED"
        else:
            again = watch_until(host, name, {"RUNNING"}, after=ended.sequence)
            assert again.pid and again.pid != running.pid
    finally:
        remove_agent(host, name)


def test_remove_agent_ends_its_processes_and_forgets_it(host: HostProcess) -> None:
    """RemoveAgent stops every replica (nothing left in /proc) and the name is unknown after."""
    name = deploy(host, ROGUE, name="removable", replicas=2)
    listed = host.supervisor.ListProcesses(
        supervisor_pb2.ListProcessesRequest(agent=name), timeout=10
    )
    pids = [p.pid for p in listed.processes]
    assert len(pids) == 2 and all(pids)
    remove_agent(host, name)
    assert wait_gone(pids, within=10) == []
    with pytest.raises(grpc.RpcError) as error:
        _agent(host, name)
    assert error.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as error:
        execute(host, name, "echo", timeout=10)
    assert error.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_full_queue_is_resource_exhausted_with_retry_info(
    host: HostProcess, tmp_path: Path
) -> None:
    """With every slot busy and max_queue tasks waiting, the next task is refused at once with
    RESOURCE_EXHAUSTED and RetryInfo; the queued one still runs when the slot frees."""
    folder = _rogue_folder(
        tmp_path / "queued", 'max_queue = 1\nstop_grace = 0.5\n[env]\nROGUE_CONCURRENCY = "1"\n'
    )
    name = deploy(host, folder)
    assert _agent(host, name).max_concurrency == 1
    nap = agent_io_pb2.ExecuteRequest(input=agent_input(name, "nap", {"ms": 1500}))
    busy = host.agents.Execute.future(nap, timeout=30)
    _until(lambda: _agent(host, name).in_flight == 1)
    waiting = host.agents.Execute.future(nap, timeout=30)
    _until(lambda: _agent(host, name).queued == 1)
    with pytest.raises(grpc.RpcError) as error:
        execute(host, name, "echo", timeout=10)
    assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    found = details(error.value)
    assert "RetryInfo" in found, error.value.details()
    # The quota's subject and limit, as every quota carries them (docs/limits.md).
    assert [v.subject for v in found["QuotaFailure"].violations] == [f"agent:{name}"]
    assert found["ErrorInfo"].reason == "AGENT_QUEUE_FULL"
    assert found["ErrorInfo"].metadata["limit"] == "1"
    assert busy.result().output.status == agent_io_pb2.TASK_STATUS_SUCCESS
    assert waiting.result().output.status == agent_io_pb2.TASK_STATUS_SUCCESS
    remove_agent(host, name)


def test_an_agent_can_opt_out_of_the_batch_cpu_policy(host: HostProcess, tmp_path: Path) -> None:
    """``cpu_scheduling_policy = "other"`` in agent.toml keeps Linux's default policy for every
    thread of the agent; a policy the host cannot set is refused at deploy, naming the field."""
    name = deploy(host, _rogue_folder(tmp_path / "other", 'cpu_scheduling_policy = "other"\n'))
    assert set(thread_policies(_agent_pid(host, name)).values()) == {os.SCHED_OTHER}
    remove_agent(host, name)
    with pytest.raises(grpc.RpcError) as error:
        deploy(host, _rogue_folder(tmp_path / "fifo", 'cpu_scheduling_policy = "fifo"\n'))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "cpu_scheduling_policy" in error.value.details()
    assert "batch" in error.value.details()


def test_deploy_settings_override_agent_toml_and_the_status_shows_those_in_effect(
    host: HostProcess, tmp_path: Path
) -> None:
    """Every agent.toml setting has an AgentSpec field. What the request sets wins (zeros
    included), agent.toml fills in the rest, then the defaults; the status shows the result,
    and the process runs with it. A value out of range names the request's field."""
    folder = _rogue_folder(
        tmp_path / "tuned",
        'description = "from the file"\nmax_queue = 7\ncancel_grace = 2\n'
        'cpu_scheduling_policy = "other"\nping_interval = 4\nmax_restarts = 9\n',
    )
    response = host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(
                path=str(folder),
                name="tuned",
                description="from the request",
                max_queue=3,
                cpu_scheduling_policy=supervisor_pb2.CPU_SCHEDULING_POLICY_IDLE,
                stop_grace=duration_pb2.Duration(seconds=0),
                backoff_cap=duration_pb2.Duration(seconds=12, nanos=500_000_000),
                start_retries=0,
            )
        ),
        timeout=30,
    )
    spec = response.agent.spec
    # from the request, zeros included
    assert spec.description == "from the request"
    assert spec.max_queue == 3
    assert spec.cpu_scheduling_policy == supervisor_pb2.CPU_SCHEDULING_POLICY_IDLE
    assert spec.stop_grace.ToTimedelta().total_seconds() == 0
    assert spec.backoff_cap.ToTimedelta().total_seconds() == 12.5
    assert spec.start_retries == 0
    # from agent.toml
    assert spec.cancel_grace.ToTimedelta().total_seconds() == 2
    assert spec.ping_interval.ToTimedelta().total_seconds() == 4
    assert spec.max_restarts == 9
    assert list(spec.command) == ["python3", "rogue.py"]
    # defaults
    assert spec.protocol == supervisor_pb2.LINK_PROTOCOL_AUTO
    assert spec.ping_timeout.ToTimedelta().total_seconds() == 10
    assert spec.restart_period.ToTimedelta().total_seconds() == 300
    until(host, response.agent, {"RUNNING"})
    assert _agent(host, "tuned").description == "from the request"
    assert set(thread_policies(_agent_pid(host, "tuned")).values()) == {os.SCHED_IDLE}
    remove_agent(host, "tuned")

    with pytest.raises(grpc.RpcError) as error:
        host.supervisor.DeployAgent(
            supervisor_pb2.DeployAgentRequest(
                spec=supervisor_pb2.AgentSpec(
                    path=str(folder), cancel_grace=duration_pb2.Duration(seconds=0)
                )
            ),
            timeout=30,
        )
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.value.details().startswith("spec.cancel_grace: 0.0 is out of range 0.01..600")


def _until(condition: Callable[[], bool], within: float = 10.0) -> None:
    """Ask the host again until ``condition()`` holds: state, not time, is what is waited on."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "the host never reached the expected state"


def test_the_agent_is_told_the_deadline_the_host_enforces(host: HostProcess) -> None:
    """The task frame carries the time left: the client's gRPC deadline, or budget.max_time when
    that is shorter."""
    name = deploy(host, ROGUE, name="deadlines")
    by_rpc = data(execute(host, name, "deadline", timeout=20))["deadline_ms"]
    # gRPC sends the timeout rounded up (grpc-timeout has few digits: 20 s arrives as ~20.1 s).
    assert 15_000 < by_rpc <= 20_500
    by_budget = data(
        execute(host, name, "deadline", timeout=60, context=_budget_context(max_time=3))
    )["deadline_ms"]
    assert 0 < by_budget <= 3_000
    unbounded = data(execute(host, name, "deadline", timeout=None))
    assert unbounded["deadline_ms"] in (None, 0)
    remove_agent(host, name)


def _budget_context(**limits: float) -> agent_io_pb2.TaskContext:
    return agent_io_pb2.TaskContext(budget=budget(**limits))


def test_pipe_never_runs_more_than_max_in_flight(host: HostProcess) -> None:
    """Pipe's max_in_flight bounds the tasks running at once on the agent, and is used."""
    name = deploy(host, ROGUE, name="piped")
    inputs = [
        agent_io_pb2.PipeRequest(
            input=agent_input(name, "nap", {"ms": 300}), max_in_flight=3 if i == 0 else 0
        )
        for i in range(9)
    ]
    outputs = list(host.agents.Pipe(iter(inputs), timeout=60))
    assert len(outputs) == 9
    most = max(data(o.output)["most_at_once"] for o in outputs)
    assert 2 <= most <= 3
    remove_agent(host, name)


def test_list_agents_filters_by_language_and_type(host: HostProcess) -> None:
    """The language and type filters keep only matching agents."""
    name = deploy(host, ROGUE, name="filtered")

    def names(**request: Any) -> list[str]:
        listed = host.agents.ListAgents(agent_io_pb2.ListAgentsRequest(**request), timeout=10)
        return [a.name for a in listed.agents]

    assert name in names(language=common_pb2.LANGUAGE_PYTHON)
    assert name not in names(language=common_pb2.LANGUAGE_GO)
    assert name in names(type=agent_io_pb2.AGENT_TYPE_GENERAL)
    assert name not in names(type=agent_io_pb2.AGENT_TYPE_IO_GATEWAY)
    remove_agent(host, name)


def test_agents_in_the_agents_dir_run_when_the_host_starts(tmp_path: Path) -> None:
    """Every agent folder in --agents-dir is deployed at start and reaches RUNNING."""
    agents_dir = tmp_path / "agents"
    for name in ("first", "second"):
        _rogue_folder(agents_dir / name, "stop_grace = 0.5\n")
    started = HostProcess(tmp_path / "state", "--agents-dir", str(agents_dir))
    try:
        started.wait_serving()
        for name in ("first", "second"):
            watch_until(started, name, {"RUNNING"}, timeout=60)
            assert data(execute(started, name, "echo", {"n": 1})) == {"n": 1}
    finally:
        started.stop()


def test_stderr_lines_become_records_with_levels_and_fields(host: HostProcess) -> None:
    """StreamLogs gives each stderr line a level: `[LEVEL]` prefixes, JSON lines (their other keys
    become fields), and every line of a Python traceback as an error; plain text is info."""
    name = deploy(host, ROGUE, name="talkative")
    assert data(execute(host, name, "stderr")) == {"written": True}
    request = supervisor_pb2.StreamLogsRequest(agent=name, tail_lines=50)
    records = {r.message: r for r in host.supervisor.StreamLogs(request, timeout=10)}
    assert records["disk almost full"].level == "warning"
    upstream = records["upstream failed"]
    assert upstream.level == "error" and upstream.fields["status"] == 503
    for line in (
        "Traceback (most recent call last):",
        '  File "worker.py", line 7, in <module>',
        "ValueError: bad value",
    ):
        assert records[line].level == "error", line
    assert records["back to normal"].level == "info"
    remove_agent(host, name)


def test_an_unsupported_protocol_version_is_refused_in_the_welcome(host: HostProcess) -> None:
    """An agent that asks for a protocol this host does not speak gets a welcome carrying
    protocol_version_unsupported and the supported versions, and never runs: it ends FATAL."""
    name = "future-agent"
    sequence = _deploy_rogue(host, name, env={"ROGUE_PROTOCOL": "99"})
    event = watch_until(host, name, {"RUNNING", "FATAL"}, after=sequence)
    assert state_name(event.state) == "FATAL"
    assert "protocol 99" in event.reason, event.reason
    welcome = next(line for line in event.stderr_tail if line.startswith("welcome: "))
    assert "protocol_version_unsupported" in welcome and '"supported":[1]' in welcome
    remove_agent(host, name)


def test_a_child_call_inherits_the_parents_remaining_deadline(host: HostProcess) -> None:
    """A task started with agent.call gets at most what is left of its parent's deadline."""
    worker = deploy(host, AGENTS / "worker")
    told = deploy(host, ROGUE, name="told")
    output = execute(
        host,
        worker,
        "relay",
        {"agent": told, "action": "deadline"},
        timeout=60,
        context=_budget_context(max_time=4),
    )
    child = data(output)
    assert child["status"] == "SUCCESS", child
    assert 0 < child["data"]["deadline_ms"] <= 4_000
    remove_agent(host, told)
    remove_agent(host, worker)


def test_an_agent_giving_up_at_the_deadline_is_deadline_exceeded(host: HostProcess) -> None:
    """The agent watches its own copy of the deadline and may answer `timeout` a moment before
    the host's timer fires: the caller still gets DEADLINE_EXCEEDED. A `timeout` error long
    before the deadline is the agent's own failure: an ERROR output."""
    name = deploy(host, ROGUE, name="quitter")
    with pytest.raises(grpc.RpcError) as error:
        execute(
            host,
            name,
            "give_up",
            {"before_deadline_ms": 10},
            timeout=30,
            context=_budget_context(max_time=0.5),
        )
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    early = execute(host, name, "give_up", timeout=30)
    assert early.status == agent_io_pb2.TASK_STATUS_ERROR and early.error.code == "timeout"
    remove_agent(host, name)


def test_progress_for_a_caller_that_went_away_does_not_stop_the_link(host: HostProcess) -> None:
    """An ExecuteStream client that disconnects while its agent keeps sending progress: the
    events are dropped and the agent's other tasks are still answered (the host once took the
    closed event stream for the end of the agent's stdout and stopped reading it)."""
    name = deploy(host, ROGUE, name="chatty")
    for _ in range(40):
        request = agent_io_pb2.ExecuteStreamRequest(input=agent_input(name, "chatter", {"ms": 300}))
        stream = host.agents.ExecuteStream(request, timeout=30)
        assert next(stream).WhichOneof("event") == "started"
        assert next(stream).WhichOneof("event") == "progress"
        stream.cancel()
    assert data(execute(host, name, "echo", {"still": "read"}, timeout=10)) == {"still": "read"}
    remove_agent(host, name)


def test_a_frame_one_byte_over_the_max_through_one_byte_writes(host: HostProcess) -> None:
    """With a small max_frame, a result one byte over it, written one byte at a time, fails
    only its task with frame_too_large; the link resyncs at the next newline."""
    max_frame = 128 * 1024
    name = deploy(host, ROGUE, name="tight", max_frame=max_frame)
    # "bytes" counts the newline; the limit applies to the line without it.
    output = execute(host, name, "sized", {"bytes": max_frame + 2, "chunk": 1}, timeout=60)
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR
    assert output.error.code == "frame_too_large"
    fits = execute(host, name, "sized", {"bytes": max_frame + 1, "chunk": 1}, timeout=60)
    assert fits.status == agent_io_pb2.TASK_STATUS_SUCCESS
    assert data(execute(host, name, "echo", {"next": 1})) == {"next": 1}
    remove_agent(host, name)


def test_a_stop_whose_caller_gives_up_still_ends_the_process_group(host: HostProcess) -> None:
    """StopAgent runs to the end even when its RPC is cancelled mid-way: an agent ignoring
    SIGTERM is still killed, and nothing of it is left."""
    lingering = {"ROGUE_IGNORE_TERM": "1", "ROGUE_LINGER": "1"}
    name = deploy(host, ROGUE, name="stubborn-stop", env=lingering)
    pid = _agent_pid(host, name)
    with pytest.raises(grpc.RpcError) as error:
        host.supervisor.StopAgent(supervisor_pb2.StopAgentRequest(name=name), timeout=0.3)
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert wait_gone([pid], within=30) == []
    watch_until(host, name, {"STOPPED"})
    remove_agent(host, name)


def _agent_pid(host: HostProcess, name: str) -> int:
    listed = host.supervisor.ListProcesses(
        supervisor_pb2.ListProcessesRequest(agent=name), timeout=10
    )
    return int(listed.processes[0].pid)


def test_restarts_back_off_up_to_the_cap_then_too_many_is_fatal(
    host: HostProcess, tmp_path: Path
) -> None:
    """An agent that dies every time after starting well is restarted after delays that double
    from backoff_base up to backoff_cap (±20 %), and the restart past max_restarts within
    restart_period makes it FATAL."""
    folder = _rogue_folder(
        tmp_path / "flaky",
        "backoff_base = 0.2\nbackoff_cap = 0.8\nstable_after = 0.01\n"
        'max_restarts = 4\nrestart_period = 120\n[env]\nROGUE_EXIT_AFTER_WELCOME = "3"\n',
    )
    host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(spec=supervisor_pb2.AgentSpec(path=str(folder))),
        timeout=30,
    )
    delays: list[float] = []
    # Every event of the name (new to this host), not those after the answer's sequence: the
    # first restart may come before the deploy's answer (taken once the deploy is recorded).
    stream = host.supervisor.WatchEvents(
        supervisor_pb2.WatchEventsRequest(agent="flaky", after_sequence=0),
        timeout=60,
    )
    try:
        for event in stream:
            state = state_name(event.state)
            if state == "BACKOFF":
                delays.append(float(event.reason.rsplit("restarting in ", 1)[1].rstrip("s")))
            elif state == "FATAL":
                assert "too many restarts" in event.reason, event.reason
                break
    finally:
        stream.cancel()
    assert len(delays) == 4, delays
    # 0.2, 0.4, 0.8, 0.8 s, each ±20 %, as the reason states them (to 0.1 s)
    assert delays[0] <= 0.25 and delays[1] >= 0.3 and delays[2] >= 0.6
    assert max(delays) <= 1.0  # never past the cap
    remove_agent(host, "flaky")


def test_an_agent_that_declares_ping_and_stops_answering_is_restarted(
    host: HostProcess, tmp_path: Path
) -> None:
    """The host pings agents that declared ping every ping_interval; three pongs missing for
    ping_timeout each mean a wedged process, which is restarted."""
    folder = _rogue_folder(
        tmp_path / "deaf", 'ping_interval = 0.1\nping_timeout = 0.1\n[env]\nROGUE_PING = "1"\n'
    )
    name = deploy(host, folder)
    first = _agent_pid(host, name)
    restarted = watch_until(host, name, {"BACKOFF", "EXITED", "FATAL"})
    assert "3 pings unanswered" in restarted.reason, restarted.reason
    again = watch_until(host, name, {"RUNNING"}, after=restarted.sequence)
    assert again.pid and again.pid != first
    remove_agent(host, name)
