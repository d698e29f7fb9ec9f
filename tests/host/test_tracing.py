"""Traces (docs/telemetry.md): a host with ``[telemetry] otlp_endpoint`` exports its spans to a
real OTLP/gRPC receiver; one call across Python, Go and TypeScript agents is one tree; a
client's ``traceparent`` is continued; an agent's own OpenTelemetry span sits under its task;
log lines join the trace; an agent's stderr names the task it was written during."""

from __future__ import annotations

import json
import secrets
import shutil
import socket
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf import json_format, struct_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ether.v1 import agent_io_pb2, supervisor_pb2, workflow_pb2
from ether.v1 import terminal_pb2 as pb
from tests.gateway._support import Conversation, Recorder, open_session
from tests.support.agents import AGENTS, EXAMPLES, deploy
from tests.support.calls import data, execute, struct
from tests.support.host import ROOT, HostProcess, sandbox_grants
from tests.support.otlp import OtlpReceiver, ReceivedSpan
from tests.terminals.support import create, seconds

SERVER, INTERNAL = 2, 1  # opentelemetry.proto.trace.v1.Span.SpanKind
ERROR = 2  # Status.StatusCode


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as found:
        yield found


@pytest.fixture(scope="module")
def traced_host(
    tmp_path_factory: pytest.TempPathFactory, receiver: OtlpReceiver
) -> Iterator[HostProcess]:
    """A host tracing to ``receiver``; the traced test agent may reach it (network = host)."""
    folder = tmp_path_factory.mktemp("traced-host")
    config = folder / "host.toml"
    config.write_text(
        sandbox_grants()
        + '[sandbox.agents.traced]\nnetwork = "host"\n'
        + f'[telemetry]\notlp_endpoint = "{receiver.endpoint}"\nexport_delay = 0.05\n'
    )
    host = HostProcess(folder / "state", "--config", str(config), http=True)
    try:
        host.wait_serving()
        for name in ("scout", "wordcount", "report"):
            deploy(host, EXAMPLES / name)
        for name in ("noisy", "traced", "chatter"):
            deploy(host, AGENTS / name)
        egress = {"allow_hosts": ["127.0.0.1"], "allow_addresses": ["127.0.0.1/32"], "burst": 100}
        deploy(host, AGENTS / "toolbox", name="fetcher", config=struct({"egress": egress}))
        yield host
    finally:
        host.stop()


