"""Claims of docs/auth.md no other test holds (test_auth.py, test_rights.py, test_tls.py,
tests/interop/test_http_listener.py and tests/terminals/test_rights.py hold the rest):

- `cert:SUBJECT` matches "one of whose subject alternative names (DNS name, e-mail, URI, IP
  address)"; with `tls.client_ca` the identity is "the `cert:` line naming it" (a token sent
  beside it adds nothing).
- "reflection needs a valid credential and no right".
- "A missing, malformed or unknown credential is `UNAUTHENTICATED`, ErrorInfo reason
  `INVALID_CREDENTIALS`, with a message saying what to send"; a token is "never logged".
- Attach: "input, resize and signal on the attach: also `terminal.write`, `terminal.resize`,
  `terminal.signal`"; the "also" column's rights refused as `MISSING_RIGHT` naming them; and
  "`terminal.admin` also lets a caller see and operate other identities' terminals".

Real hosts on free ports, grpcio stubs, grpcurl and httpx; every wait is on an answer or a log
line.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import httpx
import pytest
from cryptography import x509

from ether.v1 import (
    agent_io_pb2,
    agent_io_pb2_grpc,
    gateway_pb2,
    supervisor_pb2,
    supervisor_pb2_grpc,
)
from ether.v1 import terminal_pb2 as pb
from tests.support.calls import details
from tests.support.certs import Authority, Pair
from tests.support.host import HostProcess

from ._support import Host, grpcurl

DAVE = "dave-token-0a9b8c7d6e5f4a3b"  # every right (no RIGHTS column)
ALICE = "alice-token-5f1c9e2a7b3d4e6f"
BOB = "bob-token-7e6d5c4b3a291807"
KEEPER = "keeper-token-a1b2c3d4e5f60718"
NOTHING = "holds-nothing-0123456789abcdef"
# Sent and refused: none of these may reach the log either.
UNKNOWN = "unknown-token-never-to-be-logged-1"
MALFORMED = "malformed-credential-never-logged-2"
# The alternative names of the doc's kinds; each certificate's common name is on no line.
NAMES: dict[str, x509.GeneralName] = {
    "ops": x509.RFC822Name("ops@example.com"),  # the doc's own example line
    "ci": x509.UniformResourceIdentifier("spiffe://example.com/ci"),
    "box": x509.IPAddress(ipaddress.ip_address("10.1.2.3")),
    "six": x509.IPAddress(ipaddress.ip_address("2001:db8::7")),
}


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


def refused(call: Callable[[], Any]) -> grpc.RpcError:
    """The error a call (for a stream: its first read) ends with."""
    with pytest.raises(grpc.RpcError) as caught:
        result = call()
        if hasattr(result, "__next__"):
            next(result)
    return caught.value


def list_agents(host: HostProcess, authorization: str) -> grpc.RpcError:
    """The refusal of a ListAgents sent with this ``authorization`` metadata."""
    metadata = (("authorization", authorization),)
    request = agent_io_pb2.ListAgentsRequest()
    return refused(lambda: host.agents.ListAgents(request, timeout=30, metadata=metadata))


def missing_right(error: grpc.RpcError, right: str) -> None:
    """PERMISSION_DENIED, reason MISSING_RIGHT, metadata right and a message naming it."""
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED, error.details()
    info = details(error)["ErrorInfo"]
    assert (info.reason, info.metadata["right"]) == ("MISSING_RIGHT", right)
    assert right in error.details()


Certified = tuple[Host, Authority, dict[str, Pair]]


@pytest.fixture(scope="module")
def certified(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Certified]:
    """TLS with tls.client_ca: client certificates name the callers, read-only each."""
    folder = tmp_path_factory.mktemp("auth-doc-certs")
    authority = Authority(folder, "ether")
    server = authority.issue("server", "ether host", server=True)
    pairs = {n: authority.issue(n, f"{n}-cn", alternative=[san]) for n, san in NAMES.items()}
    pairs["alice"] = authority.issue("alice", "alice.example")
    lines = [f"{name} cert:{san.value} agent.read" for name, san in NAMES.items()]
    tokens = folder / "tokens"
    tokens.write_text("\n".join([*lines, "alice cert:alice.example agent.read", f"dave {DAVE}"]))
    tokens.chmod(0o600)
    host = Host(
        "--listen", "127.0.0.1:0", "--state-dir", str(folder / "state"), "--log-format", "json",
        "--auth-tokens-file", str(tokens), "--tls-cert", str(server.cert),
        "--tls-key", str(server.key), "--tls-client-ca", str(authority.pem),
    )  # fmt: skip
    try:
        host.address = host.wait_for_log(lambda r: r.get("event") == "serving", 60)["addresses"][0]
        yield host, authority, pairs
    finally:
        assert host.stop() == 0


def deploy_as(host: Host, authority: Authority, pair: Pair, token: str = "") -> grpc.RpcError:
    """DeployAgent (agent.deploy, which no cert: line grants) over TLS with ``pair``; after a
    ListAgents that agent.read lets in."""
    credentials = grpc.ssl_channel_credentials(
        authority.pem.read_bytes(), pair.key.read_bytes(), pair.cert.read_bytes()
    )
    metadata = bearer(token) if token else ()
    with grpc.secure_channel(host.address, credentials) as channel:
        agents = agent_io_pb2_grpc.AgentIOServiceStub(channel)
        agents.ListAgents(agent_io_pb2.ListAgentsRequest(), timeout=30, metadata=metadata)
        supervisor = supervisor_pb2_grpc.SupervisorServiceStub(channel)
        request = supervisor_pb2.DeployAgentRequest()
        return refused(lambda: supervisor.DeployAgent(request, timeout=30, metadata=metadata))


@pytest.mark.parametrize("name", list(NAMES))
def test_a_certificate_is_named_by_its_email_uri_or_ip_alternative_name(
    certified: Certified, name: str
) -> None:
    """`cert:ops@example.com`, `cert:spiffe://...`, `cert:10.1.2.3`, `cert:2001:db8::7`: the
    certificate carrying that alternative name is served as that line's NAME, with its rights."""
    host, authority, pairs = certified
    error = deploy_as(host, authority, pairs[name])
    missing_right(error, "agent.deploy")
    assert error.details() == f"{name} lacks the agent.deploy right"


