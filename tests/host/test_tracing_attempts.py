"""What a task's span tells about how the task went (docs/telemetry.md, "Traces"): a task
retried after its process died says which attempts were made and which one answered; a failed
task says why; recorded payloads are cut to 4096 characters. A real traced host, real agents,
the spans as a real OTLP receiver got them."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy, kill_once_running
from tests.support.calls import agent_input, budget, data, execute
from tests.support.host import HostProcess, sandbox_grants
from tests.support.otlp import OtlpReceiver, ReceivedSpan, _TraceService

WORKER = AGENTS / "worker"
ERROR = 2  # Status.StatusCode
MAX_PAYLOAD_CHARS = 4096  # docs/telemetry.md, "Never recorded"

Event = tuple[str, dict[str, Any]]  # an event's name and attributes


class _KeepsEvents(_TraceService):
    """The shared receiver's service, also keeping each span's events with their attributes
    (ReceivedSpan keeps only the events' names)."""

    def __init__(self, receiver: _Receiver) -> None:
        super().__init__(receiver)
        self._kept = receiver

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        events = {
            span.span_id.hex(): [
                (
                    event.name,
                    {
                        a.key: getattr(a.value, str(a.value.WhichOneof("value")))
                        for a in event.attributes
                    },
                )
                for event in span.events
            ]
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        }
        with self._kept.lock:  # before the spans: whoever waits for a span finds its events
            self._kept.events.update(events)
        return super().Export(request, context)


class _Receiver(OtlpReceiver):
    """An OtlpReceiver whose ``events_of(span)`` are the span's events with their attributes."""

    def __init__(self) -> None:
        super().__init__()
        self._server.stop(grace=None)  # never started: its port goes back
        self.lock = threading.Lock()
        self.events: dict[str, list[Event]] = {}
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_KeepsEvents(self), self._server)
        self.endpoint = f"http://127.0.0.1:{self._server.add_insecure_port('127.0.0.1:0')}"

    def events_of(self, span: ReceivedSpan) -> list[Event]:
        with self.lock:
            return list(self.events.get(span.span_id, []))


@pytest.fixture(scope="module")
def receiver() -> Iterator[_Receiver]:
    with _Receiver() as found:
        yield found


@pytest.fixture(scope="module")
def traced_host(
    tmp_path_factory: pytest.TempPathFactory, receiver: _Receiver
) -> Iterator[HostProcess]:
    """A host tracing to ``receiver``, recording payloads."""
    folder = tmp_path_factory.mktemp("traced-attempts")
    config = folder / "host.toml"
    config.write_text(
        sandbox_grants()
        + f'[telemetry]\notlp_endpoint = "{receiver.endpoint}"\nexport_delay = 0.05\n'
        + "record_payloads = true\n"
    )
    host = HostProcess(folder / "state", "--config", str(config))
    try:
        host.wait_serving()
        yield host
    finally:
        host.stop()


@pytest.fixture
def worker(traced_host: HostProcess) -> Iterator[str]:
    """The worker test agent with two replicas, under a name of the test's own (removed after:
    a test that kills a replica leaves none of it to the next)."""
    name = deploy(traced_host, WORKER, name=f"worker-{uuid.uuid4().hex[:8]}", replicas=2)
    try:
        yield name
    finally:
        traced_host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=name), timeout=60)


def _task_id() -> str:
    return f"traced-attempts-{uuid.uuid4().hex[:12]}"


