"""More claims of docs/telemetry.md no other test holds, as a user sees them: real hosts and
agents, grpcio and httpx clients, spans from the tests' OTLP receiver, scrapes parsed with
prometheus_client; every wait is on an answer, an event, a log record, an export or a scrape.

- Traces: `service_name` set in the TOML config is the spans' service.name; a `sample_ratio`
  between 0 and 1 keeps a trace the host starts by its trace id, the trace's children following
  the decision; a caller's `tracestate` reaches the agent in the task frame (and its child
  task's); the span table's `ether.workflow.run` (`ether.workflow`, `ether.run_id`,
  `ether.state`) and `ether.workflow.stage` (`ether.stage`, `ether.run_id`, `ether.state`)
  attributes; a run "linked to the CreateRun (or ResumeRun) span"; `ether.terminal.wait_for`'s
  `ether.wait.waited_s` and its condition kinds `output` and `exit`, "never its pattern".
- Logs: a stderr line read with no task in flight names no task ("with none, neither").
- Metrics: "Counters start at 0 when the host starts"; task counters kept across a replica's
  restart; a stopped agent has no `ether_replica_*` series; `ether_workflow_runs` in the states
  RUNNING, CANCELLED, FAILED and INTERRUPTED; `ether_gateway_sessions` `CLOSED`.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf import json_format

from ether.v1 import agent_io_pb2, supervisor_pb2, workflow_pb2
from ether.v1 import terminal_pb2 as pb
from tests.gateway._support import close_session, open_session
from tests.support.agents import AGENTS, agent_pids, deploy, watch_until
from tests.support.calls import agent_input, data, execute
from tests.support.host import HostProcess, sandbox_grants
from tests.support.metrics import Samples, moved, scrape, value
from tests.support.otlp import OtlpReceiver, ReceivedSpan
from tests.terminals import support as terminals
from tests.workflows import runs

SERVICE = "ether-more-claims"
HALF = 1 << 63  # sample_ratio 0.5: a trace id whose low 64 bits are under this is sampled
# A Python SDK agent of this test: it answers the trace context its task frame carried (its
# own, or its child task's through agent.call), and writes a stderr line when sent SIGUSR1.
CLAIMS_AGENT = """
import asyncio, signal, sys
from ether_agent import Agent, TaskContext

agent = Agent("claims", version="1.0.0", description="telemetry claims", calls=["agent.call"])


def _seen(ctx: TaskContext) -> dict:
    return {"trace_parent": ctx.trace_parent or "", "trace_state": ctx.trace_state or ""}


@agent.action(description="The task frame's trace context.")
def context(ctx: TaskContext) -> dict:
    return _seen(ctx)


@agent.action(description="context, and that of a child task (agent.call).")
async def relay(ctx: TaskContext) -> dict:
    child = await ctx.call_agent("claims", "context", {})
    return {"own": _seen(ctx), "child": child["data"]}


@agent.action(description="On SIGUSR1, once this task has ended, write text to stderr.")
async def arm(text: str) -> dict:
    def write() -> None:
        sys.stderr.write(f"INFO: {text}\\n")
        sys.stderr.flush()

    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, write)
    return {"armed": text}


if __name__ == "__main__":
    agent.run()
"""


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as found:
        yield found


def _config(folder: Path, receiver: OtlpReceiver, more: str = "") -> Path:
    config = folder / "host.toml"
    config.write_text(
        sandbox_grants((folder,))
        + f'[telemetry]\notlp_endpoint = "{receiver.endpoint}"\nexport_delay = 0.05\n'
        + more
    )
    return config


def _start(state: Path, config: Path, folder: Path) -> HostProcess:
    host = HostProcess(state, "--config", str(config), shared=(folder,), http=True)
    host.wait_serving()
    return host


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory, receiver: OtlpReceiver) -> Iterator[HostProcess]:
    """Traces to ``receiver`` under SERVICE, metrics, an HTTP listener; flow (workflows),
    chatter (gateway sessions) and this file's claims agent."""
    folder = tmp_path_factory.mktemp("telemetry-more")
    config = _config(folder, receiver, f'service_name = "{SERVICE}"\nmetrics = true\n')
    (folder / "claims").mkdir()
    (folder / "claims" / "agent.py").write_text(CLAIMS_AGENT)
    (folder / "claims" / "agent.toml").write_text(
        'name = "claims"\nlanguage = "python"\ncalls = ["agent.call"]\n'
    )
    started = HostProcess(folder / "state", "--config", str(config), shared=(folder,), http=True)
    try:
        started.wait_serving()
        for path in (AGENTS / "flow", AGENTS / "chatter", folder / "claims"):
            deploy(started, path)
        yield started
    finally:
        assert started.stop() == 0