def _traceparent() -> tuple[str, str, str]:
    """A client's own (traceparent, trace id, span id), sampled."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def _in_trace(trace_id: str, *names: str) -> Any:
    """A wait_for predicate: the trace holds a span of every name in ``names``."""

    def predicate(spans: list[ReceivedSpan]) -> bool:
        have = {span.name for span in spans if span.trace_id == trace_id}
        return all(name in have for name in names)

    return predicate


def _one(spans: list[ReceivedSpan], trace_id: str, name: str) -> ReceivedSpan:
    found = [span for span in spans if span.trace_id == trace_id and span.name == name]
    assert len(found) == 1, f"{len(found)} spans named {name!r} in the trace"
    return found[0]


def _children(spans: list[ReceivedSpan], parent: ReceivedSpan) -> list[ReceivedSpan]:
    return [
        span
        for span in spans
        if span.trace_id == parent.trace_id and span.parent_span_id == parent.span_id
    ]


def test_one_survey_is_one_tree_across_python_go_and_typescript(
    traced_host: HostProcess, receiver: OtlpReceiver
) -> None:
    """Execute scout.survey: the RPC's span holds the scout task's span, which holds one
    agent.call span per call it made, each holding the Go and the TypeScript task's span."""
    output = execute(traced_host, "scout", "survey", {"path": str(ROOT / "proto")}, timeout=60)
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    spans = receiver.wait_for(
        lambda spans: any(s.attributes.get("ether.task_id") == output.task_id for s in spans)
    )
    scout = next(s for s in spans if s.attributes.get("ether.task_id") == output.task_id)
    trace_id = scout.trace_id
    spans = receiver.wait_for(
        _in_trace(
            trace_id,
            "ether.v1.AgentIOService/Execute",
            "ether.task wordcount.count",
            "ether.task report.render",
        )
    )
    rpc = _one(spans, trace_id, "ether.v1.AgentIOService/Execute")
    assert rpc.kind == SERVER and rpc.parent_span_id == ""
    assert rpc.attributes["rpc.system"] == "grpc"
    assert rpc.attributes["rpc.service"] == "ether.v1.AgentIOService"
    assert rpc.attributes["rpc.method"] == "Execute"
    assert rpc.attributes["rpc.grpc.status_code"] == 0
    assert scout.name == "ether.task scout.survey" and scout.parent_span_id == rpc.span_id
    assert scout.attributes["gen_ai.agent.name"] == "scout"
    assert scout.attributes["ether.action"] == "survey"
    assert scout.attributes["ether.pid"] > 0
    assert "ether.params" not in scout.attributes  # payloads only when record_payloads
    calls = sorted(_children(spans, scout), key=lambda span: span.start_ns)
    assert [span.name for span in calls] == ["agent.call", "agent.call"]
    assert [span.attributes["ether.call.agent"] for span in calls] == ["wordcount", "report"]
    go = _one(spans, trace_id, "ether.task wordcount.count")
    typescript = _one(spans, trace_id, "ether.task report.render")
    assert go.parent_span_id == calls[0].span_id
    assert typescript.parent_span_id == calls[1].span_id
    assert {span.service for span in (rpc, scout, *calls, go, typescript)} == {"ether"}


def test_a_clients_traceparent_is_continued(
    traced_host: HostProcess, receiver: OtlpReceiver
) -> None:
    """A call with a W3C traceparent in its metadata: the host's spans join the client's trace,
    the RPC's span a child of the client's span."""
    traceparent, trace_id, client_span = _traceparent()
    request = agent_io_pb2.ExecuteRequest(
        input=agent_io_pb2.AgentInput(agent="noisy", action="echo")
    )
    traced_host.agents.Execute(request, timeout=30, metadata=(("traceparent", traceparent),))
    spans = receiver.wait_for(
        _in_trace(trace_id, "ether.v1.AgentIOService/Execute", "ether.task noisy.echo")
    )
    rpc = _one(spans, trace_id, "ether.v1.AgentIOService/Execute")
    assert rpc.parent_span_id == client_span
    assert _one(spans, trace_id, "ether.task noisy.echo").parent_span_id == rpc.span_id


def test_an_http_requests_traceparent_is_continued(
    traced_host: HostProcess, receiver: OtlpReceiver
) -> None:
    """A request to the HTTP listener with a traceparent header: its SERVER span joins the
    client's trace."""
    traceparent, trace_id, client_span = _traceparent()
    path = "/.well-known/agent-card.json"
    response = httpx.get(
        f"{traced_host.http_address}{path}", headers={"traceparent": traceparent}, timeout=10
    )
    assert response.status_code == 200
    spans = receiver.wait_for(_in_trace(trace_id, f"GET {path}"))
    span = _one(spans, trace_id, f"GET {path}")
    assert span.kind == SERVER and span.parent_span_id == client_span
    assert span.attributes["http.response.status_code"] == 200


