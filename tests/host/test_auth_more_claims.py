"""Claims of docs/auth.md that test_auth_doc_claims.py, test_auth.py, test_tls.py,
test_config.py, test_rights.py and the interop tests do not hold:

- "TLS and client certificates": "In a TOML file they form a `[tls]` table" (cert, key,
  client_ca, require_token), and the environment column (`ETHER_TLS_*`) of the same table:
  the host serves TLS, requires a client certificate and, with require_token, a token too.
- The same section's third row, "a certificate and a token of the same NAME: that NAME, with
  only the rights both lines grant", where one of the two lines has no RIGHTS column (`*`):
  the narrower line's rights apply, whichever of the two it is.
- "Credentials": a bearer token of "16 characters or more"; the boundary itself: 16 is
  served, 15 "stops the host at start, naming the line".
- "The HTTP listener's routes": every route of the table, as a user reaches it: the open ones
  answer without a token; the others answer 401 (`WWW-Authenticate: Bearer`, code
  UNAUTHENTICATED, reason INVALID_CREDENTIALS) without one and 403 (PERMISSION_DENIED,
  MISSING_RIGHT, the right named in the message and `metadata.right`) to a known caller
  without the right, and let in a caller holding it; "a path covers everything below it".
- Its `/rpc-ws` row, "none at the HTTP level: ... each is an RPC, checked as on the gRPC port":
  a bridged Pipe with a token lacking agent.execute ends PERMISSION_DENIED naming it, and one
  with agent.execute:flow is let in.
- The same table's `/a2a` row: "`/a2a/NAME/.well-known/agent-card.json` for the agent NAME
  only": `agent.execute:flow` reads flow's card and is refused worker's, naming the right.

Real hosts on free ports, grpcio stubs, httpx and a wsproto client; every wait is on an answer
or a log line.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Request, TextMessage

from ether.v1 import agent_io_pb2, agent_io_pb2_grpc, supervisor_pb2, supervisor_pb2_grpc
from tests.support.agents import AGENTS, deploy
from tests.support.calls import details
from tests.support.certs import Authority, Pair
from tests.support.host import HostProcess
from tests.support.metrics import METRICS_ON

from ._support import Host, run_ether

ERIN = "erin-token-3c5e7a9b1d2f4e6a"  # every right (no RIGHTS); her cert: line agent.read
FRED = "fred-token-9a8b7c6d5e4f3a2b"  # agent.read; his cert: line every right


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),) if token else ()


def missing_right(error: grpc.RpcError, right: str) -> None:
    """PERMISSION_DENIED, reason MISSING_RIGHT, metadata right and a message naming it."""
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED, error.details()
    info = details(error)["ErrorInfo"]
    assert (info.reason, info.metadata["right"]) == ("MISSING_RIGHT", right)
    assert right in (error.details() or "")


# -- [tls] in a TOML file, ETHER_TLS_* in the environment ------------------------------------


@dataclass
class Tls:
    host: Host
    authority: Authority
    pairs: dict[str, Pair]

    def stubs(self, pair: Pair | None) -> tuple[grpc.Channel, Any, Any]:
        credentials = grpc.ssl_channel_credentials(
            self.authority.pem.read_bytes(),
            pair.key.read_bytes() if pair else None,
            pair.cert.read_bytes() if pair else None,
        )
        opened = grpc.secure_channel(self.host.address, credentials)
        agents = agent_io_pb2_grpc.AgentIOServiceStub(opened)
        return opened, agents, supervisor_pb2_grpc.SupervisorServiceStub(opened)

    def list_agents(self, pair: Pair | None, token: str = "") -> grpc.RpcError | None:
        """None when ListAgents is served, else its error."""
        opened, agents, _ = self.stubs(pair)
        with opened:
            try:
                agents.ListAgents(
                    agent_io_pb2.ListAgentsRequest(), timeout=30, metadata=bearer(token)
                )
            except grpc.RpcError as error:
                return error
        return None

    def deploy(self, pair: Pair, token: str) -> grpc.RpcError:
        """DeployAgent (agent.deploy) of an empty spec: refused, by its right or its request."""
        opened, _, supervisor = self.stubs(pair)
        with opened, pytest.raises(grpc.RpcError) as caught:
            supervisor.DeployAgent(
                supervisor_pb2.DeployAgentRequest(), timeout=30, metadata=bearer(token)
            )
        return caught.value


@pytest.fixture(scope="module", params=["toml", "environment"])
def tls(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tls]:
    """A host whose four TLS settings come only from a `[tls]` table of its TOML file, or only
    from ETHER_TLS_* variables: certificate, key, client CA and require_token."""
    folder = tmp_path_factory.mktemp(f"tls-{request.param}")
    authority = Authority(folder, "ether")
    server = authority.issue("server", "ether host", server=True)
    pairs = {name: authority.issue(name, f"{name}.example") for name in ("erin", "fred")}
    tokens = folder / "tokens"
    tokens.write_text(
        f"erin {ERIN}\nerin cert:erin.example agent.read\n"
        f"fred {FRED} agent.read\nfred cert:fred.example\n"
    )
    tokens.chmod(0o600)
    settings = {
        "cert": str(server.cert),
        "key": str(server.key),
        "client_ca": str(authority.pem),
    }
    args = ["--listen", "127.0.0.1:0", "--state-dir", str(folder / "state")]
    args += ["--log-format", "json", "--auth-tokens-file", str(tokens)]
    env: dict[str, str] = {}
    if request.param == "toml":
        config = folder / "ether.toml"
        lines = "".join(f'{key} = "{value}"\n' for key, value in settings.items())
        config.write_text(f"[tls]\n{lines}require_token = true\n")
        args += ["--config", str(config)]
    else:
        env = {f"ETHER_TLS_{key.upper()}": value for key, value in settings.items()}
        env["ETHER_TLS_REQUIRE_TOKEN"] = "true"
    host = Host(*args, env=env)
    try:
        record = host.wait_for_log(lambda r: r.get("event") == "serving", 60)
        host.address = record["addresses"][0]
        assert (record["tls"], record["client_certificates"]) == (True, True)
        yield Tls(host, authority, pairs)
    finally:
        assert host.stop() == 0


def test_tls_settings_from_a_toml_table_or_the_environment_are_served(tls: Tls) -> None:
    """With cert, key, client_ca and require_token from `[tls]` (or ETHER_TLS_*): a call over
    TLS with erin's certificate and token is served; without a certificate the handshake fails
    (UNAVAILABLE); with the certificate and no token it is UNAUTHENTICATED, naming the missing
    token (require_token); plaintext is not served."""
    erin = tls.pairs["erin"]
    assert tls.list_agents(erin, ERIN) is None
    uncertified = tls.list_agents(None, ERIN)
    assert uncertified is not None and uncertified.code() == grpc.StatusCode.UNAVAILABLE
    tokenless = tls.list_agents(erin)
    assert tokenless is not None and tokenless.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "missing bearer token" in (tokenless.details() or "")
    with grpc.insecure_channel(tls.host.address) as plain, pytest.raises(grpc.RpcError) as caught:
        agent_io_pb2_grpc.AgentIOServiceStub(plain).ListAgents(
            agent_io_pb2.ListAgentsRequest(), timeout=30, metadata=bearer(ERIN)
        )
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize("name", ["erin", "fred"])
def test_require_token_with_an_all_rights_line_keeps_the_narrower_lines_rights(
    tls: Tls, name: str
) -> None:
    """erin's token line holds every right and her cert: line agent.read; fred's the other way
    round. Each, with certificate and token, may list (agent.read, both lines grant it) and is
    refused DeployAgent as MISSING_RIGHT agent.deploy: `*` on one line widens nothing."""
    pair, token = tls.pairs[name], {"erin": ERIN, "fred": FRED}[name]
    assert tls.list_agents(pair, token) is None
    error = tls.deploy(pair, token)
    missing_right(error, "agent.deploy")
    assert error.details() == f"{name} lacks the agent.deploy right"


# -- the minimum token length ----------------------------------------------------------------


def test_a_token_of_sixteen_characters_is_served_and_fifteen_refused(tmp_path: Path) -> None:
    """ "16 characters or more": a 16-character token lets its caller in; the same file with a
    15-character token on line 3 stops the host at start, naming the line and the minimum."""
    sixteen, fifteen = "0123456789abcdef", "0123456789abcde"
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# NAME TOKEN\nalice alice-token-5f1c9e2a7b3d\nbob {sixteen} agent.read\n")
    tokens.chmod(0o600)
    host = HostProcess(tmp_path / "state", "--auth-tokens-file", str(tokens))
    try:
        host.wait_serving()
        listed = host.agents.ListAgents(
            agent_io_pb2.ListAgentsRequest(), timeout=30, metadata=bearer(sixteen)
        )
        assert list(listed.agents) == []
    finally:
        assert host.stop() == 0
    tokens.write_text(f"# NAME TOKEN\nalice alice-token-5f1c9e2a7b3d\nbob {fifteen} agent.read\n")
    result = run_ether(
        "--listen", "127.0.0.1:0", "--state-dir", str(tmp_path / "state"),
        "--auth-tokens-file", str(tokens), timeout=15,
    )  # fmt: skip
    assert result.returncode != 0
    assert '"serving"' not in result.stderr
    assert f"token file {tokens} line 3" in result.stderr, result.stderr
    assert "token of 'bob' is shorter than 16 characters" in result.stderr, result.stderr


# -- the HTTP listener's routes --------------------------------------------------------------

ADMIN = "routes-admin-token-0123456789"  # every right
READER = "routes-reader-token-0123456789"  # agent.read
RUNNER = "routes-runner-token-0123456789"  # agent.execute
FLOW_ONLY = "routes-flow-only-token-0123456789"  # agent.execute:flow
A2A_HEADERS = {"A2A-Version": "1.0"}
GET_TASK = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "none"}}


@dataclass(frozen=True)
class Route:
    """One route of the table as a request: the right it needs (None: open), a caller known
    to the host without that right, and one holding it."""

    method: str
    path: str
    right: str | None = None
    denied: str = ""
    allowed: str = ""


ROUTES = [
    Route("GET", "/healthz"),
    Route("GET", "/readyz"),
    Route("GET", "/"),
    Route("GET", "/console/main.js"),
    Route("POST", "/mcp", "agent.execute", READER, FLOW_ONLY),
    Route("POST", "/mcp/below", "agent.execute", READER, FLOW_ONLY),
    Route("GET", "/.well-known/agent-card.json", "agent.read", RUNNER, READER),
    Route("POST", "/a2a/flow", "agent.execute", READER, FLOW_ONLY),
    Route("GET", "/a2a/flow/.well-known/agent-card.json", "agent.execute", READER, FLOW_ONLY),
    Route("GET", "/metrics", "agent.read", RUNNER, READER),
    Route("GET", "/metrics/below", "agent.read", RUNNER, READER),
]


@pytest.fixture(scope="module")
def listener(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """Tokens, the HTTP listener, metrics on, and the agent flow deployed."""
    folder = tmp_path_factory.mktemp("auth-routes")
    tokens = folder / "tokens"
    tokens.write_text(
        f"admin {ADMIN}\nreader {READER} agent.read\nrunner {RUNNER} agent.execute\n"
        f"flowonly {FLOW_ONLY} agent.execute:flow\n"
    )
    tokens.chmod(0o600)
    process = HostProcess(
        folder / "state", "--auth-tokens-file", str(tokens), env=METRICS_ON, http=True
    )
    try:
        process.wait_serving()
        deploy(process, AGENTS / "flow", metadata=bearer(ADMIN))
        yield process
    finally:
        assert process.stop() == 0


def ask(host: HostProcess, route: Route, token: str = "", path: str = "") -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    url = f"{host.http_address}{path or route.path}"
    if route.method == "GET":
        return httpx.get(url, headers=headers, timeout=30)
    return httpx.post(url, json=GET_TASK, headers=headers | A2A_HEADERS, timeout=30)


def forbidden(answer: httpx.Response, right: str) -> dict[str, Any]:
    """403, code PERMISSION_DENIED, reason MISSING_RIGHT, the right named; the error body."""
    assert answer.status_code == 403, (answer.status_code, answer.text)
    error: dict[str, Any] = answer.json()["error"]
    assert (error["code"], error["reason"]) == ("PERMISSION_DENIED", "MISSING_RIGHT")
    assert right in error["message"] and error["metadata"]["right"] == right, error
    return error


@pytest.mark.parametrize("route", ROUTES, ids=[f"{r.method} {r.path}" for r in ROUTES])
def test_each_route_answers_401_and_403_as_the_table_says(
    listener: HostProcess, route: Route
) -> None:
    """Without a token an open route answers (200 for the probes; never 401 or 403) and any
    other is 401 with `WWW-Authenticate: Bearer` and INVALID_CREDENTIALS; a known caller
    without the route's right is 403 naming it; a caller holding it (for /mcp and /a2a,
    agent.execute:flow only) is let in. Paths below /mcp and /metrics need their right."""
    anonymous = ask(listener, route)
    if route.right is None:
        assert anonymous.status_code not in (401, 403), anonymous.text
        assert "www-authenticate" not in anonymous.headers
        if route.path in ("/healthz", "/readyz"):
            assert anonymous.status_code == 200, anonymous.text
        return
    assert anonymous.status_code == 401, (anonymous.status_code, anonymous.text)
    assert anonymous.headers["www-authenticate"].startswith("Bearer")
    error = anonymous.json()["error"]
    assert (error["code"], error["reason"]) == ("UNAUTHENTICATED", "INVALID_CREDENTIALS")
    assert "Bearer <token>" in error["message"], error
    forbidden(ask(listener, route, route.denied), route.right)
    let_in = ask(listener, route, route.allowed)
    assert let_in.status_code not in (401, 403), (let_in.status_code, let_in.text)


def test_an_agents_a2a_card_is_for_that_agent_only(listener: HostProcess) -> None:
    """agent.execute:flow reads flow's card and is refused worker's with 403, MISSING_RIGHT
    agent.execute for scope worker, the message naming agent.execute:worker."""
    card = Route("GET", "/a2a/flow/.well-known/agent-card.json")
    mine = ask(listener, card, FLOW_ONLY)
    assert mine.status_code == 200, mine.text
    assert mine.json()["name"] == "flow"
    other = ask(listener, card, FLOW_ONLY, "/a2a/worker/.well-known/agent-card.json")
    error = forbidden(other, "agent.execute")
    assert error["metadata"]["scope"] == "worker"
    assert "agent.execute:worker" in error["message"]


def bridged_pipe(host: HostProcess, token: str) -> dict[str, Any]:
    """Pipe over the console's WebSocket bridge (docs/console.md, "The bridge"), as a client
    that is not a browser: the metadata frame with ``token``, then the half-close; the status
    frame the host ends the call with (``{}`` for OK)."""
    address = host.http_address.removeprefix("http://")
    client = WSConnection(ConnectionType.CLIENT)
    texts: list[str] = []
    name, _, port = address.rpartition(":")
    with socket.create_connection((name, int(port)), timeout=30) as conn:
        target = "/rpc-ws/ether.v1.AgentIOService/Pipe"
        conn.sendall(client.send(Request(host=address, target=target)))
        frames = [{"metadata": {"authorization": f"Bearer {token}"}}, {"end": True}]
        closed = False
        while not closed:
            data = conn.recv(65536)
            assert data, "the host closed the connection without a close frame"
            client.receive_data(data)
            for event in client.events():
                if isinstance(event, AcceptConnection):
                    conn.sendall(b"".join(client.send(TextMessage(json.dumps(f))) for f in frames))
                elif isinstance(event, TextMessage):
                    texts.append(str(event.data))
                elif isinstance(event, CloseConnection):
                    conn.sendall(client.send(event.response()))
                    closed = True
    assert texts, "no status frame before the close"
    status: dict[str, Any] = json.loads(texts[-1])
    return status


def test_the_bridge_checks_each_call_by_the_rpcs_own_right(listener: HostProcess) -> None:
    """/rpc-ws asks nothing at the HTTP level; the bridged call is checked as Pipe is on the
    gRPC port: agent.read alone ends permission_denied naming agent.execute, and
    agent.execute:flow (enough for Pipe) is let in and ends OK."""
    status = bridged_pipe(listener, READER)
    assert "error" in status, status
    refused = status["error"]
    assert refused["code"] == "permission_denied", refused
    assert refused["message"] == "reader lacks the agent.execute right", refused
    assert bridged_pipe(listener, FLOW_ONLY) == {}
