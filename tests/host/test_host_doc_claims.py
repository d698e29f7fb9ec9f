"""Documented claims of the host that no other test holds:

- docs/health.md, "HTTP: /healthz and /readyz": `/readyz` follows the agents of the host config
  only; "agents deployed later by `DeployAgent` are not [waited for] either (they come and go
  with operators' calls, and say their own health as `ether.agent.NAME`)".
- docs/limits.md, "Calls themselves", `default_deadline`: a call with one response and no
  deadline ends `DEADLINE_EXCEEDED` at the default, and "its work is cancelled as a client's
  deadline would cancel it" (tests/host/test_server_limits.py checks the status only; here the
  agent's task must see its cancel).
- docs/auth.md, "TLS and client certificates": "The unix socket serves plaintext ..., so with
  `tls.client_ca` its callers, having no certificate, are refused; use TCP."

Real hosts on free ports, real agents, grpcio clients and httpx; every wait is on an answer,
an event or a log line.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ether.v1 import agent_io_pb2, agent_io_pb2_grpc, supervisor_pb2
from tests.support.agents import AGENTS, deploy, watch_until
from tests.support.calls import agent_input, details
from tests.support.certs import Authority
from tests.support.host import HostProcess, sandbox_grants
from tests.workflows.runs import logged

from ._support import Host

DEVOPS_TOKEN = "devops-token-5f1c9e2a7b3d4e6f"


# -- /readyz and agents added with DeployAgent ----------------------------------------------


def _ready(host: HostProcess) -> httpx.Response:
    with httpx.Client(base_url=host.http_address, timeout=30) as client:
        return client.get("/readyz")


def _deploy_failing(host: HostProcess, name: str) -> None:
    """DeployAgent of an agent that exits 78 at start (FATAL, never RUNNING); wait for FATAL."""
    host.supervisor.DeployAgent(
        supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(
                name=name, path=str(AGENTS / "lifecycle"), env={"ROGUE_EXIT": "78"}
            )
        ),
        timeout=30,
    )
    watch_until(host, name, {"FATAL"})


def test_readyz_ignores_agents_added_with_deploy_agent(tmp_path: Path) -> None:
    """A host whose config runs `worker` is ready; an agent added with DeployAgent that goes
    FATAL leaves it ready (its own gRPC health says NOT_SERVING), and so does the same agent
    restored by the next host on the state directory: it still came from DeployAgent, not from
    the config. A config agent that cannot run makes /readyz 503 (tests/host/test_health.py),
    so the 200s here are the DeployAgent rule, not a /readyz that ignores every agent."""
    config = tmp_path / "host.toml"
    config.write_text(sandbox_grants() + f'[[agents]]\npath = "{AGENTS / "worker"}"\n')
    env = {"ETHER_CONFIG": str(config)}
    first = HostProcess(tmp_path / "state", env=env, http=True)
    try:
        first.wait_serving()
        watch_until(first, "worker", {"RUNNING"})
        assert _ready(first).json() == {"status": "READY"}

        _deploy_failing(first, "latecomer")
        ready = _ready(first)
        assert (ready.status_code, ready.json()) == (200, {"status": "READY"}), ready.text
        health = health_pb2_grpc.HealthStub(first.channel)
        own = health.Check(health_pb2.HealthCheckRequest(service="ether.agent.latecomer"))
        assert own.status == health_pb2.HealthCheckResponse.NOT_SERVING
    finally:
        assert first.stop() == 0

    second = HostProcess(tmp_path / "state", env=env, http=True)
    try:
        second.wait_serving()
        watch_until(second, "latecomer", {"FATAL"})
        watch_until(second, "worker", {"RUNNING"})
        ready = _ready(second)
        assert (ready.status_code, ready.json()) == (200, {"status": "READY"}), ready.text
    finally:
        assert second.stop() == 0


# -- default_deadline cancels the agent's task ----------------------------------------------


def test_default_deadline_cancels_the_agents_task(tmp_path: Path) -> None:
    """Execute of flow.hold (it waits until cancelled, and logs "saw cancel" with the task id
    when the cancel reaches it) without a deadline, on a host whose default_deadline is 3 s:
    the call ends DEADLINE_EXCEEDED naming the setting, and the agent's task is cancelled.
    (3 s, not less: the task must reach the agent before the deadline, on a loaded machine.)"""
    host = HostProcess(tmp_path / "state", "--default-deadline", "3")
    try:
        host.wait_serving()
        deploy(host, AGENTS / "flow")
        tag = f"deadline-{uuid.uuid4().hex[:8]}"
        task_id = f"t-{tag}"
        request = agent_io_pb2.ExecuteRequest(
            input=agent_input("flow", "hold", {"tag": tag}, task_id=task_id)
        )
        with pytest.raises(grpc.RpcError) as error:
            host.agents.Execute(request)  # no timeout: the host's default applies
        assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, error.value.details()
        info = details(error.value)["ErrorInfo"]
        assert (info.reason, info.metadata["setting"]) == ("DEFAULT_DEADLINE", "default_deadline")

        # The agent saw the cancel of that very task (its log, read with StreamLogs follow).
        cancelled = logged(host, "flow", "saw cancel", {tag}, timeout=30)[tag]
        assert cancelled["run_task"] == task_id, cancelled
    finally:
        assert host.stop() == 0


# -- the unix socket with tls.client_ca -----------------------------------------------------


def test_the_unix_socket_refuses_callers_when_client_certificates_are_required(
    tmp_path: Path,
) -> None:
    """Host on TCP (TLS, client_ca) and on a unix socket, with a token file holding a cert:
    line and a token line. Over the socket, a call without a credential and one with a valid
    token are both UNAUTHENTICATED, naming the certificate it lacks; health still answers (it
    needs no credential). Over TCP a certificate the file names is served: the host does
    serve certificate callers."""
    authority = Authority(tmp_path, "ether")
    server = authority.issue("server", "ether host", server=True)
    alice = authority.issue("alice", "alice.example")
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice cert:alice.example agent.read\ndevops {DEVOPS_TOKEN}\n")
    tokens.chmod(0o600)
    socket_path = tmp_path / "sock" / "ether.sock"
    host = Host(
        "--listen", "127.0.0.1:0", "--unix-socket", str(socket_path),
        "--state-dir", str(tmp_path / "state"), "--log-format", "json",
        "--auth-tokens-file", str(tokens), "--tls-cert", str(server.cert),
        "--tls-key", str(server.key), "--tls-client-ca", str(authority.pem),
    )  # fmt: skip
    try:
        serving = host.wait_for_log(lambda r: r.get("event") == "serving", 60)
        assert serving["client_certificates"] is True
        tcp = next(a for a in serving["addresses"] if not a.startswith("unix:"))
        assert f"unix:{socket_path}" in serving["addresses"]

        with grpc.insecure_channel(f"unix:{socket_path}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            answer = health.Check(health_pb2.HealthCheckRequest(), timeout=30, wait_for_ready=True)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
            stub = agent_io_pb2_grpc.AgentIOServiceStub(channel)
            # A valid token first: the socket must not fall back to tokens.
            for metadata in ((("authorization", f"Bearer {DEVOPS_TOKEN}"),), ()):
                with pytest.raises(grpc.RpcError) as refused:
                    stub.ListAgents(agent_io_pb2.ListAgentsRequest(), timeout=30, metadata=metadata)
                assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, metadata
                assert "certificate" in (refused.value.details() or ""), refused.value.details()
                assert details(refused.value)["ErrorInfo"].reason == "INVALID_CREDENTIALS"

        credentials = grpc.ssl_channel_credentials(
            root_certificates=authority.pem.read_bytes(),
            private_key=alice.key.read_bytes(),
            certificate_chain=alice.cert.read_bytes(),
        )
        with grpc.secure_channel(tcp, credentials) as channel:
            stub = agent_io_pb2_grpc.AgentIOServiceStub(channel)
            stub.ListAgents(agent_io_pb2.ListAgentsRequest(), timeout=30)
    finally:
        assert host.stop() == 0