def test_health_checks_are_not_traced(traced_host: HostProcess, receiver: OtlpReceiver) -> None:
    """Probes (grpc.health.v1 Check, /healthz, /readyz) make no span, even with a traceparent;
    the Execute sent after them with the same one does."""
    traceparent, trace_id, _ = _traceparent()
    metadata = (("traceparent", traceparent),)
    health = health_pb2_grpc.HealthStub(traced_host.channel)
    health.Check(health_pb2.HealthCheckRequest(service=""), timeout=10, metadata=metadata)
    for path in ("/healthz", "/readyz"):
        httpx.get(f"{traced_host.http_address}{path}", headers=dict(metadata), timeout=10)
    request = agent_io_pb2.ExecuteRequest(
        input=agent_io_pb2.AgentInput(agent="noisy", action="echo")
    )
    traced_host.agents.Execute(request, timeout=30, metadata=metadata)
    # Spans go out in the order they end: the probes' would be in by now.
    spans = receiver.wait_for(_in_trace(trace_id, "ether.v1.AgentIOService/Execute"))
    names = sorted(s.name for s in spans if s.trace_id == trace_id)
    assert names == ["ether.task noisy.echo", "ether.v1.AgentIOService/Execute"]


def test_a_failed_call_marks_its_span_error(
    traced_host: HostProcess, receiver: OtlpReceiver
) -> None:
    """An RPC the host refuses: its span is ERROR with the status and the message."""
    traceparent, trace_id, _ = _traceparent()
    request = agent_io_pb2.ExecuteRequest(input=agent_io_pb2.AgentInput(agent="nobody"))
    with pytest.raises(Exception, match="nobody"):
        traced_host.agents.Execute(request, timeout=30, metadata=(("traceparent", traceparent),))
    spans = receiver.wait_for(_in_trace(trace_id, "ether.v1.AgentIOService/Execute"))
    rpc = _one(spans, trace_id, "ether.v1.AgentIOService/Execute")
    assert rpc.status_code == ERROR
    assert rpc.status_message.startswith("NOT_FOUND") and "nobody" in rpc.status_message
    assert rpc.attributes["rpc.grpc.status_code"] == 5


def test_a_failed_task_marks_its_span_error(
    traced_host: HostProcess, receiver: OtlpReceiver
) -> None:
    """A task the agent fails: its span is ERROR with the agent's error code."""
    traceparent, trace_id, _ = _traceparent()
    request = agent_io_pb2.ExecuteRequest(
        input=agent_io_pb2.AgentInput(
            agent="scout", action="survey", params=struct({"path": "/no/such/folder"})
        )
    )
    output = traced_host.agents.Execute(
        request, timeout=30, metadata=(("traceparent", traceparent),)
    ).output
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR
    spans = receiver.wait_for(_in_trace(trace_id, "ether.task scout.survey"))
    task = _one(spans, trace_id, "ether.task scout.survey")
    assert task.status_code == ERROR and task.status_message.startswith(output.error.code)
    assert task.attributes["error.type"] == output.error.code
    assert task.attributes["ether.status"] == "ERROR"


