"""TLS and client certificates: the host serves TLS with its certificate; with tls.client_ca a
client needs a certificate that CA signed and that has not expired, and the token file's
``cert:SUBJECT`` lines map its common name or an alternative name to an identity with rights,
as a token's line does; with tls.require_token a call needs a token AND a certificate of the
same identity. The ether CLI and grpcurl connect with the same files, as the README's TLS block
shows. Every certificate is made here, at test time (tests/support/certs.py)."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from cryptography import x509

from ether.v1 import (
    agent_io_pb2,
    agent_io_pb2_grpc,
    supervisor_pb2,
    supervisor_pb2_grpc,
    workflow_pb2,
    workflow_pb2_grpc,
)
from tests.support.calls import details
from tests.support.certs import Authority, Pair
from tests.support.host import ETHER, ROOT, TOOLS

from ._support import GRPCURL, README_ADDRESS, Host, clean_environment, readme_commands

CAROL_TOKEN = "carol-token-5f1c9e2a7b3d4e6f"
DAVE_TOKEN = "dave-token-0a9b8c7d6e5f4a3b"


@dataclass
class Files:
    folder: Path
    authority: Authority
    server: Pair
    alice: Pair  # CN alice.example: agent.read
    bob: Pair  # CN bob-cn, SAN bob.example: workflow.read only
    carol: Pair  # CN carol.example: agent.read,agent.deploy (and a token with agent.read)
    stranger: Pair  # signed by the CA, named by no line
    expired: Pair  # alice.example, expired yesterday
    foreign: Pair  # alice.example, signed by another CA


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    folder = tmp_path_factory.mktemp("tls")
    authority = Authority(folder, "ether")
    other = Authority(folder, "other")
    bob_name = [x509.DNSName("bob.example")]
    made = Files(
        folder=folder,
        authority=authority,
        server=authority.issue("server", "ether host", server=True),
        alice=authority.issue("alice", "alice.example"),
        bob=authority.issue("bob", "bob-cn", alternative=bob_name),
        carol=authority.issue("carol", "carol.example"),
        stranger=authority.issue("stranger", "stranger.example"),
        expired=authority.issue("expired", "alice.example", expired=True),
        foreign=other.issue("foreign", "alice.example"),
    )
    (folder / "tokens").write_text(
        "alice cert:alice.example agent.read\n"
        "bob cert:bob.example workflow.read\n"
        f"carol {CAROL_TOKEN} agent.read\n"
        "carol cert:carol.example agent.read,agent.deploy\n"
        f"dave {DAVE_TOKEN}\n"
    )
    (folder / "tokens").chmod(0o600)
    return made


def _serve(files: Files, *extra: str) -> Host:
    host = Host(
        "--listen", "127.0.0.1:0", "--state-dir", str(files.folder / f"state{len(extra)}"),
        "--log-format", "json", "--auth-tokens-file", str(files.folder / "tokens"),
        "--tls-cert", str(files.server.cert), "--tls-key", str(files.server.key),
        "--tls-client-ca", str(files.authority.pem), *extra,
    )  # fmt: skip
    record = host.wait_for_log(lambda r: r.get("event") == "serving", 60)
    assert (record["tls"], record["client_certificates"]) == (True, True)
    host.address = record["addresses"][0]
    return host


@pytest.fixture(scope="module")
def host(files: Files) -> Iterator[Host]:
    """Client certificates name the caller."""
    process = _serve(files)
    try:
        yield process
    finally:
        assert process.stop() == 0


@pytest.fixture(scope="module")
def both(files: Files) -> Iterator[Host]:
    """A token AND a certificate of one identity."""
    process = _serve(files, "--tls-require-token")
    try:
        yield process
    finally:
        assert process.stop() == 0


def channel(files: Files, host: Host, pair: Pair | None) -> grpc.Channel:
    credentials = grpc.ssl_channel_credentials(
        root_certificates=files.authority.pem.read_bytes(),
        private_key=pair.key.read_bytes() if pair else None,
        certificate_chain=pair.cert.read_bytes() if pair else None,
    )
    return grpc.secure_channel(host.address, credentials)


def list_agents(
    files: Files, host: Host, pair: Pair | None, token: str = ""
) -> agent_io_pb2.ListAgentsResponse:
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    with channel(files, host, pair) as opened:
        stub = agent_io_pb2_grpc.AgentIOServiceStub(opened)
        response: agent_io_pb2.ListAgentsResponse = stub.ListAgents(
            agent_io_pb2.ListAgentsRequest(), timeout=30, metadata=metadata
        )
        return response


def refused(files: Files, host: Host, pair: Pair | None, token: str = "") -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as error:
        list_agents(files, host, pair, token)
    return error.value


@pytest.mark.parametrize("client", ["none", "foreign", "expired"])
def test_a_client_without_a_good_certificate_never_reaches_a_method(
    files: Files, host: Host, client: str
) -> None:
    """No certificate, one of another CA, an expired one: the handshake fails (UNAVAILABLE on
    the client's side) and no RPC is logged."""
    pair = {"none": None, "foreign": files.foreign, "expired": files.expired}[client]
    error = refused(files, host, pair)
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error.details()
    assert not [r for r in host.records if r.get("event") == "rpc" and "ListAgents" in r["method"]]


def test_plaintext_is_refused(host: Host) -> None:
    with grpc.insecure_channel(host.address) as plain, pytest.raises(grpc.RpcError) as error:
        agent_io_pb2_grpc.AgentIOServiceStub(plain).ListAgents(
            agent_io_pb2.ListAgentsRequest(), timeout=30
        )
    assert error.value.code() == grpc.StatusCode.UNAVAILABLE


def test_a_good_certificate_with_the_right_is_served(files: Files, host: Host) -> None:
    assert list(list_agents(files, host, files.alice).agents) == []


def test_a_good_certificate_without_the_right_is_permission_denied(
    files: Files, host: Host
) -> None:
    """bob's certificate is mapped by its alternative name (bob.example, not its CN): bob may
    read workflows and nothing else."""
    error = refused(files, host, files.bob)
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "bob lacks the agent.read right" in error.details()
    assert details(error)["ErrorInfo"].metadata["right"] == "agent.read"
    with channel(files, host, files.bob) as opened:
        runs = workflow_pb2_grpc.WorkflowServiceStub(opened).ListRuns(
            workflow_pb2.ListRunsRequest(), timeout=30
        )
    assert list(runs.runs) == []


def test_a_certificate_no_line_names_is_unauthenticated(files: Files, host: Host) -> None:
    error = refused(files, host, files.stranger)
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "'stranger.example' maps to no identity" in error.details()
    assert "cert:stranger.example" in error.details()  # the line to add


def test_with_certificates_a_token_alone_is_not_enough(files: Files, host: Host) -> None:
    """dave's token is valid, but this host names callers by certificate."""
    error = refused(files, host, None, DAVE_TOKEN)
    assert error.code() == grpc.StatusCode.UNAVAILABLE


def test_token_and_certificate_together(files: Files, both: Host) -> None:
    """carol's certificate and token: served, with only the rights both lines grant (the
    certificate's agent.deploy is not the token's)."""
    assert list(list_agents(files, both, files.carol, CAROL_TOKEN).agents) == []
    with channel(files, both, files.carol) as opened, pytest.raises(grpc.RpcError) as deploy:
        supervisor_pb2_grpc.SupervisorServiceStub(opened).DeployAgent(
            supervisor_pb2.DeployAgentRequest(),
            timeout=30,
            metadata=(("authorization", f"Bearer {CAROL_TOKEN}"),),
        )
    assert deploy.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert details(deploy.value)["ErrorInfo"].metadata["right"] == "agent.deploy"

    missing = refused(files, both, files.carol)
    assert missing.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "missing bearer token" in missing.details()
    crossed = refused(files, both, files.alice, CAROL_TOKEN)
    assert crossed.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "both must belong to one identity" in crossed.details()


def test_the_cli_connects_with_tls_files(files: Files, host: Host) -> None:
    """ether agents list with --tls-ca/--tls-cert/--tls-key, or the ETHER_TLS_* variables."""
    by_flags = subprocess.run(
        [
            str(ETHER), "agents", "list", "--address", host.address,
            "--tls-ca", str(files.authority.pem),
            "--tls-cert", str(files.alice.cert), "--tls-key", str(files.alice.key),
        ],
        capture_output=True, text=True, timeout=60, check=False, env=clean_environment(),
    )  # fmt: skip
    assert by_flags.returncode == 0, by_flags.stderr
    env = {
        "ETHER_ADDRESS": host.address,
        "ETHER_TLS_CA": str(files.authority.pem),
        "ETHER_TLS_CLIENT_CERT": str(files.bob.cert),
        "ETHER_TLS_CLIENT_KEY": str(files.bob.key),
    }
    by_env = subprocess.run(
        [str(ETHER), "agents", "list"],
        capture_output=True, text=True, timeout=60, check=False, env=clean_environment(env),
    )  # fmt: skip
    assert by_env.returncode == 1
    assert "PERMISSION_DENIED" in by_env.stderr and "agent.read" in by_env.stderr


def test_grpcurl_connects_with_tls_files(files: Files, host: Host) -> None:
    """grpcurl -cacert -cert -key: reflection and a call."""
    tls = ["-cacert", str(files.authority.pem), "-cert", str(files.alice.cert)]
    tls += ["-key", str(files.alice.key)]
    listed = subprocess.run(
        [str(GRPCURL), *tls, host.address, "list"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert "ether.v1.AgentIOService" in listed.stdout.split()
    called = subprocess.run(
        [str(GRPCURL), *tls, "-d", "{}", host.address, "ether.v1.AgentIOService/ListAgents"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert called.returncode == 0, called.stderr
    without = subprocess.run(
        [str(GRPCURL), "-cacert", str(files.authority.pem), host.address, "list"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert without.returncode != 0


def test_the_readme_tls_block_runs_verbatim(files: Files, host: Host) -> None:
    """The README's TLS lines (grpcurl -cacert -cert -key: reflection and ListAgents; ether
    agents list --tls-ca --tls-cert --tls-key), run as a user would from the repository with
    only the address and the three files' paths changed to this host and alice's certificate.
    Without the client certificate the same grpcurl line fails."""
    paths = {
        "ca.pem": files.authority.pem,
        "client.pem": files.alice.cert,
        "client.key": files.alice.key,
    }
    env = clean_environment({"PATH": f"{TOOLS}{os.pathsep}{os.environ.get('PATH', '')}"})

    def run(command: str) -> subprocess.CompletedProcess[str]:
        assert README_ADDRESS in command, command
        line = command.replace(README_ADDRESS, host.address)
        for name, path in paths.items():
            line, found = re.subn(rf"(?<=\s){re.escape(name)}(?=\s|$)", str(path), line)
            assert found == 1, f"README TLS line does not name {name} once: {command}"
        return subprocess.run(
            ["bash", "-c", line], capture_output=True, text=True, cwd=ROOT, env=env,
            timeout=60, check=False,
        )  # fmt: skip

    listed, called, cli = readme_commands("tls")
    for command in (listed, called):
        assert command.startswith("grpcurl -cacert ca.pem -cert client.pem -key client.key ")
    assert cli.startswith(".venv/bin/ether agents list ") and "--tls-ca ca.pem" in cli
    result = run(listed)
    assert result.returncode == 0, result.stderr
    assert "ether.v1.AgentIOService" in result.stdout.split()
    result = run(called)
    assert (result.returncode, result.stdout.strip()) == (0, "{}"), result.stderr
    result = run(cli)
    assert result.returncode == 0, result.stderr
    uncertified = listed.replace(" -cert client.pem -key client.key", "")
    refused = subprocess.run(
        ["bash", "-c", uncertified.replace(README_ADDRESS, host.address).replace(
            "ca.pem", str(files.authority.pem)
        )],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert refused.returncode != 0