@pytest.fixture(scope="module")
def half(tmp_path_factory: pytest.TempPathFactory, receiver: OtlpReceiver) -> Iterator[HostProcess]:
    """A host with ``sample_ratio = 0.5``, running traced and noisy."""
    folder = tmp_path_factory.mktemp("sampling-half")
    started = _start(folder / "state", _config(folder, receiver, "sample_ratio = 0.5\n"), folder)
    try:
        deploy(started, AGENTS / "traced")
        deploy(started, AGENTS / "noisy")
        yield started
    finally:
        assert started.stop() == 0


def _traceparent() -> tuple[tuple[str, str], str]:
    trace_id = secrets.token_hex(16)
    return ("traceparent", f"00-{trace_id}-{secrets.token_hex(8)}-01"), trace_id


def _trace(receiver: OtlpReceiver, trace_id: str, *names: str) -> dict[str, ReceivedSpan]:
    """The trace's spans by name, once a span of each of ``names`` was exported."""
    spans = receiver.wait_for(
        lambda got: set(names) <= {s.name for s in got if s.trace_id == trace_id}
    )
    return {s.name: s for s in spans if s.trace_id == trace_id}


def _run_spans(receiver: OtlpReceiver, name: str, run_id: str, count: int) -> list[ReceivedSpan]:
    """The ``count`` spans named ``name`` of the run ``run_id``, once exported."""

    def ours(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
        return [s for s in spans if s.name == name and s.attributes.get("ether.run_id") == run_id]

    return ours(receiver.wait_for(lambda spans: len(ours(spans)) >= count))


def test_service_name_from_the_config_names_the_spans(
    host: HostProcess, receiver: OtlpReceiver
) -> None:
    """`service_name = "..."  # the spans' service.name`, set in the TOML config: the RPC's
    and the task's span of a call carry it as their service.name."""
    traceparent, trace_id = _traceparent()
    request = agent_io_pb2.ExecuteRequest(input=agent_input("claims", "context"))
    host.agents.Execute(request, timeout=30, metadata=(traceparent,))
    spans = _trace(
        receiver, trace_id, "ether.v1.AgentIOService/Execute", "ether.task claims.context"
    )
    assert {span.service for span in spans.values()} == {SERVICE}


def test_a_callers_tracestate_reaches_the_agent_and_its_child_task(host: HostProcess) -> None:
    """ "The `task` frame carries the task span's context as `traceparent` and `tracestate`": a
    call with a W3C `tracestate` beside its `traceparent` gives the agent (ctx.trace_state)
    that tracestate, and so does the task frame of the child task its agent.call starts."""
    traceparent, trace_id = _traceparent()
    state = f"vendor=v{secrets.token_hex(4)},other=1"
    request = agent_io_pb2.ExecuteRequest(input=agent_input("claims", "relay"))
    output = host.agents.Execute(
        request, timeout=30, metadata=(traceparent, ("tracestate", state))
    ).output
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    answered = data(output)
    for seen in (answered["own"], answered["child"]):
        assert seen["trace_parent"].startswith(f"00-{trace_id}-")
        assert seen["trace_state"] == state


def test_a_sample_ratio_keeps_traces_by_their_id_and_children_follow(
    half: HostProcess, receiver: OtlpReceiver
) -> None:
    """`sample_ratio = 0.5` (the SDK's TraceIdRatioBased: a trace the host starts is kept when
    its id's low 64 bits fall under the ratio): calls without a traceparent until both
    decisions were seen; each agent's traceparent is flagged as its id says; a kept trace is
    exported whole (the RPC, the task, its agent.call and the child task following the
    parent), a dropped one not at all (checked after a later sampled call's spans came in:
    spans go out in the order they end)."""
    decided: dict[str, bool] = {}
    while len(decided) < 8 or len(set(decided.values())) < 2:
        assert len(decided) < 64, f"one decision only: {set(decided.values())}"
        text = f"half {uuid.uuid4().hex}"
        output = execute(half, "traced", "say", {"text": text, "group": text})
        assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
        _, trace_id, _, flags = data(output)["trace_parent"].split("-")
        assert flags == ("01" if int(trace_id[16:], 16) < HALF else "00"), trace_id
        decided[trace_id] = flags == "01"
    family = ("ether.v1.AgentIOService/Execute", "ether.task traced.say", "agent.call")
    kept = [trace_id for trace_id, sampled in decided.items() if sampled]
    for trace_id in kept:
        _trace(receiver, trace_id, *family, "ether.task noisy.echo")
    marker, marker_trace = _traceparent()
    request = agent_io_pb2.ExecuteRequest(input=agent_input("noisy", "echo"))
    half.agents.Execute(request, timeout=30, metadata=(marker,))
    _trace(receiver, marker_trace, "ether.task noisy.echo")
    dropped = {trace_id for trace_id, sampled in decided.items() if not sampled}
    assert [s.name for s in receiver.spans() if s.trace_id in dropped] == []


def test_workflow_run_and_stage_spans_carry_their_attributes(
    host: HostProcess, receiver: OtlpReceiver
) -> None:
    """The span table: `ether.workflow.run NAME` has `ether.workflow`, `ether.run_id`,
    `ether.state`; `ether.workflow.stage NAME` has `ether.stage`, `ether.run_id`,
    `ether.state`. A run whose first stage succeeds and second fails: the run FAILED, the
    stages SUCCEEDED and FAILED."""
    spec = (
        "name: attrs\nstages:\n  - {name: fine, agent: flow, action: echo}\n"
        "  - {name: broken, agent: flow, action: fail}\n"
    )
    run = runs.run_to_end(host, spec)
    assert runs.state(run) == "FAILED"
    [span] = _run_spans(receiver, "ether.workflow.run attrs", run.id, 1)
    keys = ("ether.workflow", "ether.run_id", "ether.state")
    assert [span.attributes.get(key) for key in keys] == ["attrs", run.id, "FAILED"]
    keys = ("ether.stage", "ether.run_id", "ether.state")
    for stage, state in (("fine", "SUCCEEDED"), ("broken", "FAILED")):
        [found] = _run_spans(receiver, f"ether.workflow.stage {stage}", run.id, 1)
        assert found.trace_id == span.trace_id and found.parent_span_id == span.span_id
        assert [found.attributes.get(key) for key in keys] == [stage, run.id, state]


def test_terminal_wait_spans_say_how_long_they_waited_and_never_the_pattern(
    host: HostProcess, receiver: OtlpReceiver
) -> None:
    """`ether.terminal.wait_for` has `ether.wait.condition` (`output`, `exit`) and
    `ether.wait.waited_s`; "a terminal wait names the kind of condition, never its pattern".
    An output wait on a secret pattern (a line typed into cat, echoed, and cat's copy of it),
    then an exit wait once cat reads end of input: each span's waited_s is the `waited` of its
    WaitFor answer, and the secret is on no span."""
    secret = f"go-{uuid.uuid4().hex}"
    terminal = terminals.create(host, ["cat"])
    try:
        terminals.write(host, terminal.id, secret + "\r")
        answers: dict[str, pb.WaitForResponse] = {}
        for kind, condition in (
            (
                "output",
                {"output": pb.OutputCondition(regex=rf"{secret}\s+{secret}\s", after_offset=0)},
            ),
            ("exit", {"exit": pb.ExitCondition()}),
        ):
            if kind == "exit":
                terminals.write(host, terminal.id, "\x04")  # end of input: cat exits
            traceparent, trace_id = _traceparent()
            request = pb.WaitForRequest(
                terminal_id=terminal.id, timeout=terminals.seconds(30), **condition
            )
            answer = host.terminals.WaitFor(request, timeout=40, metadata=(traceparent,))
            wait = _trace(receiver, trace_id, "ether.terminal.wait_for")["ether.terminal.wait_for"]
            assert wait.attributes["ether.wait.condition"] == kind
            waited = answer.waited.ToNanoseconds() / 1e9
            assert wait.attributes["ether.wait.waited_s"] == pytest.approx(waited, abs=1e-6)
            answers[kind] = answer
        assert answers["output"].match.startswith(secret)
        assert answers["exit"].HasField("exit_status")
    finally:
        terminals.close(host, terminal.id)
    assert not [s.name for s in receiver.spans() if secret in repr(s)]


def _stderr_fields(host: HostProcess, agent: str, message: str) -> dict[str, Any]:
    """The fields of the agent's stderr record ``message`` (StreamLogs, followed)."""
    request = supervisor_pb2.StreamLogsRequest(agent=agent, tail_lines=10000, follow=True)
    stream = host.supervisor.StreamLogs(request, timeout=60)
    try:
        for line in stream:
            if line.message == message:
                return json_format.MessageToDict(line.fields)
    finally:
        stream.cancel()
    raise AssertionError(f"the log of {agent} ended before {message!r}")


def test_a_stderr_line_read_with_no_task_in_flight_names_none(host: HostProcess) -> None:
    """A stderr line is attributed "from what was in flight on that replica when it read the
    line: ... with none, neither": the claims agent writes a line on SIGUSR1 after the traced
    task that armed it was answered; its record has no `task_id`, `trace_id`,
    `tasks_in_flight` nor `task_ids`."""
    text = f"outside {uuid.uuid4().hex}"
    traceparent, _ = _traceparent()
    request = agent_io_pb2.ExecuteRequest(input=agent_input("claims", "arm", {"text": text}))
    output = host.agents.Execute(request, timeout=30, metadata=(traceparent,)).output
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    [pid] = agent_pids(host, "claims")
    assert pid > 0
    os.kill(pid, signal.SIGUSR1)  # the claims agent's replica, which this module deployed
    fields = _stderr_fields(host, "claims", text)
    assert not {"task_id", "trace_id", "tasks_in_flight", "task_ids"} & fields.keys(), fields


def test_counters_outlive_a_restart_and_a_stopped_agent_has_no_replica_series(
    host: HostProcess,
) -> None:
    """Counters of an agent's tasks keep counting across its replica's restart (BACKOFF, then
    STARTING: `ether_agent_restarts_total` + 1); once it is stopped its state reads STOPPED,
    "A replica that is not running (stopped, ...) has no `ether_replica_*` series", and its
    task counter keeps what it counted."""
    name = deploy(host, AGENTS / "noisy", name="restarted")
    echo = {"agent": name, "action": "echo", "status": "SUCCESS"}
    with httpx.Client(base_url=host.http_address, timeout=30) as client:
        before = scrape(client)
        for n in range(2):
            execute(host, name, "echo", {"n": n})
        [pid] = agent_pids(host, name)
        os.kill(pid, signal.SIGKILL)  # the replica this test deployed
        backoff = watch_until(host, name, {"BACKOFF"})
        watch_until(host, name, {"RUNNING"}, after=backoff.sequence)
        execute(host, name, "echo", {"n": 2})
        running = scrape(client)
        host.supervisor.StopAgent(supervisor_pb2.StopAgentRequest(name=name), timeout=60)
        stopped = scrape(client)
    assert moved(before, running, "ether_tasks_total", **echo) == 3
    assert moved(before, running, "ether_agent_restarts_total", agent=name) == 1
    assert value(running, "ether_replica_resident_memory_bytes", agent=name, replica="0") > 0
    assert value(stopped, "ether_agent_state", agent=name, state="STOPPED") == 1
    assert moved(before, stopped, "ether_tasks_total", **echo) == 3
    replica_series = [
        key for key in stopped if key[0].startswith("ether_replica_") and ("agent", name) in key[1]
    ]
    assert replica_series == []


def test_run_and_session_gauges_follow_their_other_states(host: HostProcess) -> None:
    """`ether_workflow_runs` by state: a run holding in its stage counts RUNNING, then
    CANCELLED once cancelled, and a run whose stage fails counts FAILED;
    `ether_gateway_sessions`: a session closed moves from `OPEN` to `CLOSED`."""
    tag = uuid.uuid4().hex
    spec = (
        f"name: held\nstages:\n  - {{name: h, agent: flow, action: hold, params: {{tag: {tag}}}}}\n"
    )
    with httpx.Client(base_url=host.http_address, timeout=30) as client:
        before = scrape(client)
        run = runs.create(host, spec)
        runs.logged(host, "flow", "holding", {tag})
        holding = scrape(client)
        host.workflows.CancelRun(workflow_pb2.CancelRunRequest(run_id=run.id), timeout=30)
        assert runs.state(runs.wait(host, run.id)) == "CANCELLED"
        failed = runs.run_to_end(
            host, "name: f\nstages:\n  - {name: x, agent: flow, action: fail}\n"
        )
        assert runs.state(failed) == "FAILED"
        session = open_session(host, agent="chatter")
        opened = scrape(client)
        close_session(host, session.id)
        after = scrape(client)

    def runs_moved(samples: Samples, state: str) -> float:
        return moved(before, samples, "ether_workflow_runs", state=state)

    assert runs_moved(holding, "RUNNING") == 1
    assert [runs_moved(after, s) for s in ("RUNNING", "CANCELLED", "FAILED")] == [0, 1, 1]
    assert moved(before, opened, "ether_gateway_sessions", state="OPEN") == 1
    assert moved(opened, after, "ether_gateway_sessions", state="OPEN") == -1
    assert moved(opened, after, "ether_gateway_sessions", state="CLOSED") == 1


def test_a_resumed_run_is_linked_to_resume_run_and_counters_start_at_zero(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """A run cut by the host's stop ends INTERRUPTED (its span says so, linked to CreateRun);
    on the next host "Counters start at 0" (no task counted, the interrupted run in
    `ether_workflow_runs` INTERRUPTED); ResumeRun with a traceparent: the resumed run's span
    starts a trace of its own, "**linked** to the ... ResumeRun span", and ends SUCCEEDED."""
    config = _config(tmp_path, receiver, "metrics = true\n")
    marker = tmp_path / "marker"
    spec = (
        "name: resumable\nstages:\n"
        f"  - {{name: w, agent: flow, action: gate, inputs: [{json.dumps(str(marker))}], "
        "input_param: marker}\n"
    )
    first = _start(tmp_path / "state", config, tmp_path)
    try:
        deploy(first, AGENTS / "flow")
        created, create_trace = _traceparent()
        request = workflow_pb2.CreateRunRequest(spec_text=spec)
        run = first.workflows.CreateRun(request, timeout=30, metadata=(created,)).run
        runs.logged(first, "flow", "gate waiting", {str(marker)})
    finally:
        assert first.stop() == 0
    second = _start(tmp_path / "state", config, tmp_path)
    try:
        watch_until(second, "flow", {"RUNNING"})
        with httpx.Client(base_url=second.http_address, timeout=30) as client:
            fresh = scrape(client)
            resumed, resume_trace = _traceparent()
            second.workflows.ResumeRun(
                workflow_pb2.ResumeRunRequest(run_id=run.id), timeout=30, metadata=(resumed,)
            )
            assert runs.state(runs.wait(second, run.id)) == "SUCCEEDED"
            after = scrape(client)
    finally:
        assert second.stop() == 0
    assert [key for key, count in fresh.items() if key[0] == "ether_tasks_total" and count] == []
    assert value(fresh, "ether_workflow_runs", state="INTERRUPTED") == 1
    gate = {"agent": "flow", "action": "gate", "status": "SUCCESS"}
    assert value(after, "ether_tasks_total", **gate) == 1
    assert value(after, "ether_workflow_runs", state="INTERRUPTED") == 0
    assert value(after, "ether_workflow_runs", state="SUCCEEDED") == 1

    create_span = _trace(receiver, create_trace, "ether.v1.WorkflowService/CreateRun")
    resume_span = _trace(receiver, resume_trace, "ether.v1.WorkflowService/ResumeRun")
    spans = _run_spans(receiver, "ether.workflow.run resumable", run.id, 2)
    by_state = {span.attributes["ether.state"]: span for span in spans}
    assert by_state.keys() == {"INTERRUPTED", "SUCCEEDED"}
    cut, again = by_state["INTERRUPTED"], by_state["SUCCEEDED"]
    assert cut.links == ((create_trace, create_span["ether.v1.WorkflowService/CreateRun"].span_id),)
    assert again.parent_span_id == "" and again.trace_id not in (resume_trace, cut.trace_id)
    assert again.links == (
        (resume_trace, resume_span["ether.v1.WorkflowService/ResumeRun"].span_id),
    )
