"""Rights per operation: every RPC of every service needs the one right that
ether_host/rights.py names for it. A caller without it gets PERMISSION_DENIED naming the right
(ErrorInfo reason MISSING_RIGHT, metadata right) before the method runs; a caller holding only
that right gets past the check; health needs no credential. The RPCs are read from the
services' descriptors, so a new RPC without a right fails here, and the table in docs/auth.md
is held to the code's."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from a2a.types import a2a_pb2
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ether.v1 import agent_io_pb2
from ether_host.rights import METHOD_RIGHTS, right_of
from tests.support.calls import agent_input, details
from tests.support.host import ROOT

from ._support import Host, service_descriptors

# The Ether services and A2A's, which the host serves on the same port (ether_host/a2a).
METHODS = [
    (service.full_name, method)
    for service in (
        *service_descriptors().values(),
        a2a_pb2.DESCRIPTOR.services_by_name["A2AService"],
    )
    for method in service.methods
]
RIGHTS = sorted(set(METHOD_RIGHTS.values()))
# One token per right holding only it, and one holding a right no RPC needs.
TOKENS = {right: f"only-{right.replace('.', '-')}-0123456789abcdef" for right in RIGHTS}
NOTHING = "holds-nothing-0123456789abcdef"
SCOUT_ONLY = "scout-only-0123456789abcdef"
# Streams that follow something may not answer at all when let in; this bounds the wait.
LET_IN_DEADLINE = 3.0


def _name(right: str) -> str:
    return right.replace(".", "-")


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    folder = tmp_path_factory.mktemp("rights")
    lines = [f"{_name(right)} {token} {right}" for right, token in TOKENS.items()]
    lines.append(f"nobody {NOTHING} no.such.right")
    lines.append(f"scouter {SCOUT_ONLY} agent.execute:scout")
    tokens = folder / "tokens"
    tokens.write_text("\n".join(lines) + "\n")
    tokens.chmod(0o600)
    process = Host(
        "--listen", "127.0.0.1:0", "--auth-tokens-file", str(tokens),
        "--state-dir", str(folder / "state"), "--log-format", "json",
    )  # fmt: skip
    try:
        process.wait_serving()
        yield process
    finally:
        assert process.stop() == 0


def _call(host: Host, service: str, method: MethodDescriptor, token: str, timeout: float) -> None:
    """Call ``method`` with an empty request (one, for a request stream) and read its first
    response; raises grpc.RpcError as the call ends."""
    request = message_factory.GetMessageClass(method.input_type)()
    response_type = message_factory.GetMessageClass(method.output_type)
    kinds: dict[tuple[bool, bool], Callable[..., Any]] = {
        (False, False): host.channel.unary_unary,
        (False, True): host.channel.unary_stream,
        (True, False): host.channel.stream_unary,
        (True, True): host.channel.stream_stream,
    }
    stub = kinds[(method.client_streaming, method.server_streaming)](
        f"/{service}/{method.name}",
        request_serializer=type(request).SerializeToString,
        response_deserializer=response_type.FromString,
    )
    argument = iter([request]) if method.client_streaming else request
    metadata = [("authorization", f"Bearer {token}")]
    result = stub(argument, timeout=timeout, metadata=metadata)
    if method.server_streaming:
        try:
            next(result)
        finally:
            result.cancel()


def test_every_rpc_has_a_right_and_the_table_names_no_other() -> None:
    served = {f"/{service}/{method.name}" for service, method in METHODS}
    assert served == set(METHOD_RIGHTS), "rights.py METHOD_RIGHTS differs from the services"
    assert right_of("/grpc.health.v1.Health/Check") is None


@pytest.mark.parametrize(("service", "method"), METHODS, ids=[m.name for _, m in METHODS])
def test_without_its_right_an_rpc_is_permission_denied(
    host: Host, service: str, method: MethodDescriptor
) -> None:
    right = METHOD_RIGHTS[f"/{service}/{method.name}"]
    for token in (NOTHING, *(t for r, t in TOKENS.items() if r != right)):
        with pytest.raises(grpc.RpcError) as caught:
            _call(host, service, method, token, timeout=30)
        error = caught.value
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED, (
            f"{method.name} with a token lacking {right}: {error.code().name} {error.details()}"
        )
        assert right in error.details()
        info = details(error)["ErrorInfo"]
        assert (info.reason, info.metadata["right"]) == ("MISSING_RIGHT", right)


@pytest.mark.parametrize(("service", "method"), METHODS, ids=[m.name for _, m in METHODS])
def test_its_right_alone_lets_an_rpc_in(host: Host, service: str, method: MethodDescriptor) -> None:
    """With only the right, the call gets past the check: it answers, refuses the empty request
    or its missing resource, or (a stream that follows) is still open at the deadline."""
    right = METHOD_RIGHTS[f"/{service}/{method.name}"]
    try:
        _call(host, service, method, TOKENS[right], timeout=LET_IN_DEADLINE)
    except grpc.RpcError as error:
        assert error.code() not in (
            grpc.StatusCode.PERMISSION_DENIED,
            grpc.StatusCode.UNAUTHENTICATED,
        ), f"{method.name} with {right}: {error.code().name} {error.details()}"


def test_health_needs_no_credential(host: Host) -> None:
    health = health_pb2_grpc.HealthStub(host.channel)
    response = health.Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert response.status == health_pb2.HealthCheckResponse.SERVING


def test_execute_may_be_granted_for_one_agent(host: Host) -> None:
    """agent.execute:scout lets Execute, ExecuteStream and Pipe reach scout (here: NOT_FOUND,
    none is deployed) and no other agent."""
    metadata = [("authorization", f"Bearer {SCOUT_ONLY}")]
    agents = host.agents
    for agent, expected in (("scout", grpc.StatusCode.NOT_FOUND), ("other", None)):
        message = agent_input(agent, "run", {})
        with pytest.raises(grpc.RpcError) as caught:
            agents.Execute(
                agent_io_pb2.ExecuteRequest(input=message), timeout=30, metadata=metadata
            )
        if expected is None:
            assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
            info = details(caught.value)["ErrorInfo"]
            assert dict(info.metadata) == {"right": "agent.execute", "scope": "other"}
            assert "agent.execute:other" in caught.value.details()
        else:
            assert caught.value.code() == expected, caught.value.details()
        with pytest.raises(grpc.RpcError) as streamed:
            next(
                agents.ExecuteStream(
                    agent_io_pb2.ExecuteStreamRequest(input=message), timeout=30, metadata=metadata
                )
            )
        assert streamed.value.code() == (expected or grpc.StatusCode.PERMISSION_DENIED)
    piped = list(
        agents.Pipe(
            iter(
                [
                    agent_io_pb2.PipeRequest(input=agent_input(agent, "run", {}))
                    for agent in ("scout", "other")
                ]
            ),
            timeout=30,
            metadata=metadata,
        )
    )
    codes = sorted(response.output.error.code for response in piped)
    assert codes == ["agent_not_found", "missing_right"], codes
    # Other methods of the service need the whole right: listing, and cancelling a task (a
    # task id does not say whose agent runs it, so scoped callers cannot cancel any).
    with pytest.raises(grpc.RpcError) as listed:
        agents.ListAgents(agent_io_pb2.ListAgentsRequest(), timeout=30, metadata=metadata)
    assert listed.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as cancelled:
        agents.CancelTask(
            agent_io_pb2.CancelTaskRequest(task_id="any-task"), timeout=30, metadata=metadata
        )
    assert cancelled.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert details(cancelled.value)["ErrorInfo"].metadata["right"] == "agent.execute"


def test_the_documented_table_is_the_codes() -> None:
    """docs/auth.md lists every RPC with the right it needs, as rights.py does."""
    text = (ROOT / "docs" / "auth.md").read_text(encoding="utf-8")
    documented = {
        f"/{service if '.' in service else 'ether.v1.' + service}/{method}": right
        for service, method, right in re.findall(
            r"^\| `([\w.]+)/(\w+)` \| `([\w.]+)` \|", text, re.M
        )
    }
    assert documented == dict(METHOD_RIGHTS)
