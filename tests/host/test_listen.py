"""Where the host listens: loopback by default, non-loopback only with auth and TLS, unix
sockets in a private directory, and "address in use" instead of a silently shared port."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ether.v1 import agent_io_pb2, agent_io_pb2_grpc
from tests.support.certs import Authority
from tests.support.host import HostProcess

from ._support import ETHER_SERVICES, Host, grpcurl, run_ether, write_tokens

TOKEN = "listen-test-token-0123456789"


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--listen", "0.0.0.0:0"], {}),
        (["--listen", "[::]:0"], {}),
        ([], {"ETHER_LISTEN": "0.0.0.0:0"}),
    ],
    ids=["ipv4-any", "ipv6-any", "from-environment"],
)
def test_non_loopback_without_auth_is_refused(
    tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    result = run_ether(*args, "--state-dir", str(tmp_path / "state"), env=env, timeout=15)
    assert result.returncode != 0
    assert "refusing to listen on non-loopback address" in result.stderr
    assert "auth_tokens_file" in result.stderr  # says how to fix it
    assert '"serving"' not in result.stderr


def test_non_loopback_in_plaintext_is_refused(tmp_path: Path) -> None:
    """Tokens alone are not enough beyond loopback: they would cross the network readable."""
    tokens = write_tokens(tmp_path / "tokens", ops=TOKEN)
    result = run_ether(
        "--listen", "0.0.0.0:0", "--auth-tokens-file", str(tokens), "--state-dir", str(tmp_path / "state"),
        timeout=15,
    )  # fmt: skip
    assert result.returncode != 0
    assert "refusing to listen on non-loopback address 0.0.0.0:0 in plaintext" in result.stderr
    assert "tls_cert" in result.stderr  # says how to fix it
    assert '"serving"' not in result.stderr


def test_non_loopback_with_auth_and_tls_is_accepted(tmp_path: Path) -> None:
    """With a token file and a server certificate the host listens on every interface (we only
    talk over loopback), in TLS only."""
    tokens = write_tokens(tmp_path / "tokens", ops=TOKEN)
    authority = Authority(tmp_path, "listen")
    server = authority.issue("server", "ether host", server=True)
    host = Host(
        "--listen", "0.0.0.0:0", "--auth-tokens-file", str(tokens), "--state-dir", str(tmp_path / "state"),
        "--tls-cert", str(server.cert), "--tls-key", str(server.key), "--log-format", "json",
    )  # fmt: skip
    try:
        record = host.wait_for_log(lambda r: r.get("event") == "serving", 60)
        assert (record["auth"], record["tls"]) == (True, True)
        assert str(record["addresses"][0]).startswith("0.0.0.0:")
        address = "127.0.0.1:" + str(record["addresses"][0]).rpartition(":")[2]
        metadata = [("authorization", f"Bearer {TOKEN}")]
        trust = grpc.ssl_channel_credentials(authority.pem.read_bytes())
        with grpc.secure_channel(address, trust) as channel:
            stub = agent_io_pb2_grpc.AgentIOServiceStub(channel)
            stub.ListAgents(agent_io_pb2.ListAgentsRequest(), metadata=metadata, timeout=30)
        with grpc.insecure_channel(address) as plain, pytest.raises(grpc.RpcError) as error:
            agent_io_pb2_grpc.AgentIOServiceStub(plain).ListAgents(
                agent_io_pb2.ListAgentsRequest(), metadata=metadata, timeout=30
            )
        assert error.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        assert host.stop() == 0


def test_unix_socket_in_a_private_directory(tmp_path: Path) -> None:
    """--unix-socket in a new directory: the directory is made 0700 and the socket serves,
    for grpc (target unix:PATH) and grpcurl (-unix)."""
    socket_path = tmp_path / "new" / "dir" / "ether.sock"
    host = Host(
        "--listen", "", "--unix-socket", str(socket_path), "--state-dir", str(tmp_path / "state"),
        "--log-format", "json",
    )  # fmt: skip
    try:
        assert host.wait_serving() == f"unix:{socket_path}"
        assert stat.S_IMODE(socket_path.parent.stat().st_mode) == 0o700
        assert stat.S_ISSOCK(socket_path.stat().st_mode)
        host.agents.ListAgents(agent_io_pb2.ListAgentsRequest(), timeout=10)
        listed = grpcurl("-plaintext", "-unix", str(socket_path), "list")
        assert listed.returncode == 0, listed.stderr
        assert set(ETHER_SERVICES) <= set(listed.stdout.split())

        # A second host on the same socket is refused and does not steal it.
        second = run_ether(
            "--listen",
            "",
            "--unix-socket",
            str(socket_path),
            "--state-dir",
            str(tmp_path / "s2"),
            timeout=15,
        )
        assert second.returncode != 0
        assert "address in use" in second.stderr
        host.agents.ListAgents(agent_io_pb2.ListAgentsRequest(), timeout=10)
    finally:
        assert host.stop() == 0


def test_unix_socket_directory_is_tightened(tmp_path: Path) -> None:
    """An existing directory of ours with a looser mode is made 0700."""
    directory = tmp_path / "run"
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    host = Host(
        "--listen", "", "--unix-socket", str(directory / "ether.sock"), "--state-dir", str(tmp_path / "state"),
        "--log-format", "json",
    )  # fmt: skip
    try:
        host.wait_serving()
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    finally:
        assert host.stop() == 0


def _health(address: str) -> int:
    with grpc.insecure_channel(address) as channel:
        response = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=10
        )
        return int(response.status)


def test_second_host_on_the_same_port_fails(host: HostProcess, tmp_path: Path) -> None:
    """A second host on a port the first one serves fails with "address in use"; the first
    keeps serving."""
    result = run_ether("--listen", host.address, "--state-dir", str(tmp_path / "state"), timeout=15)
    assert result.returncode != 0
    assert "address in use" in result.stderr, result.stderr
    assert host.address in result.stderr
    assert _health(host.address) == health_pb2.HealthCheckResponse.SERVING


def test_port_taken_by_another_program(tmp_path: Path) -> None:
    """Any listener on the port (not only another host) gives "address in use"."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        result = run_ether("--listen", address, "--state-dir", str(tmp_path / "state"), timeout=15)
    assert result.returncode != 0
    assert "address in use" in result.stderr, result.stderr
