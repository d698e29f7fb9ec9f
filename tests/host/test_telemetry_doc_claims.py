"""Claims of docs/telemetry.md and docs/health.md no other test holds, as a user sees them: real
hosts and agents, grpcio and httpx clients, spans from the tests' OTLP receiver, scrapes parsed
with prometheus_client; every wait is on an answer, an event, a log line, an export or a scrape."""

from __future__ import annotations

import os
import secrets
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ether.v1 import agent_io_pb2, supervisor_pb2, workflow_pb2
from tests.support.agents import AGENTS, deploy, watch_until
from tests.support.calls import agent_input, budget, data
from tests.support.host import ROOT, HostProcess, sandbox_grants
from tests.support.metrics import moved, scrape, value
from tests.support.otlp import OtlpReceiver, ReceivedSpan

TOKEN = "telemetry-claims-token-4b7e0c"
AUTH = (("authorization", f"Bearer {TOKEN}"),)
INTERNAL = 1  # opentelemetry.proto.trace.v1.Span.SpanKind
CARD = "/.well-known/agent-card.json"
RELAY, ECHO = "ether.task relayer.relay", "ether.task relayer.echo"  # a relayed call's tasks
ROGUE = ROOT / "tests" / "agents" / "rogue" / "rogue.py"
# The host's services besides AgentIO, each with a health status of its own (docs/health.md).
SERVICES = [f"ether.v1.{name}Service" for name in ("Supervisor", "Workflow", "Terminal", "Gateway")]
SERVICES.append("lf.a2a.v1.A2AService")


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as found:
        yield found


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory, receiver: OtlpReceiver) -> Iterator[HostProcess]:
    """Auth on (one token, every right), traces to ``receiver``, metrics, an HTTP listener;
    'relayer' (the worker: relay calls an agent through the host) and 'closed' (the toolbox,
    no egress: each fetch denied)."""
    folder = tmp_path_factory.mktemp("telemetry-claims")
    (folder / "tokens").write_text(f"operator {TOKEN}\n")
    (folder / "tokens").chmod(0o600)
    (folder / "host.toml").write_text(
        sandbox_grants()
        + f'[telemetry]\notlp_endpoint = "{receiver.endpoint}"\nexport_delay = 0.05\n'
        + "metrics = true\n"
    )
    args = ("--config", str(folder / "host.toml"), "--auth-tokens-file", str(folder / "tokens"))
    started = HostProcess(folder / "state", *args, http=True)
    try:
        started.wait_serving()
        deploy(started, AGENTS / "worker", name="relayer", metadata=AUTH)
        deploy(started, AGENTS / "toolbox", name="closed", metadata=AUTH)
        yield started
    finally:
        assert started.stop() == 0


def _call(
    host: HostProcess, agent: str, action: str, params: dict[str, Any], *meta: Any, **fields: Any
) -> agent_io_pb2.AgentOutput:
    request = agent_io_pb2.ExecuteRequest(input=agent_input(agent, action, params, **fields))
    answer = host.agents.Execute(request, timeout=60, metadata=(*AUTH, *meta))
    return answer.output  # type: ignore[no-any-return]


def _traceparent() -> tuple[tuple[str, str], str]:
    trace_id = secrets.token_hex(16)
    return ("traceparent", f"00-{trace_id}-{secrets.token_hex(8)}-01"), trace_id


def _trace(receiver: OtlpReceiver, trace_id: str, *names: str) -> dict[str, ReceivedSpan]:
    """The trace's spans by name, once a span of each of ``names`` was exported."""
    spans = receiver.wait_for(
        lambda got: set(names) <= {s.name for s in got if s.trace_id == trace_id}
    )
    return {s.name: s for s in spans if s.trace_id == trace_id}


