"""Edge claims of docs/auth.md that test_rights.py, test_auth.py, test_auth_doc_claims.py,
test_auth_more_claims.py, test_tls.py and tests/interop/test_http_listener.py do not hold:

- "Rights": every row of the table, read from docs/auth.md itself: a caller holding every
  other right the table names (both columns, `terminal.admin` and `gateway.admin` included)
  but that row's is refused PERMISSION_DENIED, ErrorInfo domain `ether` (docs/errors.md),
  reason MISSING_RIGHT, metadata `right` alone (`scope` only "for a per-agent right"), the
  message naming the caller and the right: no right stands in for another.
- "Rights", the "also" column: the row's right plus the further right, and nothing else, is
  enough (CreateTerminal for another owner, Subscribe to an agent's mailbox).
- "Rights": "checked before the method runs": bytes that are no request, sent without a
  credential or without the right, are refused as such, not answered INVALID_ARGUMENT.
- "Credentials": the doc's own example file, verbatim: tokens with a RIGHTS column and
  without; `cert:` lines by common name and by e-mail alternative name (with `tls.client_ca`).
- "TLS and client certificates": a certificate "of another CA" fails the handshake even when
  that CA bears the trusted CA's very name; so does one not valid yet ("the validity
  dates"); a certificate matched by a later alternative name is that line's; a certificate
  the file does not name is UNAUTHENTICATED with reason INVALID_CREDENTIALS.
- "Credentials": "The file is read once, at start": deleting it locks no one out; "to add,
  remove or rotate a token, edit it and restart the host (SIGTERM or SIGHUP stops it
  cleanly)": after a SIGHUP and a restart the edited file is what counts.
- "The HTTP listener's routes": a path below an open entry answers 404 to anyone; each
  route's right is refused 403 to a caller holding every other right.

Real hosts on free ports, grpcio stubs and httpx; every wait is on an answer or a log line.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2
from cryptography import x509
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor

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
from tests.support.host import ROOT, HostProcess
from tests.support.metrics import METRICS_ON

from ._support import Host, service_descriptors

DOC = (ROOT / "docs" / "auth.md").read_text(encoding="utf-8")


def _table_rows() -> list[tuple[str, str, str, str]]:
    """(service, method, right, also) of each row of docs/auth.md's rights table."""
    rows = re.findall(r"^\| `([\w.]+)/(\w+)` \| `([\w.]+)` \| (.*?) ?\|$", DOC, re.M)
    assert len(rows) > 50, "docs/auth.md's rights table was not found"
    return [(s if "." in s else f"ether.v1.{s}", m, r, also) for s, m, r, also in rows]


ROWS = _table_rows()
# Every right the table names, in its right column or its "also" column (agent.execute:NAME,
# a per-agent grant, is no right of its own).
RIGHTS = sorted(
    {right for _, _, right, _ in ROWS}
    | {found for *_, also in ROWS for found in re.findall(r"`([a-z]+\.[a-z]+)`", also)}
)
DESCRIPTORS = {
    **service_descriptors(),
    "lf.a2a.v1.A2AService": a2a_pb2.DESCRIPTOR.services_by_name["A2AService"],
}


def lacking(right: str) -> str:
    """The token of the identity ``lacks-RIGHT``, which holds every other right."""
    return f"lacks-{right.replace('.', '-')}-0123456789abcdef"


CREATE_ADMIN = "create-admin-token-0123456789"  # terminal.create,terminal.admin
MESSAGE_ADMIN = "message-admin-token-0123456789"  # gateway.message,gateway.admin


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),) if token else ()


def refused(call: Callable[[], Any]) -> grpc.RpcError:
    """The error a call (for a stream: its first read) ends with."""
    with pytest.raises(grpc.RpcError) as caught:
        result = call()
        if hasattr(result, "__next__"):
            next(result)
    return caught.value


def missing_right(error: grpc.RpcError, name: str, right: str) -> None:
    """PERMISSION_DENIED with the documented detail: domain ether, MISSING_RIGHT, metadata
    naming the right (and no scope), the message naming the caller and the right."""
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED, (error.code(), error.details())
    info = details(error)["ErrorInfo"]
    assert (info.domain, info.reason, dict(info.metadata)) == (
        "ether",
        "MISSING_RIGHT",
        {"right": right},
    )
    assert error.details() == f"{name} lacks the {right} right"


