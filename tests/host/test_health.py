"""grpc.health.v1 that means something (docs/health.md): ``ether.agent.NAME`` is SERVING while
one of the agent's replicas is RUNNING, the AgentIO service while any agent's is, and a removed
agent is an unknown service again; /readyz on the HTTP listener says whether the host's config
agents run. Every wait is on a health Watch or a supervisor event, never on time."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ether.v1 import agent_io_pb2, supervisor_pb2
from tests.support.agents import AGENTS, deploy, watch_until
from tests.support.calls import agent_input
from tests.support.host import HostProcess, sandbox_grants

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
AGENT_IO = "ether.v1.AgentIOService"
WAIT = 120  # seconds a Watch may take to see the next status on a loaded machine


def check(host: HostProcess, service: str) -> int:
    health = health_pb2_grpc.HealthStub(host.channel)
    answer = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=30)
    return int(answer.status)


def watch(host: HostProcess, service: str) -> Iterator[int]:
    """The statuses a Watch on ``service`` sends, one at a time (each a change)."""
    health = health_pb2_grpc.HealthStub(host.channel)
    stream = health.Watch(health_pb2.HealthCheckRequest(service=service), timeout=WAIT * 4)
    try:
        for answer in stream:
            yield int(answer.status)
    finally:
        stream.cancel()


def name(status: int) -> str:
    return health_pb2.HealthCheckResponse.ServingStatus.Name(status)


def test_agent_io_serves_only_once_an_agent_runs(tmp_path: Path) -> None:
    """A host with no agent says NOT_SERVING for the AgentIO service (nothing could take a
    task); a deploy turns it SERVING, seen by a client watching it; a stop turns it
    NOT_SERVING and ends the watch."""
    host = HostProcess(tmp_path / "state")
    try:
        host.wait_serving()
        assert name(check(host, AGENT_IO)) == "NOT_SERVING"
        assert name(check(host, "")) == "SERVING"  # the host itself serves
        statuses = watch(host, AGENT_IO)
        assert name(next(statuses)) == "NOT_SERVING"
        deploy(host, AGENTS / "worker")
        assert name(next(statuses)) == "SERVING"
        assert name(check(host, AGENT_IO)) == "SERVING"

        # On SIGTERM every service turns NOT_SERVING, and the watch ends (it does not hold the
        # host's drain open for its grace).
        host.process.send_signal(signal.SIGTERM)
        assert name(next(statuses)) == "NOT_SERVING"
        assert list(statuses) == []
        assert host.process.wait(60) == 0
    finally:
        assert host.stop() == 0


def test_an_agent_is_served_while_a_replica_runs(host: HostProcess) -> None:
    """ether.agent.NAME: SERVING once deployed, NOT_SERVING when its only replica goes FATAL,
    SERVING again after StartAgent, NOT_SERVING when stopped, then unknown once removed."""
    agent = "flaky"
    with pytest.raises(grpc.RpcError) as unknown:
        check(host, f"ether.agent.{agent}")
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND

    # start_retries 0: a death before stable_after (30 s) is FATAL at once.
    deploy(host, AGENTS / "lifecycle", name=agent, start_retries=0)
    statuses = watch(host, f"ether.agent.{agent}")
    assert name(next(statuses)) == "SERVING"
    health = health_pb2_grpc.HealthStub(host.channel)
    listed = health.List(health_pb2.HealthListRequest(), timeout=30).statuses
    assert name(listed[f"ether.agent.{agent}"].status) == "SERVING"
    assert name(listed[AGENT_IO].status) == "SERVING"

    # The process exits under this task (the rogue agent's "crash" action).
    crash = host.agents.Execute.future(
        agent_io_pb2.ExecuteRequest(input=agent_input(agent, "crash")), timeout=WAIT
    )
    watch_until(host, agent, {"FATAL"})  # a new name: no FATAL before this one
    assert name(next(statuses)) == "NOT_SERVING"
    with pytest.raises(grpc.RpcError):
        crash.result()

    host.supervisor.StartAgent(supervisor_pb2.StartAgentRequest(name=agent), timeout=30)
    assert name(next(statuses)) == "SERVING"
    assert name(check(host, f"ether.agent.{agent}")) == "SERVING"

    host.supervisor.StopAgent(supervisor_pb2.StopAgentRequest(name=agent), timeout=30)
    assert name(next(statuses)) == "NOT_SERVING"

    host.supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=agent), timeout=30)
    assert name(next(statuses)) == "SERVICE_UNKNOWN"
    with pytest.raises(grpc.RpcError) as gone:
        check(host, f"ether.agent.{agent}")
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND


def test_readyz_waits_for_the_config_agents(tmp_path: Path) -> None:
    """/readyz over HTTP: 503 naming a config agent that cannot run (exits 78: FATAL), 200 once
    an operator stops it; /healthz (liveness) is 200 throughout; neither needs a token."""
    config = tmp_path / "host.toml"
    config.write_text(
        sandbox_grants()
        + f'[[agents]]\npath = "{AGENTS / "worker"}"\n'
        + f'[[agents]]\npath = "{AGENTS / "lifecycle"}"\nname = "broken"\n'
        + 'env = { ROGUE_EXIT = "78" }\n'
    )
    tokens = tmp_path / "tokens"
    tokens.write_text("operator s3cret-token-for-tests\n")
    host = HostProcess(
        tmp_path / "state",
        "--auth-tokens-file",
        str(tokens),
        env={"ETHER_CONFIG": str(config)},
        http=True,
    )
    try:
        host.wait_serving()
        token = (("authorization", "Bearer s3cret-token-for-tests"),)
        watch_until(host, "broken", {"FATAL"}, metadata=token)
        watch_until(host, "worker", {"RUNNING"}, metadata=token)

        with httpx.Client(base_url=host.http_address, timeout=30) as client:
            live = client.get("/healthz")
            assert live.status_code == 200, live.text
            not_ready = client.get("/readyz")
            assert not_ready.status_code == 503, not_ready.text
            body = not_ready.json()
            assert body["status"] == "NOT_READY"
            assert body["waiting_for"] == ["broken"]
            assert "broken" in body["reason"]

            host.supervisor.StopAgent(
                supervisor_pb2.StopAgentRequest(name="broken"), timeout=30, metadata=token
            )
            ready = client.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.json() == {"status": "READY"}
    finally:
        assert host.stop() == 0
