"""The host's HTTP listener: off unless asked, served in the host beside the gRPC port and under
its rules (loopback only without auth and TLS, the same tokens and rights, one log line per
request)."""

from __future__ import annotations

import ssl
from pathlib import Path

import anyio
import httpx
import pytest
import structlog.testing
from starlette.requests import Request
from starlette.routing import Route

from ether.v1 import supervisor_pb2
from ether_host.errors import NotFound
from ether_host.http import build_http_app
from ether_host.lifecycle import Lifecycle
from ether_host.logs import flush_logs
from ether_host.reasons import Reason
from tests.host._support import run_ether
from tests.support.certs import Authority
from tests.support.host import HostProcess

ADMIN = "http-admin-token-0123456789"
READER = "http-reader-token-0123456789"


def _host_info(host: HostProcess) -> supervisor_pb2.HostInfo:
    return host.supervisor.GetHostInfo(supervisor_pb2.GetHostInfoRequest(), timeout=10).host


def test_healthz_is_served_and_logged_like_a_call(tmp_path: Path) -> None:
    host = HostProcess(tmp_path / "state", http=True)
    try:
        host.wait_serving()
        assert host.http_address.startswith("http://127.0.0.1:")
        answer = httpx.get(f"{host.http_address}/healthz", timeout=30)
        assert (answer.status_code, answer.json()) == (200, {"status": "SERVING"})
        line = host.wait_for_log(lambda r: r.get("method") == "GET /healthz")
        assert line["event"] == "rpc"  # the event every gRPC call logs
        assert (line["code"], line["http_status"]) == ("OK", 200)
        assert str(line["peer"]).startswith("ipv4:127.0.0.1:")
        assert line["duration_ms"] >= 0
        assert host.http_address in _host_info(host).listeners
    finally:
        assert host.stop() == 0


def test_no_http_listener_unless_asked(host: HostProcess) -> None:
    record = host.wait_for_log(lambda r: r.get("event") == "serving")
    assert record["http"] is None
    assert not [a for a in _host_info(host).listeners if a.startswith("http")]