def invoke(channel: grpc.Channel, service: str, method: MethodDescriptor, token: str) -> None:
    """Call ``method`` with an empty request (one, for a request stream) and read its first
    response; raises grpc.RpcError as the call ends."""
    request = message_factory.GetMessageClass(method.input_type)()
    response = message_factory.GetMessageClass(method.output_type)
    kinds: dict[tuple[bool, bool], Callable[..., Any]] = {
        (False, False): channel.unary_unary,
        (False, True): channel.unary_stream,
        (True, False): channel.stream_unary,
        (True, True): channel.stream_stream,
    }
    stub = kinds[(method.client_streaming, method.server_streaming)](
        f"/{service}/{method.name}",
        request_serializer=type(request).SerializeToString,
        response_deserializer=response.FromString,
    )
    argument = iter([request]) if method.client_streaming else request
    result = stub(argument, timeout=30, metadata=bearer(token))
    if method.server_streaming:
        try:
            next(result)
        finally:
            result.cancel()


@pytest.fixture(scope="module")
def ranked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """Tokens each lacking one right of the table, two holding a right and its "also" right,
    the HTTP listener and metrics on."""
    folder = tmp_path_factory.mktemp("auth-edge")
    lines = [
        f"lacks-{right} {lacking(right)} {','.join(r for r in RIGHTS if r != right)}"
        for right in RIGHTS
    ]
    lines.append(f"creator {CREATE_ADMIN} terminal.create,terminal.admin")
    lines.append(f"watcher {MESSAGE_ADMIN} gateway.message,gateway.admin")
    tokens = folder / "tokens"
    tokens.write_text("\n".join(lines) + "\n")
    tokens.chmod(0o600)
    process = HostProcess(
        folder / "state", "--auth-tokens-file", str(tokens), env=METRICS_ON, http=True
    )
    try:
        process.wait_serving()
        yield process
    finally:
        assert process.stop() == 0


@pytest.mark.parametrize(
    ("service", "method", "right"),
    [row[:3] for row in ROWS],
    ids=[f"{m}-{r}" for s, m, r, _ in ROWS],
)
def test_every_other_right_together_does_not_stand_in_for_a_rows_right(
    ranked: HostProcess, service: str, method: str, right: str
) -> None:
    """Each row of docs/auth.md's table, called by `lacks-RIGHT` (every right the table names
    but the row's): PERMISSION_DENIED, domain ether, MISSING_RIGHT, metadata {right}, and the
    message "lacks-RIGHT lacks the RIGHT right"."""
    descriptor = DESCRIPTORS[service].methods_by_name[method]
    error = refused(lambda: invoke(ranked.channel, service, descriptor, lacking(right)))
    missing_right(error, f"lacks-{right}", right)


def test_the_row_right_and_its_further_right_are_enough(ranked: HostProcess) -> None:
    """The "also" column: terminal.create with terminal.admin (and nothing else) creates a
    terminal for another owner, which then is that owner's; gateway.message with
    gateway.admin gets past both checks of Subscribe to an agent's mailbox (NOT_FOUND: no
    such agent)."""
    request = pb.CreateTerminalRequest(argv=pb.Argv(args=["true"]), cwd="/tmp", owner="alice")
    made = ranked.terminals.CreateTerminal(request, timeout=30, metadata=bearer(CREATE_ADMIN))
    assert made.terminal.owner == "alice"
    mailbox = gateway_pb2.SubscribeRequest(agent="nobody")
    error = refused(
        lambda: ranked.gateway.Subscribe(mailbox, timeout=30, metadata=bearer(MESSAGE_ADMIN))
    )
    assert error.code() == grpc.StatusCode.NOT_FOUND, error.details()


def test_bytes_that_are_no_request_are_refused_by_auth_first(ranked: HostProcess) -> None:
    """DeployAgent with bytes that are not protobuf: without a token UNAUTHENTICATED, with a
    token lacking agent.deploy PERMISSION_DENIED naming it; only a caller with the right
    learns the request was malformed (INVALID_ARGUMENT, MALFORMED_REQUEST)."""
    deploy: Callable[..., Any] = ranked.channel.unary_unary(
        "/ether.v1.SupervisorService/DeployAgent",
        request_serializer=None,
        response_deserializer=supervisor_pb2.DeployAgentResponse.FromString,
    )
    garbage = b"\xff\xff\xff\xff"
    error = refused(lambda: deploy(garbage, timeout=30))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED, error.details()
    assert details(error)["ErrorInfo"].reason == "INVALID_CREDENTIALS"
    error = refused(lambda: deploy(garbage, timeout=30, metadata=bearer(lacking("agent.deploy"))))
    missing_right(error, "lacks-agent.deploy", "agent.deploy")
    error = refused(lambda: deploy(garbage, timeout=30, metadata=bearer(lacking("agent.read"))))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    assert details(error)["ErrorInfo"].reason == "MALFORMED_REQUEST"