def _task_span(receiver: OtlpReceiver, task_id: str) -> ReceivedSpan:
    """The task span of ``task_id``, once exported (there is one per task on one host)."""

    def named(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
        return [
            s
            for s in spans
            if s.name.startswith("ether.task ") and s.attributes.get("ether.task_id") == task_id
        ]

    [span] = named(receiver.wait_for(lambda spans: bool(named(spans))))
    return span


def test_a_retried_task_names_the_attempt_that_answered(
    traced_host: HostProcess, receiver: _Receiver, worker: str
) -> None:
    """An idempotent task whose process is killed under it runs again on the other replica and
    succeeds: its one span says so, with an ``ether.retried`` event for attempt 2 (the pid and
    replica it went to) and ``ether.pid``/``ether.attempt`` of the attempt that answered, not
    of the process that died."""
    task_id = _task_id()
    request = agent_io_pb2.ExecuteStreamRequest(
        input=agent_input(worker, "nap", {"ms": 3000}, task_id=task_id, idempotent=True)
    )
    stream = traced_host.agents.ExecuteStream(request, timeout=60)
    killed = kill_once_running(stream)
    events = list(stream)
    started = [e.started for e in events if e.WhichOneof("event") == "started"]
    assert [s.attempt for s in started] == [2]
    output = events[-1].output
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error.message
    assert (output.metadata.attempt, output.metadata.pid) == (2, started[0].pid)
    answered = output.metadata.pid
    assert answered not in (0, killed)
    listed = traced_host.supervisor.ListProcesses(
        supervisor_pb2.ListProcessesRequest(agent=worker), timeout=10
    )
    [replica] = [p.replica for p in listed.processes if p.pid == answered]

    span = _task_span(receiver, task_id)
    assert span.name == f"ether.task {worker}.nap"
    assert span.status_code != ERROR
    assert span.attributes["ether.status"] == "SUCCESS"
    assert span.attributes["ether.attempt"] == 2
    assert span.attributes["ether.pid"] == answered
    retried = [
        attributes for name, attributes in receiver.events_of(span) if name == "ether.retried"
    ]
    assert retried == [{"ether.pid": answered, "ether.replica": replica, "ether.attempt": 2}]


@pytest.mark.parametrize(
    ("action", "params"),
    [("broken", {"message": "on purpose"}), ("explode", {})],
    ids=["agent-error", "uncaught-exception"],
)
def test_a_task_the_agent_fails_marks_its_span_error(
    traced_host: HostProcess, receiver: _Receiver, worker: str, action: str, params: dict[str, Any]
) -> None:
    """An action that raises (an AgentError with its code, or an uncaught exception): the
    task's span is ERROR with the agent's error code, as ``error.type`` and in the status."""
    task_id = _task_id()
    output = execute(traced_host, worker, action, params, task_id=task_id)
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR
    assert output.error.code

    span = _task_span(receiver, task_id)
    assert span.status_code == ERROR
    assert span.status_message.startswith(f"{output.error.code}: ")
    assert span.attributes["ether.status"] == "ERROR"
    assert span.attributes["error.type"] == output.error.code


def test_a_task_the_agent_fails_is_named_by_its_error_code(
    traced_host: HostProcess, receiver: _Receiver, worker: str
) -> None:
    """An action that raises an error: its task's span names the agent's own error code as
    ``error.type``; ``ether.reason`` is the host's reason for an error of its own (below), so
    an agent's answer has none."""
    task_id = _task_id()
    output = execute(traced_host, worker, "broken", {"message": "on purpose"}, task_id=task_id)
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR

    span = _task_span(receiver, task_id)
    assert span.attributes["error.type"] == "broken"
    assert "ether.reason" not in span.attributes, span.attributes


def test_a_task_the_host_fails_says_why_on_its_span(
    traced_host: HostProcess, receiver: _Receiver, worker: str
) -> None:
    """A task past its deadline (the host ends it, not the agent): the task's span is ERROR,
    ``error.type`` the gRPC code and ``ether.reason`` the reason the caller got."""
    task_id = _task_id()
    with pytest.raises(grpc.RpcError) as failed:
        execute(
            traced_host,
            worker,
            "nap",
            {"ms": 60000},
            task_id=task_id,
            context=agent_io_pb2.TaskContext(budget=budget(max_time=0.5)),
        )
    assert failed.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED

    span = _task_span(receiver, task_id)
    assert span.status_code == ERROR
    assert span.status_message.startswith("DEADLINE_EXCEEDED")
    assert span.attributes["error.type"] == "DEADLINE_EXCEEDED"
    assert span.attributes["ether.reason"] == "TASK_DEADLINE_EXCEEDED"


def test_recorded_payloads_are_cut_to_4096_characters(
    traced_host: HostProcess, receiver: _Receiver, worker: str
) -> None:
    """record_payloads = true and params (and so the echoed data) far longer than 4096
    characters: the task's span holds the first 4096 characters of each, no more."""
    task_id = _task_id()
    params = {"text": "head-" + "x" * 3 * MAX_PAYLOAD_CHARS}
    output = execute(traced_host, worker, "echo", params, task_id=task_id)
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error.message
    assert data(output) == params

    span = _task_span(receiver, task_id)
    for key in ("ether.params", "ether.data"):
        recorded = span.attributes[key]
        assert len(recorded) == MAX_PAYLOAD_CHARS, f"{key}: {len(recorded)} characters"
        # The first 4096 characters of the payload's JSON (however it is spaced).
        spellings = (json.dumps(params), json.dumps(params, separators=(",", ":")))
        assert recorded in [text[:MAX_PAYLOAD_CHARS] for text in spellings], key
