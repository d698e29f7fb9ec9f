"""Token auth: every RPC but health needs `authorization: Bearer <token>`; reflection too."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ether.v1 import agent_io_pb2, gateway_pb2, supervisor_pb2
from tests.support.calls import details

from ._support import ETHER_SERVICES, Host, grpcurl, write_tokens

ALICE = "alice-token-5f1c9e2a7b3d4e6f"
BOB = "bob-token-0a9b8c7d6e5f4a3b"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    folder = tmp_path_factory.mktemp("auth")
    tokens = write_tokens(folder / "tokens", alice=ALICE, bob=BOB)
    host = Host(
        "--listen", "127.0.0.1:0", "--auth-tokens-file", str(tokens), "--state-dir", str(folder / "state"),
        "--log-format", "json",
    )  # fmt: skip
    try:
        host.wait_serving()  # health answers without a token
        yield host
    finally:
        assert host.stop() == 0
    log = "\n".join(host.raw_lines)
    assert ALICE not in log and BOB not in log, "a token was written to the log"


def bearer(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


def _refused(call: object, **kwargs: object) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as error:
        call(agent_io_pb2.ListAgentsRequest(), timeout=10, **kwargs)  # type: ignore[operator]
    return error.value


def test_no_token_is_unauthenticated(secured: Host) -> None:
    error = _refused(secured.agents.ListAgents)
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert details(error)["ErrorInfo"].reason == "INVALID_CREDENTIALS"
    assert "missing bearer token" in error.details()
    assert "authorization: Bearer <token>" in error.details()  # says what to send
    record = secured.wait_for_log(
        lambda r: (
            r.get("event") == "rpc"
            and r.get("code") == "UNAUTHENTICATED"
            and "ListAgents" in r.get("method", "")
        )
    )
    assert record["peer"].startswith("ipv4:127.0.0.1:")


def test_bad_token_is_unauthenticated(secured: Host) -> None:
    error = _refused(secured.agents.ListAgents, metadata=bearer("not-a-token-of-this-host"))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "invalid bearer token" in error.details()
    error = _refused(secured.agents.ListAgents, metadata=[("authorization", f"Basic {ALICE}")])
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "Bearer" in error.details()


def test_good_tokens_are_accepted(secured: Host) -> None:
    for token in (ALICE, BOB):
        response = secured.agents.ListAgents(
            agent_io_pb2.ListAgentsRequest(), metadata=bearer(token), timeout=10
        )
        assert list(response.agents) == []


def test_streams_need_a_token_too(secured: Host) -> None:
    stream = secured.supervisor.WatchEvents(
        supervisor_pb2.WatchEventsRequest(after_sequence=-1), timeout=10
    )
    with pytest.raises(grpc.RpcError) as error:
        next(stream)
    assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_every_service_needs_a_token(secured: Host) -> None:
    """The gateway as well as the agents: a caller without a token learns nothing."""
    with pytest.raises(grpc.RpcError) as error:
        secured.gateway.ListSessions(gateway_pb2.ListSessionsRequest(), timeout=10)
    assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_health_needs_no_token(secured: Host) -> None:
    health = health_pb2_grpc.HealthStub(secured.channel)
    for service in ("", *ETHER_SERVICES):
        response = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        # AgentIO serves once some agent runs (docs/health.md): this host has none.
        expected = "NOT_SERVING" if service == "ether.v1.AgentIOService" else "SERVING"
        assert health_pb2.HealthCheckResponse.ServingStatus.Name(response.status) == expected, (
            service
        )


def test_reflection_needs_a_token(secured: Host) -> None:
    """grpcurl list fails without a token and works with -H 'authorization: Bearer ...'."""
    refused = grpcurl("-plaintext", secured.address, "list")
    assert refused.returncode != 0
    assert "Unauthenticated" in refused.stderr, refused.stderr

    header = f"authorization: Bearer {ALICE}"
    listed = grpcurl("-plaintext", "-H", header, secured.address, "list")
    assert listed.returncode == 0, listed.stderr
    assert set(ETHER_SERVICES) <= set(listed.stdout.split())
    described = grpcurl(
        "-plaintext", "-H", header, secured.address, "describe", "ether.v1.SupervisorService"
    )
    assert described.returncode == 0, described.stderr
    called = grpcurl(
        "-plaintext",
        "-H",
        header,
        "-d",
        "{}",
        secured.address,
        "ether.v1.AgentIOService/ListAgents",
    )
    assert called.returncode == 0, called.stderr
    # The health call itself goes without a token (grpcurl needs one only to read the schema).
    health = grpcurl(
        "-plaintext", "-reflect-header", header, "-d", "{}", secured.address, "grpc.health.v1.Health/Check"
    )  # fmt: skip
    assert health.returncode == 0 and '"SERVING"' in health.stdout, health.stderr