def _route_rows() -> list[tuple[str, str]]:
    """(route, right) of the rows of the HTTP routes table that need a right."""
    rows = re.findall(r"^\| `(/[\w./-]*)` \| `([a-z]+\.[a-z]+)` \|", DOC, re.M)
    assert rows, "docs/auth.md's HTTP routes table was not found"
    return rows


@pytest.mark.parametrize(("route", "right"), _route_rows())
def test_each_routes_right_is_refused_to_a_caller_holding_every_other(
    ranked: HostProcess, route: str, right: str
) -> None:
    """`lacks-RIGHT` asking for the route (for /a2a, an agent's card below it): 403,
    PERMISSION_DENIED, MISSING_RIGHT, metadata.right; a caller lacking another right is let
    in (no 401 or 403)."""
    path = "/a2a/flow/.well-known/agent-card.json" if route == "/a2a" else route
    url = f"{ranked.http_address}{path}"
    denied = httpx.get(url, headers={"authorization": f"Bearer {lacking(right)}"}, timeout=30)
    assert denied.status_code == 403, (denied.status_code, denied.text)
    error = denied.json()["error"]
    assert (error["code"], error["reason"]) == ("PERMISSION_DENIED", "MISSING_RIGHT")
    assert error["metadata"]["right"] == right and right in error["message"], error
    other = lacking("terminal.admin")
    let_in = httpx.get(url, headers={"authorization": f"Bearer {other}"}, timeout=30)
    assert let_in.status_code not in (401, 403), (let_in.status_code, let_in.text)


@pytest.mark.parametrize("path", ["/healthz/x", "/readyz/x", "/console/no-such-asset.js"])
def test_a_path_below_an_open_entry_answers_404_to_anyone(ranked: HostProcess, path: str) -> None:
    """ "except below an open entry (a path covers everything below it: `/healthz/x` answers
    `404` to anyone)": no token, no 401, no WWW-Authenticate: 404. A path no entry covers
    still asks for a token first (401)."""
    answer = httpx.get(f"{ranked.http_address}{path}", timeout=30)
    assert answer.status_code == 404, (answer.status_code, answer.text)
    assert "www-authenticate" not in answer.headers
    assert httpx.get(f"{ranked.http_address}/healthzx", timeout=30).status_code == 401


# -- the doc's example credentials file, and client certificates -----------------------------


def doc_example() -> str:
    """The example credentials file of docs/auth.md's "Credentials", as written there."""
    found = re.search(r"one credential per line:\n\n```\n(.*?)```", DOC, re.S)
    assert found, "docs/auth.md's example credentials file was not found"
    return found.group(1)


def example_token(name: str) -> str:
    found = re.search(rf"^{name}\s+(\S+-token-\S+)", doc_example(), re.M)
    assert found, f"no token line of {name} in the doc's example"
    return found.group(1)


@dataclass
class Certified:
    host: Host
    authority: Authority
    pairs: dict[str, Pair]

    def call(self, pair: Pair | None, make: Callable[[grpc.Channel], Any]) -> grpc.RpcError | None:
        """None when ``make(channel)`` is answered over TLS with ``pair``, else its error."""
        credentials = grpc.ssl_channel_credentials(
            self.authority.pem.read_bytes(),
            pair.key.read_bytes() if pair else None,
            pair.cert.read_bytes() if pair else None,
        )
        with grpc.secure_channel(self.host.address, credentials) as channel:
            try:
                result = make(channel)
                if hasattr(result, "__next__"):
                    next(result)
            except grpc.RpcError as error:
                return error
        return None


def list_agents(channel: grpc.Channel) -> Any:
    stub = agent_io_pb2_grpc.AgentIOServiceStub(channel)
    return stub.ListAgents(agent_io_pb2.ListAgentsRequest(), timeout=30)