def test_a_token_beside_a_certificate_does_not_widen_it(certified: Certified) -> None:
    """With "`auth_tokens_file` + `tls.client_ca`" the identity is "the `cert:` line naming it":
    with dave's token (every right) sent too, alice's certificate is still read-only alice."""
    host, authority, pairs = certified
    error = deploy_as(host, authority, pairs["alice"], DAVE)
    missing_right(error, "agent.deploy")
    assert error.details() == "alice lacks the agent.deploy right"


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """Tokens, the HTTP listener, and the log at debug (the most a host writes)."""
    folder = tmp_path_factory.mktemp("auth-doc")
    make = "terminal.create,terminal.read,terminal.attach,terminal.write,terminal.close"
    tokens = folder / "tokens"
    tokens.write_text(
        f"alice {ALICE} {make}\nbob {BOB} terminal.create,terminal.read,gateway.message\n"
        f"keeper {KEEPER} terminal.read,terminal.write,terminal.close,terminal.admin\n"
        f"nobody {NOTHING} no.such.right\n"
    )
    tokens.chmod(0o600)
    process = HostProcess(
        folder / "state", "--auth-tokens-file", str(tokens), "--log-level", "debug", http=True
    )
    try:
        process.wait_serving()
        yield process
    finally:
        assert process.stop() == 0


def test_reflection_needs_a_valid_credential_and_no_right(host: HostProcess) -> None:
    """grpcurl lists and describes the services with a token that holds no right, which any
    RPC refuses."""
    header = ["-H", f"authorization: Bearer {NOTHING}"]
    listed = grpcurl("-plaintext", *header, host.address, "list")
    assert listed.returncode == 0, listed.stderr
    assert "ether.v1.AgentIOService" in listed.stdout.split()
    described = grpcurl("-plaintext", *header, host.address, "describe", "ether.v1.AgentIOService")
    assert described.returncode == 0 and "rpc ListAgents" in described.stdout, described.stderr
    missing_right(list_agents(host, f"Bearer {NOTHING}"), "agent.read")