def test_a_task_its_host_call_and_an_http_request_carry_the_tables_attributes(
    host: HostProcess, receiver: OtlpReceiver
) -> None:
    """The span table: `ether.task AGENT.ACTION` has "`gen_ai.operation.name` = `invoke_agent`
    ... `ether.task_id`, `ether.status`, ... `ether.attempt`"; a host call "named after its
    method: `agent.call`" has "`ether.method`, `ether.caller`; `ether.call.agent`,
    `ether.call.action` for `agent.call`"; an HTTP request's span `http.request.method`,
    `url.path`."""
    traceparent, trace_id = _traceparent()
    relay = {"agent": "relayer", "action": "echo", "params": {"n": 1}}
    output = _call(host, "relayer", "relay", relay, traceparent)
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    spans = _trace(receiver, trace_id, RELAY, ECHO)
    task, call, child = (spans[name] for name in (RELAY, "agent.call", ECHO))
    assert task.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert task.attributes["ether.task_id"] == output.task_id
    assert (task.attributes["ether.status"], task.attributes["ether.attempt"]) == ("SUCCESS", 1)
    assert call.kind == INTERNAL and call.parent_span_id == task.span_id
    named = ("ether.method", "ether.caller", "ether.call.agent", "ether.call.action")
    expected = ["agent.call", "relayer", "relayer", "echo"]
    assert [call.attributes.get(key) for key in named] == expected
    assert child.parent_span_id == call.span_id
    assert child.attributes["gen_ai.operation.name"] == "invoke_agent"

    traceparent, trace_id = _traceparent()
    answer = httpx.get(host.http_address + CARD, headers=dict((*AUTH, traceparent)), timeout=30)
    assert answer.status_code == 200, answer.text
    http = _trace(receiver, trace_id, f"GET {CARD}")[f"GET {CARD}"]
    assert http.attributes["http.request.method"] == "GET"
    assert http.attributes["url.path"] == CARD


def test_params_data_tokens_and_metadata_are_on_no_span(
    host: HostProcess, receiver: OtlpReceiver
) -> None:
    """ "Params and data (task params, results, host-call params) are on no span unless
    `record_payloads = true`" and "Tokens and metadata other than `traceparent`/`tracestate`
    are never read into a span": a relayed call whose params (so its host call's params, the
    child's params and both results) hold a secret, sent with a bearer token and another
    metadata entry; then an HTTP request with the token and a secret header."""
    secret, header_secret = uuid.uuid4().hex, uuid.uuid4().hex
    traceparent, trace_id = _traceparent()
    relay = {"agent": "relayer", "action": "echo", "params": {"secret": secret}}
    output = _call(host, "relayer", "relay", relay, traceparent, ("x-api-key", header_secret))
    assert data(output)["data"] == {"secret": secret}  # the child's answer, relayed
    spans = _trace(receiver, trace_id, RELAY, ECHO)
    assert {"ether.v1.AgentIOService/Execute", "agent.call"} <= spans.keys()
    http_traceparent, http_trace = _traceparent()
    headers = dict((*AUTH, http_traceparent, ("x-api-key", header_secret)))
    assert httpx.get(host.http_address + CARD, headers=headers, timeout=30).status_code == 200
    _trace(receiver, http_trace, f"GET {CARD}")
    hidden = (secret, header_secret, TOKEN)
    leaked = [s.name for s in receiver.spans() if any(text in repr(s) for text in hidden)]
    assert leaked == []


def test_a_line_logged_inside_a_host_call_carries_that_calls_span(
    host: HostProcess, receiver: OtlpReceiver
) -> None:
    """ "Every log line the host writes while a recorded span runs carries that span's
    `trace_id` and `span_id` ...: the per-call `rpc` line, and what the call's code logs on
    the way": a fetch the egress policy denies logs `egress denied` inside its `net.fetch`
    span, so the line names that span, not the RPC's or the task's."""
    traceparent, trace_id = _traceparent()
    url = f"http://127.0.0.1:9/{uuid.uuid4().hex}"  # names this fetch's line
    output = _call(host, "closed", "get", {"url": url}, traceparent)
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR
    fetch = _trace(receiver, trace_id, "net.fetch", "ether.task closed.get")["net.fetch"]
    line = host.wait_for_log(lambda r: r.get("event") == "egress denied" and r["url"] == url)
    assert (line.get("trace_id"), line.get("span_id")) == (trace_id, fetch.span_id)