def stream_logs(channel: grpc.Channel) -> Any:
    """StreamLogs (agent.logs, which ci's line lacks) of an agent that is not deployed."""
    stub = supervisor_pb2_grpc.SupervisorServiceStub(channel)
    return stub.StreamLogs(supervisor_pb2.StreamLogsRequest(agent="ghost"), timeout=30)


@pytest.fixture(scope="module")
def certified(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Certified]:
    """The doc's example file with TLS and tls.client_ca: ci by common name, ops by e-mail
    alternative name; web by its second alternative name (a line added to the example)."""
    folder = tmp_path_factory.mktemp("auth-edge-certs")
    authority = Authority(folder, "ether")
    (folder / "impostor").mkdir()
    impostor = Authority(folder / "impostor", "ether")  # the same CA name, another key
    server = authority.issue("server", "ether host", server=True)
    web_names: list[x509.GeneralName] = [
        x509.DNSName("unlisted.example"),
        x509.DNSName("web.example"),
    ]
    pairs = {
        "ci": authority.issue("ci", "ci.example.com"),
        "ops": authority.issue("ops", "ops-cn", alternative=[x509.RFC822Name("ops@example.com")]),
        "web": authority.issue("web", "web-cn", alternative=web_names),
        "stranger": authority.issue("stranger", "stranger.example"),
        "impostor": impostor.issue("impostor", "ci.example.com"),
        "early": authority.issue("early", "ci.example.com", not_yet_valid=True),
    }
    tokens = folder / "tokens"
    tokens.write_text(doc_example() + "web cert:web.example agent.read\n")
    tokens.chmod(0o600)
    host = Host(
        "--listen", "127.0.0.1:0", "--state-dir", str(folder / "state"), "--log-format", "json",
        "--auth-tokens-file", str(tokens), "--tls-cert", str(server.cert),
        "--tls-key", str(server.key), "--tls-client-ca", str(authority.pem),
    )  # fmt: skip
    try:
        host.address = host.wait_for_log(lambda r: r.get("event") == "serving", 60)["addresses"][0]
        yield Certified(host, authority, pairs)
    finally:
        assert host.stop() == 0


def test_the_docs_example_certificate_lines_name_their_callers(certified: Certified) -> None:
    """`ci cert:ci.example.com agent.read,agent.deploy,agent.control`: ci's certificate (by
    common name) lists agents and is refused StreamLogs as MISSING_RIGHT agent.logs naming
    ci; `ops cert:ops@example.com` (no RIGHTS: every right) gets past StreamLogs' check
    (NOT_FOUND: no such agent)."""
    ci, ops = certified.pairs["ci"], certified.pairs["ops"]
    assert certified.call(ci, list_agents) is None
    error = certified.call(ci, stream_logs)
    assert error is not None
    missing_right(error, "ci", "agent.logs")
    error = certified.call(ops, stream_logs)
    assert error is not None and error.code() == grpc.StatusCode.NOT_FOUND, error


@pytest.mark.parametrize("client", ["impostor", "early"])
def test_a_certificate_of_a_namesake_ca_or_not_valid_yet_fails_the_handshake(
    certified: Certified, client: str
) -> None:
    """ci.example.com's certificate signed by another CA that bears the trusted CA's very name
    ("ether test CA"), or signed by the trusted CA but valid only from the day after tomorrow:
    the call ends UNAVAILABLE on the client's side (the handshake failed: no UNAUTHENTICATED
    from a method's check), where ci's good certificate is served."""
    error = certified.call(certified.pairs[client], list_agents)
    assert error is not None and error.code() == grpc.StatusCode.UNAVAILABLE, error
    assert certified.call(certified.pairs["ci"], list_agents) is None


def test_a_later_alternative_name_names_the_caller(certified: Certified) -> None:
    """web's certificate carries two DNS names, unlisted.example then web.example; the line
    `web cert:web.example agent.read` names it ("one of whose subject alternative names"):
    it lists agents and is refused StreamLogs as web."""
    web = certified.pairs["web"]
    assert certified.call(web, list_agents) is None
    error = certified.call(web, stream_logs)
    assert error is not None
    missing_right(error, "web", "agent.logs")


def test_a_certificate_no_line_names_is_invalid_credentials(certified: Certified) -> None:
    """A certificate of the CA that no line names: UNAUTHENTICATED with ErrorInfo domain
    ether and reason INVALID_CREDENTIALS ("a missing, malformed or unknown credential")."""
    error = certified.call(certified.pairs["stranger"], list_agents)
    assert error is not None and error.code() == grpc.StatusCode.UNAUTHENTICATED, error
    info = details(error)["ErrorInfo"]
    assert (info.domain, info.reason) == ("ether", "INVALID_CREDENTIALS")
    assert "maps to no identity" in (error.details() or "")