def test_malformed_and_unknown_credentials_are_invalid_credentials(host: HostProcess) -> None:
    """Over gRPC and on the HTTP listener: UNAUTHENTICATED (401), reason INVALID_CREDENTIALS,
    the message saying what to send ('Bearer <token>', a token of the host's token file)."""
    says = {
        f"Basic {MALFORMED}": "expected 'Bearer <token>'",
        "Bearer": "expected 'Bearer <token>'",  # the scheme without a token
        f"Bearer {UNKNOWN}": "matches no token in the host's token file",
    }
    for value, expected in says.items():
        error = list_agents(host, value)
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED, value
        assert details(error)["ErrorInfo"].reason == "INVALID_CREDENTIALS", value
        assert expected in error.details(), (value, error.details())
        answer = httpx.post(
            f"{host.http_address}/mcp", json={}, headers={"authorization": value}, timeout=30
        )
        assert answer.status_code == 401, value
        assert answer.headers["www-authenticate"].startswith("Bearer")
        body = answer.json()["error"]
        assert (body["code"], body["reason"]) == ("UNAUTHENTICATED", "INVALID_CREDENTIALS")
        assert expected in body["message"], (value, body["message"])


def test_tokens_are_never_logged_over_http_either(host: HostProcess) -> None:
    """Good, unknown and malformed credentials as gRPC metadata and as HTTP headers (/mcp, the
    console's /rpc): each request's log line is written, and no credential is in the log."""
    sent = (f"Bearer {ALICE}", f"Bearer {UNKNOWN}", f"Basic {MALFORMED}")
    console = f"{host.http_address}/rpc/ether.v1.AgentIOService/ListAgents"

    def logged(start: int, method: str, http: bool) -> None:  # /rpc logs the RPC's name
        host.wait_for_log(
            lambda r: (
                r.get("event") == "rpc"
                and r.get("method") == method
                and ("http_status" in r) == http
            ),
            after=start,
        )

    listing = "/ether.v1.AgentIOService/ListAgents"
    for value in sent:
        start = len(host.records)
        list_agents(host, value)  # refused, alice too: she holds no agent.read
        logged(start, listing, http=False)
        start = len(host.records)
        headers = {"authorization": value, "content-type": "application/proto"}
        for url in (f"{host.http_address}/mcp", console):
            assert httpx.post(url, content=b"", headers=headers, timeout=30).status_code >= 400
        logged(start, "POST /mcp", http=True)
        logged(start, listing, http=True)
    log = "\n".join(host.raw_lines)
    for secret in (ALICE, UNKNOWN, MALFORMED):
        assert secret not in log, f"{secret} was written to the log"


def create(host: HostProcess, token: str, **fields: Any) -> pb.Terminal:
    request = pb.CreateTerminalRequest(argv=pb.Argv(args=["sleep", "600"]), cwd="/tmp", **fields)
    return host.terminals.CreateTerminal(request, timeout=30, metadata=bearer(token)).terminal


@pytest.mark.parametrize(
    ("message", "right"),
    [
        (pb.AttachRequest(resize=pb.AttachResize(rows=10, cols=40)), "terminal.resize"),
        (pb.AttachRequest(signal=pb.AttachSignal(signal="TERM")), "terminal.signal"),
    ],
    ids=["resize", "signal"],
)
def test_resize_and_signal_on_an_attach_need_their_own_rights(
    host: HostProcess, message: pb.AttachRequest, right: str
) -> None:
    """alice may attach and write (her attach is read-write), but holds neither
    terminal.resize nor terminal.signal: the attach ends PERMISSION_DENIED naming the right,
    and the terminal keeps its size."""
    terminal = create(host, ALICE)
    start = pb.AttachRequest(start=pb.AttachStart(terminal_id=terminal.id, read_only=False))
    stream = host.terminals.Attach(iter([start, message]), timeout=30, metadata=bearer(ALICE))
    assert next(stream).started.read_only is False
    with pytest.raises(grpc.RpcError) as caught:
        for _ in stream:
            pass
    missing_right(caught.value, right)
    screen = host.terminals.ReadScreen(
        pb.ReadScreenRequest(terminal_id=terminal.id), timeout=30, metadata=bearer(ALICE)
    ).screen
    assert (screen.rows, screen.cols) == (terminal.rows, terminal.cols)
    close = pb.CloseTerminalRequest(terminal_id=terminal.id)
    host.terminals.CloseTerminal(close, timeout=30, metadata=bearer(ALICE))