def _until(condition: Any, within: float = 60.0) -> None:
    """Ask again until ``condition()`` holds (state, not time, is waited on)."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "the host never reached the expected state"


def test_in_flight_and_queued_gauges_follow_a_busy_agent(host: HostProcess) -> None:
    """`ether_agent_tasks_in_flight`: "Tasks placed on the agent's replicas and not
    finished"; `ether_agent_tasks_queued`: "Tasks waiting for a free slot on the agent". The
    worker has 4 slots: 5 long naps put 4 on it and queue 1; cancelled, all 5 end CANCELLED."""
    name = deploy(host, AGENTS / "worker", name="busy", metadata=AUTH)
    with httpx.Client(base_url=host.http_address, timeout=30, headers=dict(AUTH)) as client:
        before = scrape(client)
        nap = agent_io_pb2.ExecuteRequest(input=agent_input(name, "nap", {"ms": 120_000}))
        calls = [host.agents.Execute.future(nap, timeout=180, metadata=AUTH) for _ in range(5)]

        def agent() -> agent_io_pb2.AgentInfo:
            ask = agent_io_pb2.GetAgentRequest(name=name)
            return host.agents.GetAgent(ask, timeout=30, metadata=AUTH).agent

        _until(lambda: (agent().in_flight, agent().queued) == (4, 1))
        during = scrape(client)
        assert value(during, "ether_agent_tasks_in_flight", agent=name) == 4
        assert value(during, "ether_agent_tasks_queued", agent=name) == 1
        for call in calls:
            call.cancel()
        # The cancels reach the host after the client gives up: a bounded poll of the scrape.
        cancelled = {"agent": name, "action": "nap", "status": "CANCELLED"}
        _until(lambda: moved(before, scrape(client), "ether_tasks_total", **cancelled) == 5)
        # A cancelled task holds its slot until the agent has let it go (its cancel watcher
        # releases it), a moment after the caller's CANCELLED: the gauges reach 0 then.
        _until(
            lambda: (
                (
                    value(now := scrape(client), "ether_agent_tasks_in_flight", agent=name),
                    value(now, "ether_agent_tasks_queued", agent=name),
                )
                == (0, 0)
            )
        )


def test_child_and_workflow_tasks_count_and_http_requests_do_not(host: HostProcess) -> None:
    """`ether_tasks_total`: "Child tasks (`agent.call`) and workflow tasks count too", and a
    task the host ends is counted by "the code of the error that ended the task
    (`DEADLINE_EXCEEDED`, ...)"; `ether_rpcs_total`: "HTTP requests are not counted"."""
    with httpx.Client(base_url=host.http_address, timeout=30, headers=dict(AUTH)) as client:
        before = scrape(client)
        _call(host, "relayer", "relay", {"agent": "relayer", "action": "echo", "params": {"n": 0}})
        spec = (
            "name: counted\nstages:\n  - {name: a, agent: relayer, action: echo, inputs: [1, 2]}\n"
        )
        run = host.workflows.CreateRun(
            workflow_pb2.CreateRunRequest(spec_text=spec), timeout=30, metadata=AUTH
        ).run
        ended = host.workflows.WaitRun(
            workflow_pb2.WaitRunRequest(run_id=run.id), timeout=90, metadata=AUTH
        )
        assert ended.run.state == workflow_pb2.RUN_STATE_SUCCEEDED
        late = agent_io_pb2.TaskContext(budget=budget(max_time=0.5))
        with pytest.raises(grpc.RpcError) as failed:
            _call(host, "relayer", "nap", {"ms": 60_000}, context=late)
        assert failed.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        after = scrape(client)

        def tasks(action: str, status: str) -> float:
            return moved(
                before, after, "ether_tasks_total", agent="relayer", action=action, status=status
            )

        assert (tasks("relay", "SUCCESS"), tasks("echo", "SUCCESS")) == (1, 3)  # 1 + 2 run tasks
        assert tasks("nap", "DEADLINE_EXCEEDED") == 1

        # Only HTTP requests between these scrapes (the scrape itself is one): no RPC series moves.
        for path in ("/healthz", "/readyz", CARD, "/no/such/path"):
            client.get(path)
        again = scrape(client)
    rpc_series = {key for key in again if key[0].startswith("ether_rpc")}
    assert {key: again[key] for key in rpc_series} == {key: after.get(key) for key in rpc_series}


def _statuses(host: HostProcess, service: str) -> Iterator[str]:
    """What a health Watch on ``service`` sends, one status at a time (a status that never
    comes fails the test with the Watch's DEADLINE_EXCEEDED, within the test's own limit)."""
    stub = health_pb2_grpc.HealthStub(host.channel)
    stream = stub.Watch(health_pb2.HealthCheckRequest(service=service), timeout=90)
    try:
        for answer in stream:
            yield health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)
    finally:
        stream.cancel()