def test_the_docs_example_token_lines_grant_what_they_say(tmp_path: Path) -> None:
    """The doc's example file as is, tokens only: alice (agent.read,agent.execute) lists
    agents, gets past Execute's check (NOT_FOUND: no such agent) and is refused DeployAgent
    naming agent.deploy; ops (no RIGHTS column) gets past DeployAgent's check (its empty
    request is INVALID_ARGUMENT)."""
    tokens = tmp_path / "tokens"
    tokens.write_text(doc_example())
    tokens.chmod(0o600)
    host = HostProcess(tmp_path / "state", "--auth-tokens-file", str(tokens))
    try:
        host.wait_serving()
        alice, ops = bearer(example_token("alice")), bearer(example_token("ops"))
        host.agents.ListAgents(agent_io_pb2.ListAgentsRequest(), timeout=30, metadata=alice)
        run = agent_io_pb2.ExecuteRequest(input=agent_io_pb2.AgentInput(agent="ghost", action="a"))
        error = refused(lambda: host.agents.Execute(run, timeout=30, metadata=alice))
        assert error.code() == grpc.StatusCode.NOT_FOUND, error.details()
        deploy = supervisor_pb2.DeployAgentRequest()
        error = refused(lambda: host.supervisor.DeployAgent(deploy, timeout=30, metadata=alice))
        missing_right(error, "alice", "agent.deploy")
        error = refused(lambda: host.supervisor.DeployAgent(deploy, timeout=30, metadata=ops))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    finally:
        assert host.stop() == 0


# -- the file is read once ------------------------------------------------------------------

OLD = "carol-token-old-1a2b3c4d5e6f"
NEW = "carol-token-new-6f5e4d3c2b1a"
DAN = "dan-token-removed-0a1b2c3d4e"
ERIN = "erin-token-added-9f8e7d6c5b4a"


def status_of(host: HostProcess, token: str, call: str = "list") -> grpc.StatusCode:
    """OK or the code of ListAgents (``list``) or of an empty DeployAgent (``deploy``)."""
    try:
        if call == "list":
            host.agents.ListAgents(
                agent_io_pb2.ListAgentsRequest(), timeout=30, metadata=bearer(token)
            )
        else:
            host.supervisor.DeployAgent(
                supervisor_pb2.DeployAgentRequest(), timeout=30, metadata=bearer(token)
            )
    except grpc.RpcError as error:
        return error.code()
    return grpc.StatusCode.OK


def test_a_deleted_file_locks_no_one_out_and_a_restart_reads_the_edit(tmp_path: Path) -> None:
    """Deleting the credentials file while the host runs changes nothing (it was read at
    start). Its edit (carol's token rotated and given agent.deploy, dan removed, erin added)
    counts once the host is stopped with SIGHUP (exit 0) and started again on the same state:
    the old and the removed tokens are UNAUTHENTICATED, the new ones served with their rights."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"carol {OLD} agent.read\ndan {DAN} agent.read\n")
    tokens.chmod(0o600)
    first = HostProcess(tmp_path / "state", "--auth-tokens-file", str(tokens))
    try:
        first.wait_serving()
        tokens.unlink()
        assert status_of(first, OLD) == grpc.StatusCode.OK
        assert status_of(first, DAN) == grpc.StatusCode.OK
        tokens.write_text(f"carol {NEW} agent.read,agent.deploy\nerin {ERIN} agent.read\n")
        tokens.chmod(0o600)
        first.process.send_signal(signal.SIGHUP)
        assert first.process.wait(30) == 0
    finally:
        first.stop()
    second = HostProcess(tmp_path / "state", "--auth-tokens-file", str(tokens))
    try:
        second.wait_serving()
        assert status_of(second, OLD) == grpc.StatusCode.UNAUTHENTICATED
        assert status_of(second, DAN) == grpc.StatusCode.UNAUTHENTICATED
        assert status_of(second, ERIN) == grpc.StatusCode.OK
        assert status_of(second, NEW) == grpc.StatusCode.OK
        # carol's new line's agent.deploy: past the check, the empty request refused.
        assert status_of(second, NEW, "deploy") == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        assert second.stop() == 0