def test_a_further_right_refused_is_missing_right_naming_it(host: HostProcess) -> None:
    """bob (terminal.create, terminal.read, gateway.message) asking for alice's terminals:
    CreateTerminal, ListTerminals and WatchTerminals with owner alice need terminal.admin;
    Subscribe to an agent's mailbox needs gateway.admin."""
    terminals = host.terminals
    as_bob: dict[str, Any] = {"timeout": 30, "metadata": bearer(BOB)}
    calls = {
        "terminal.admin": [
            lambda: create(host, BOB, owner="alice"),
            lambda: terminals.ListTerminals(pb.ListTerminalsRequest(owner="alice"), **as_bob),
            lambda: terminals.WatchTerminals(pb.WatchTerminalsRequest(owner="alice"), **as_bob),
        ],
        "gateway.admin": [
            lambda: host.gateway.Subscribe(gateway_pb2.SubscribeRequest(agent="any"), **as_bob)
        ],
    }
    for right, made in calls.items():
        for call in made:
            missing_right(refused(call), right)


def test_terminal_admin_sees_and_operates_other_identities_terminals(host: HostProcess) -> None:
    """keeper holds terminal.admin with read, write and close (not `*`): it watches alice's
    terminals, reads, writes and closes hers, which bob, without the right, cannot see."""
    terminal = create(host, ALICE)
    as_keeper: dict[str, Any] = {"timeout": 30, "metadata": bearer(KEEPER)}
    watch = pb.WatchTerminalsRequest(owner="alice", include_existing=True)
    events = host.terminals.WatchTerminals(watch, **as_keeper)
    try:
        seen = next(e for e in events if e.terminal.id == terminal.id)
    finally:
        events.cancel()
    assert (seen.WhichOneof("event"), seen.terminal.owner) == ("created", "alice")
    get = pb.GetTerminalRequest(terminal_id=terminal.id)
    assert host.terminals.GetTerminal(get, **as_keeper).terminal.owner == "alice"
    write = pb.WriteInputRequest(terminal_id=terminal.id, input=pb.TerminalInput(text="x"))
    assert host.terminals.WriteInput(write, **as_keeper).bytes_queued == 1
    hidden = refused(lambda: host.terminals.GetTerminal(get, timeout=30, metadata=bearer(BOB)))
    assert hidden.code() == grpc.StatusCode.NOT_FOUND  # as for any caller without the right
    close = pb.CloseTerminalRequest(terminal_id=terminal.id)
    assert host.terminals.CloseTerminal(close, **as_keeper).terminal.id == terminal.id


def test_the_credentials_file_is_read_once_at_start(tmp_path: Any) -> None:
    """ "The file is read once, at start": a line changed while the host runs changes nothing
    until it restarts; the token the file held is still served, the new one is refused."""
    tokens = tmp_path / "tokens"
    old, new = "carol-token-1a2b3c4d5e6f7081", "carol-token-rotated-99887766"
    tokens.write_text(f"carol {old} agent.read\n")
    tokens.chmod(0o600)
    process = HostProcess(tmp_path / "state", "--auth-tokens-file", str(tokens))
    try:
        process.wait_serving()
        tokens.write_text(f"carol {new} agent.read\n")
        request = agent_io_pb2.ListAgentsRequest()
        process.agents.ListAgents(request, timeout=30, metadata=bearer(old))
        error = list_agents(process, f"Bearer {new}")
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED, error
    finally:
        assert process.stop() == 0