def test_auth_refusals_name_what_is_missing(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"admin {ADMIN}\nreader {READER} agent.read\n")
    tokens.chmod(0o600)
    host = HostProcess(tmp_path / "state", "--auth-tokens-file", str(tokens), http=True)
    try:
        record = host.wait_for_log(lambda r: r.get("event") == "serving", 60)
        base = str(record["http"])
        with httpx.Client(base_url=base, timeout=30) as client:
            # Health answers probes without a token, as grpc.health.v1 does.
            assert client.get("/healthz").status_code == 200

            missing = client.post("/mcp", json={})
            assert missing.status_code == 401
            assert missing.headers["www-authenticate"].startswith("Bearer")
            error = missing.json()["error"]
            assert (error["code"], error["reason"]) == ("UNAUTHENTICATED", "INVALID_CREDENTIALS")
            assert "missing bearer token" in error["message"]

            wrong = client.post("/mcp", json={}, headers={"authorization": "Bearer not-a-token"})
            assert wrong.status_code == 401
            assert "invalid bearer token" in wrong.json()["error"]["message"]

            # A known caller without the route's right: 403 naming the right (rights.py).
            reader = {"authorization": f"Bearer {READER}"}
            denied = client.post("/mcp", json={}, headers=reader)
            assert denied.status_code == 403
            error = denied.json()["error"]
            assert (error["code"], error["reason"]) == ("PERMISSION_DENIED", "MISSING_RIGHT")
            assert "agent.execute" in error["message"]
            assert error["metadata"]["right"] == "agent.execute"

            # A path no route serves still needs a credential before it says so.
            assert client.get("/nothing-here").status_code == 401
            assert client.get("/nothing-here", headers=reader).status_code == 404
        refused = host.wait_for_log(
            lambda r: r.get("method") == "POST /mcp" and r.get("http_status") == 403
        )
        assert refused["code"] == "PERMISSION_DENIED"
    finally:
        assert host.stop() == 0


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--http-listen", "0.0.0.0:0"], {}),
        (["--http-listen", "[::]:0"], {}),
        ([], {"ETHER_HTTP_LISTEN": "0.0.0.0:0"}),
    ],
    ids=["ipv4-any", "ipv6-any", "from-environment"],
)
def test_non_loopback_without_auth_is_refused(
    tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    state = str(tmp_path / "state")
    result = run_ether("--listen", "127.0.0.1:0", *args, "--state-dir", state, env=env)
    assert result.returncode == 1
    assert "refusing to http_listen on non-loopback address" in result.stderr
    assert "auth_tokens_file" in result.stderr  # says how to fix it
    assert '"serving"' not in result.stderr


def test_non_loopback_in_plaintext_is_refused(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"admin {ADMIN}\n")
    result = run_ether(
        "--listen", "127.0.0.1:0", "--http-listen", "0.0.0.0:0", "--auth-tokens-file", str(tokens),
        "--state-dir", str(tmp_path / "state"),
    )  # fmt: skip
    assert result.returncode == 1
    assert "refusing to http_listen on non-loopback address 0.0.0.0:0 in plaintext" in result.stderr
    assert "tls_cert" in result.stderr


def test_a_port_in_use_is_refused(tmp_path: Path) -> None:
    first = HostProcess(tmp_path / "first", http=True)
    try:
        first.wait_serving()
        taken = first.http_address.removeprefix("http://")
        result = run_ether(
            "--listen", "127.0.0.1:0", "--http-listen", taken, "--state-dir", str(tmp_path / "s")
        )
        assert result.returncode == 1
        assert f"http_listen {taken}: address in use" in result.stderr
    finally:
        first.stop()


def test_with_tls_the_listener_serves_https_with_the_hosts_certificate(tmp_path: Path) -> None:
    authority = Authority(tmp_path, "http")
    server = authority.issue("server", "ether host", server=True)
    tls = ("--tls-cert", str(server.cert), "--tls-key", str(server.key))
    host = HostProcess(tmp_path / "state", *tls, http=True)
    try:
        record = host.wait_for_log(lambda r: r.get("event") == "serving", 60)
        address = str(record["http"])
        assert address.startswith("https://127.0.0.1:")
        context = ssl.create_default_context(cafile=str(authority.pem))
        answer = httpx.get(f"{address}/healthz", verify=context, timeout=30)
        assert (answer.status_code, answer.json()) == (200, {"status": "SERVING"})
        with pytest.raises(httpx.HTTPError):  # plaintext is not served
            httpx.get(address.replace("https://", "http://") + "/healthz", timeout=30)
    finally:
        assert host.stop() == 0


def test_client_certificates_and_the_http_listener_are_refused_together(tmp_path: Path) -> None:
    authority = Authority(tmp_path, "http")
    server = authority.issue("server", "ether host", server=True)
    tokens = tmp_path / "tokens"
    tokens.write_text(f"admin {ADMIN}\nclient cert:client\n")
    result = run_ether(
        "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--auth-tokens-file", str(tokens),
        "--tls-cert", str(server.cert), "--tls-key", str(server.key),
        "--tls-client-ca", str(authority.pem), "--state-dir", str(tmp_path / "state"),
    )  # fmt: skip
    assert result.returncode == 1
    assert "the HTTP listener names callers by bearer token only" in result.stderr


def test_an_ether_error_a_route_raises_is_answered_as_the_json_error() -> None:
    """A surface's route may raise the core's errors (build_http_app's contract): the caller
    gets the status, reason and message as JSON -- not starlette's bare 500 -- and the request
    line logs the code."""

    async def missing(request: Request) -> None:
        raise NotFound("agent 'ghost' is not deployed", reason=Reason.AGENT_NOT_FOUND)

    app = build_http_app([Route("/a2a/ghost", missing)], tokens=None, lifecycle=Lifecycle())

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return await client.get("/a2a/ghost")

    with structlog.testing.capture_logs() as records:
        answer = anyio.run(call)
        flush_logs()  # the request line is rendered a moment later (logs.log_later)
    assert answer.status_code == 404, answer.text
    error = answer.json()["error"]
    assert error["code"] == "NOT_FOUND"
    assert error["reason"] == "AGENT_NOT_FOUND"
    assert "ghost" in error["message"]
    (line,) = [r for r in records if r["event"] == "rpc"]
    assert line["method"] == "GET /a2a/ghost" and line["code"] == "NOT_FOUND", line