def test_a_wait_for_a_free_slot_is_a_span_under_the_task(
    traced_host: HostProcess, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    """A task that finds its agent's one slot busy waits in the queue: an ether.queue_wait span
    under its task's span, ended before the task ran."""
    folder = tmp_path / "oneslot"
    folder.mkdir()
    shutil.copy(AGENTS / "rogue" / "rogue.py", folder / "rogue.py")
    (folder / "agent.toml").write_text(
        'language = "python"\ncommand = ["python3", "rogue.py"]\n[env]\nROGUE_CONCURRENCY = "1"\n'
    )
    name = deploy(traced_host, folder, name="oneslot")

    def agent() -> agent_io_pb2.AgentInfo:
        request = agent_io_pb2.GetAgentRequest(name=name)
        return traced_host.agents.GetAgent(request, timeout=10).agent

    def until(condition: Any, within: float = 10.0) -> None:
        """Ask the host again until ``condition()`` holds: state, not time, is waited on."""
        deadline = time.monotonic() + within
        while not condition():
            assert time.monotonic() < deadline, "the host never reached the expected state"

    nap = agent_io_pb2.ExecuteRequest(
        input=agent_io_pb2.AgentInput(agent=name, action="nap", params=struct({"ms": 3000}))
    )
    busy = traced_host.agents.Execute.future(nap, timeout=30)
    until(lambda: agent().in_flight == 1)
    traceparent, trace_id, _ = _traceparent()
    waiting = traced_host.agents.Execute.future(
        nap, timeout=30, metadata=(("traceparent", traceparent),)
    )
    until(lambda: agent().queued == 1)
    assert busy.result().output.status == agent_io_pb2.TASK_STATUS_SUCCESS
    assert waiting.result().output.status == agent_io_pb2.TASK_STATUS_SUCCESS
    spans = receiver.wait_for(_in_trace(trace_id, "ether.queue_wait", f"ether.task {name}.nap"))
    task = _one(spans, trace_id, f"ether.task {name}.nap")
    queued = _one(spans, trace_id, "ether.queue_wait")
    assert queued.parent_span_id == task.span_id
    assert task.start_ns <= queued.start_ns <= queued.end_ns <= task.end_ns


def test_an_agents_own_span_sits_under_its_task(
    traced_host: HostProcess, receiver: OtlpReceiver
) -> None:
    """The traced agent opens a span with the OpenTelemetry API under ctx.trace_parent and
    calls noisy inside it: its span is the task span's child, and the call's parent."""
    traceparent, trace_id, _ = _traceparent()
    request = agent_io_pb2.ExecuteRequest(
        input=agent_io_pb2.AgentInput(
            agent="traced",
            action="work",
            params=json_format.ParseDict({"endpoint": receiver.endpoint}, struct_pb2.Struct()),
        )
    )
    output = traced_host.agents.Execute(
        request, timeout=30, metadata=(("traceparent", traceparent),)
    ).output
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    spans = receiver.wait_for(
        _in_trace(trace_id, "ether.task traced.work", "traced.own_work", "ether.task noisy.echo")
    )
    task = _one(spans, trace_id, "ether.task traced.work")
    own = _one(spans, trace_id, "traced.own_work")
    assert own.service == "traced-agent"
    assert own.parent_span_id == task.span_id
    assert data(output)["trace_parent"] == f"00-{trace_id}-{task.span_id}-01"
    call = _one(spans, trace_id, "agent.call")
    assert call.parent_span_id == own.span_id
    assert _one(spans, trace_id, "ether.task noisy.echo").parent_span_id == call.span_id


def test_host_log_lines_carry_the_trace(traced_host: HostProcess, receiver: OtlpReceiver) -> None:
    """The host's line for a traced call names its trace and its span."""
    traceparent, trace_id, _ = _traceparent()
    request = agent_io_pb2.ExecuteRequest(
        input=agent_io_pb2.AgentInput(agent="noisy", action="echo")
    )
    traced_host.agents.Execute(request, timeout=30, metadata=(("traceparent", traceparent),))
    spans = receiver.wait_for(_in_trace(trace_id, "ether.v1.AgentIOService/Execute"))
    rpc = _one(spans, trace_id, "ether.v1.AgentIOService/Execute")
    line = traced_host.wait_for_log(
        lambda record: record.get("event") == "rpc" and record.get("trace_id") == trace_id
    )
    assert line["span_id"] == rpc.span_id
    assert line["method"] == "/ether.v1.AgentIOService/Execute"


def test_a_workflow_run_is_a_trace_linked_to_the_call_that_made_it(
    traced_host: HostProcess, receiver: OtlpReceiver
) -> None:
    """A run outlives CreateRun: its span starts a trace of its own, linked to the CreateRun
    span; each stage's span is the run's child, and its tasks' spans the stage's."""
    traceparent, trace_id, _ = _traceparent()
    spec = "name: traced\nstages:\n  - {name: first, agent: noisy, action: echo, inputs: [1, 2]}\n"
    run = traced_host.workflows.CreateRun(
        workflow_pb2.CreateRunRequest(spec_text=spec),
        timeout=30,
        metadata=(("traceparent", traceparent),),
    ).run
    ended = traced_host.workflows.WaitRun(workflow_pb2.WaitRunRequest(run_id=run.id), timeout=60)
    assert ended.run.state == workflow_pb2.RUN_STATE_SUCCEEDED
    spans = receiver.wait_for(
        lambda spans: (
            any(
                s.name == "ether.workflow.run traced" and s.attributes.get("ether.run_id") == run.id
                for s in spans
            )
            and _in_trace(trace_id, "ether.v1.WorkflowService/CreateRun")(spans)
        )
    )
    create_span = _one(spans, trace_id, "ether.v1.WorkflowService/CreateRun")
    run_span = next(
        s
        for s in spans
        if s.name == "ether.workflow.run traced" and s.attributes["ether.run_id"] == run.id
    )
    assert run_span.parent_span_id == "" and run_span.trace_id != trace_id
    assert run_span.links == ((trace_id, create_span.span_id),)
    assert run_span.attributes["ether.state"] == "SUCCEEDED"
    spans = receiver.wait_for(
        lambda spans: (
            len(
                [
                    s
                    for s in spans
                    if s.trace_id == run_span.trace_id and s.name == "ether.task noisy.echo"
                ]
            )
            == 2
        )
    )
    stage = _one(spans, run_span.trace_id, "ether.workflow.stage first")
    assert stage.parent_span_id == run_span.span_id
    tasks = [s for s in _children(spans, stage) if s.name == "ether.task noisy.echo"]
    assert len(tasks) == 2
    assert all(task.attributes["ether.run_id"] == run.id for task in tasks)


def test_a_gateway_turn_is_a_trace_linked_to_the_message(
    traced_host: HostProcess, receiver: OtlpReceiver
) -> None:
    """A session's turn: its span starts a trace of its own, linked to the Converse call that
    sent the message; the gateway agent's task is its child."""
    traceparent, trace_id, _ = _traceparent()
    session = open_session(traced_host, agent="chatter")
    talk = Conversation(traced_host, session.id, call_metadata=[("traceparent", traceparent)])
    talk.turn("hello")
    talk.close()
    spans = receiver.wait_for(
        lambda spans: (
            any(
                s.name == "ether.gateway.turn" and s.attributes["ether.session_id"] == session.id
                for s in spans
            )
            and _in_trace(trace_id, "ether.v1.GatewayService/Converse")(spans)
        )
    )
    converse = _one(spans, trace_id, "ether.v1.GatewayService/Converse")
    turn = next(
        s
        for s in spans
        if s.name == "ether.gateway.turn" and s.attributes["ether.session_id"] == session.id
    )
    assert turn.parent_span_id == "" and turn.links == ((trace_id, converse.span_id),)
    assert turn.attributes["ether.turn"] == 1
    spans = receiver.wait_for(lambda spans: any(s.parent_span_id == turn.span_id for s in spans))
    [task] = _children(spans, turn)
    assert task.name.startswith("ether.task chatter")


def test_a_fetch_is_a_span_that_names_the_host_not_the_url(
    traced_host: HostProcess, receiver: OtlpReceiver
) -> None:
    """net.fetch: a span under the task's, with the method, the host and the answer's status;
    the URL's path and query (which may hold secrets) are nowhere in it."""
    web = Recorder()
    try:
        traceparent, trace_id, _ = _traceparent()
        secret = uuid.uuid4().hex
        request = agent_io_pb2.ExecuteRequest(
            input=agent_io_pb2.AgentInput(
                agent="fetcher",
                action="get",
                params=struct({"url": web.url(f"/hello?token={secret}")}),
            )
        )
        output = traced_host.agents.Execute(
            request, timeout=30, metadata=(("traceparent", traceparent),)
        ).output
        assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    finally:
        web.stop()
    spans = receiver.wait_for(_in_trace(trace_id, "ether.task fetcher.get", "net.fetch"))
    fetch = _one(spans, trace_id, "net.fetch")
    assert fetch.parent_span_id == _one(spans, trace_id, "ether.task fetcher.get").span_id
    assert fetch.attributes["http.request.method"] == "GET"
    assert fetch.attributes["server.address"] == "127.0.0.1"
    assert fetch.attributes["http.response.status_code"] == 200
    assert fetch.attributes["ether.egress.outcome"] == "ALLOWED"
    assert not [s for s in spans if secret in repr(s)]


def test_a_terminal_wait_is_a_span(traced_host: HostProcess, receiver: OtlpReceiver) -> None:
    """WaitFor: a span under the RPC's, naming the terminal and the kind of condition."""
    terminal = create(traced_host, command="echo ready; sleep 60")
    traceparent, trace_id, _ = _traceparent()
    try:
        traced_host.terminals.WaitFor(
            pb.WaitForRequest(
                terminal_id=terminal.id,
                timeout=seconds(30),
                screen=pb.ScreenCondition(regex="ready"),
            ),
            timeout=40,
            metadata=(("traceparent", traceparent),),
        )
    finally:
        traced_host.terminals.CloseTerminal(
            pb.CloseTerminalRequest(terminal_id=terminal.id), timeout=30
        )
    spans = receiver.wait_for(
        _in_trace(trace_id, "ether.v1.TerminalService/WaitFor", "ether.terminal.wait_for")
    )
    wait = _one(spans, trace_id, "ether.terminal.wait_for")
    assert wait.parent_span_id == _one(spans, trace_id, "ether.v1.TerminalService/WaitFor").span_id
    assert wait.attributes["ether.terminal_id"] == terminal.id
    assert wait.attributes["ether.wait.condition"] == "screen"


def _stderr_fields(host: HostProcess, agent: str, message: str) -> dict[str, Any]:
    """The fields of the agent's stderr record ``message`` (StreamLogs)."""
    stream = host.supervisor.StreamLogs(
        supervisor_pb2.StreamLogsRequest(agent=agent, tail_lines=10000, follow=True), timeout=30
    )
    try:
        for line in stream:
            if line.message == message:
                return json_format.MessageToDict(line.fields)
    finally:
        stream.cancel()
    raise AssertionError(f"the log of {agent} ended before {message!r}")


def test_stderr_written_during_a_task_names_it(
    traced_host: HostProcess, receiver: OtlpReceiver
) -> None:
    """A stderr line written while one task runs on the replica carries its task id and trace
    id."""
    traceparent, trace_id, _ = _traceparent()
    text = f"alone {uuid.uuid4().hex}"
    request = agent_io_pb2.ExecuteRequest(
        input=agent_io_pb2.AgentInput(
            agent="traced",
            action="say",
            params=json_format.ParseDict({"text": text, "group": text}, struct_pb2.Struct()),
        )
    )
    output = traced_host.agents.Execute(
        request, timeout=30, metadata=(("traceparent", traceparent),)
    ).output
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    fields = _stderr_fields(traced_host, "traced", text)
    assert fields["task_id"] == output.task_id
    assert fields["trace_id"] == trace_id
    framed = _stderr_fields(traced_host, "traced", f"{text} (frame)")  # a log frame's record
    assert framed["task_id"] == output.task_id and framed["trace_id"] == trace_id


def test_stderr_written_during_several_tasks_names_none(traced_host: HostProcess) -> None:
    """Two tasks in flight on the replica when a line is written: the record lists both and
    says it is one of them, without guessing which."""
    group = uuid.uuid4().hex
    texts = [f"together {group} {n}" for n in range(2)]
    with ThreadPoolExecutor(2) as pool:
        outputs = list(
            pool.map(
                lambda text: execute(
                    traced_host,
                    "traced",
                    "say",
                    {"text": text, "group": group, "together": 2},
                ),
                texts,
            )
        )
    assert all(o.status == agent_io_pb2.TASK_STATUS_SUCCESS for o in outputs)
    for text, output in zip(texts, outputs, strict=True):
        fields = _stderr_fields(traced_host, "traced", text)
        assert "task_id" not in fields and "trace_id" not in fields
        assert fields["tasks_in_flight"] == 2
        assert sorted(fields["task_ids"]) == sorted(o.task_id for o in outputs)
        # A log frame names its task, however many run.
        framed = _stderr_fields(traced_host, "traced", f"{text} (frame)")
        assert framed["task_id"] == output.task_id


def test_payloads_are_recorded_when_asked_and_spans_flushed_at_stop(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """record_payloads = true: the task's span carries its params and data. And the spans a
    host holds when it stops (export_delay far away) are exported before it exits."""
    config = tmp_path / "host.toml"
    config.write_text(
        sandbox_grants()
        + f'[telemetry]\notlp_endpoint = "{receiver.endpoint}"\nexport_delay = 60\n'
        + "record_payloads = true\n"
    )
    host = HostProcess(tmp_path / "state", "--config", str(config))
    try:
        host.wait_serving()
        deploy(host, AGENTS / "noisy")
        output = execute(host, "noisy", "echo", {"said": "payload-visible"})
        assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    finally:
        assert host.stop() == 0
    spans = receiver.wait_for(
        lambda spans: any(s.attributes.get("ether.task_id") == output.task_id for s in spans),
        timeout=10,
    )
    task = next(s for s in spans if s.attributes.get("ether.task_id") == output.task_id)
    assert json.loads(task.attributes["ether.params"]) == {"said": "payload-visible"}
    assert json.loads(task.attributes["ether.data"]) == {"said": "payload-visible"}


def test_a_collector_out_of_reach_is_logged(tmp_path: Path) -> None:
    """Spans that cannot be exported (nothing listens at otlp_endpoint) cost the calls nothing
    and say so in the host's own log, a JSON line like every other."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free, and nothing listens once closed
    config = tmp_path / "host.toml"
    config.write_text(
        sandbox_grants()
        + f'[telemetry]\notlp_endpoint = "http://127.0.0.1:{port}"\nexport_delay = 0.05\n'
    )
    host = HostProcess(tmp_path / "state", "--config", str(config))
    try:
        host.wait_serving()
        deploy(host, AGENTS / "noisy")
        output = execute(host, "noisy", "echo", {})
        assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
        line = host.wait_for_log(
            lambda r: (
                r.get("logger", "").startswith("opentelemetry") and "export" in r.get("event", "")
            )
        )
        assert line["level"] in ("warning", "error") and str(port) in line["event"]
    finally:
        host.stop()


def test_tracing_off_sends_nothing_and_adds_no_traceparent(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """A host without otlp_endpoint: the agent's task frame has no traceparent, and a client's
    traceparent starts nothing (no span reaches a receiver; the log line names no trace)."""
    host = HostProcess(tmp_path / "state")
    try:
        host.wait_serving()
        deploy(host, AGENTS / "traced")
        deploy(host, AGENTS / "noisy")
        traceparent, trace_id, _ = _traceparent()
        text = f"untraced {uuid.uuid4().hex}"
        request = agent_io_pb2.ExecuteRequest(
            input=agent_io_pb2.AgentInput(
                agent="traced",
                action="say",
                params=json_format.ParseDict({"text": text, "group": text}, struct_pb2.Struct()),
            )
        )
        output = host.agents.Execute(
            request, timeout=30, metadata=(("traceparent", traceparent),)
        ).output
        assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
        assert data(output)["trace_parent"] == ""
        fields = _stderr_fields(host, "traced", text)
        assert fields["task_id"] == output.task_id and "trace_id" not in fields
        line = host.wait_for_log(
            lambda r: r.get("event") == "rpc" and r.get("method", "").endswith("/Execute")
        )
        assert "trace_id" not in line and "span_id" not in line
    finally:
        host.stop()
    assert not [span for span in receiver.spans() if span.trace_id == trace_id]