def test_health_follows_an_agent_from_before_its_deploy_to_the_hosts_stop(tmp_path: Path) -> None:
    """A Watch on a name never deployed "sends `SERVICE_UNKNOWN` and keeps watching (a later
    deploy of that name turns it SERVING)"; `ether.agent.NAME` is NOT_SERVING while its only
    replica is restarting (BACKOFF, STARTING), SERVING again once it runs; AgentIO is
    NOT_SERVING when "all [agents are] ... stopped"; the host's other services are SERVING
    while it serves and NOT_SERVING once it begins to stop."""
    host = HostProcess(tmp_path / "state")
    try:
        host.wait_serving()
        agent = _statuses(host, "ether.agent.later")
        assert next(agent) == "SERVICE_UNKNOWN"
        deploy(host, AGENTS / "worker", name="later", wait=False)
        # NOT_SERVING while it installs and starts, then SERVING.
        assert next(s for s in agent if s != "NOT_SERVING") == "SERVING"
        [process] = host.supervisor.ListProcesses(
            supervisor_pb2.ListProcessesRequest(agent="later"), timeout=30
        ).processes
        os.kill(process.pid, signal.SIGKILL)  # the replica this test deployed
        assert next(agent) == "NOT_SERVING"
        assert next(agent) == "SERVING"

        agent_io = _statuses(host, "ether.v1.AgentIOService")
        assert next(agent_io) == "SERVING"
        host.supervisor.StopAgent(supervisor_pb2.StopAgentRequest(name="later"), timeout=60)
        assert next(agent_io) == "NOT_SERVING"
        assert next(agent) == "NOT_SERVING"

        others = [_statuses(host, service) for service in SERVICES]
        assert [next(watch) for watch in others] == ["SERVING"] * len(SERVICES)
        host.process.send_signal(signal.SIGTERM)  # the host this test started
        assert [next(watch) for watch in others] == ["NOT_SERVING"] * len(SERVICES)
        assert host.process.wait(60) == 0
    finally:
        assert host.stop() == 0


def _ready_with(tmp_path: Path, agents: dict[str, tuple[str, str]]) -> httpx.Response:
    """/readyz of a host whose `agents_dir` holds a rogue agent per name, each with more
    agent.toml text and the state it settles in (one without is never deployed), once
    settled."""
    for name, (more, _) in agents.items():
        (tmp_path / "agents" / name).mkdir(parents=True)
        (tmp_path / "agents" / name / "agent.toml").write_text(
            f'language = "python"\ncommand = ["python3", "{ROGUE}"]\n{more}'
        )
    host = HostProcess(tmp_path / "state", "--agents-dir", str(tmp_path / "agents"), http=True)
    try:
        host.wait_serving()
        for name, (_, state) in agents.items():
            if state:
                watch_until(host, name, {state})
            else:  # refused at start: the host says so, and runs the others
                host.wait_for_log(
                    lambda r, n=name: (
                        r.get("event") == "agent not deployed" and r["path"].endswith(f"/{n}")
                    )
                )
        with httpx.Client(base_url=host.http_address, timeout=30) as client:
            assert client.get("/healthz").status_code == 200  # alive, whatever /readyz says
            return client.get("/readyz")
    finally:
        assert host.stop() == 0


def test_readyz_names_agents_dir_agents_without_a_running_replica(tmp_path: Path) -> None:
    """/readyz waits for "every agent of the host config (its `[[agents]]` and the folders of
    `agents_dir`)"; its reason is "`config agents without a RUNNING replica: NAME, ...` with
    the names in `waiting_for`"; `/healthz` stays 200 meanwhile."""
    fatal = ('[env]\nROGUE_EXIT = "78"\n', "FATAL")
    answer = _ready_with(tmp_path, {"bad-a": fatal, "bad-b": fatal, "good": ("", "RUNNING")})
    assert answer.status_code == 503, answer.text
    assert answer.json() == {
        "status": "NOT_READY",
        "reason": "config agents without a RUNNING replica: bad-a, bad-b",
        "waiting_for": ["bad-a", "bad-b"],
    }


def test_readyz_waits_for_a_config_agent_the_host_could_not_deploy(tmp_path: Path) -> None:
    """The same words for an `agents_dir` folder whose agent.toml is wrong ("a bad release of
    the agent"): it has no RUNNING replica, so the host is not ready, as "a rolling deploy of a
    broken config stops at its first host"."""
    broken = ('start_retries = "lots"\n', "")  # out of range: refused at start
    answer = _ready_with(tmp_path, {"broken": broken, "good": ("", "RUNNING")})
    assert answer.status_code == 503, answer.text
    assert answer.json()["status"] == "NOT_READY"
    assert "broken" in answer.json()["reason"]
