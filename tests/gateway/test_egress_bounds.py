"""Egress bounds: a request body over `max_request_bytes` and a fetch past `max_redirects`.

docs/gateway.md ("Egress") and docs/limits.md ("Gateway"): the request body is capped at
1 MiB and at most 5 redirects are followed unless the policy says otherwise; past either, the
fetch is denied (`request_too_large`, `too_many_redirects`) and the denial is audited. A real
host, the toolbox agent fetching through `net.fetch`, and HTTP servers on loopback that record
every request that reaches them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ether.v1 import agent_io_pb2, gateway_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import data, struct
from tests.support.host import HostProcess

from ._support import Recorder, audit_of, fetch

TOOLBOX = AGENTS / "toolbox"
ALLOWED, DENIED = gateway_pb2.AUDIT_DECISION_ALLOWED, gateway_pb2.AUDIT_DECISION_DENIED
OPEN = {
    "allow_hosts": ["127.0.0.1"],
    "allow_addresses": ["127.0.0.1/32"],
    "allow_methods": ["GET", "POST"],
    "burst": 100,
}
MiB = 1024 * 1024
DEFAULT_MAX_REDIRECTS = 5


class Chain(ThreadingHTTPServer):
    """A loopback HTTP server whose ``/chain/<n>`` redirects (302) to ``/chain/<n - 1>`` and
    whose ``/chain/0`` answers 200: ``/chain/<n>`` is a chain of exactly n redirects.
    ``paths`` lists every request that reached it."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _ChainHandler)
        self.paths: list[str] = []
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    def url(self, hops: int) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/chain/{hops}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _ChainHandler(BaseHTTPRequestHandler):
    server: Chain

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.paths.append(self.path)
        hops = int(self.path.removeprefix("/chain/"))
        if hops > 0:
            self.send_response(302)
            self.send_header("Location", self.server.url(hops - 1))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        payload = b"end of the chain"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture(scope="module")
def chain() -> Iterator[Chain]:
    server = Chain()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _fresh(web: Recorder, chain: Chain) -> None:
    web.paths.clear()
    web.requests.clear()
    chain.paths.clear()


def fetcher(host: HostProcess, name: str, **policy: Any) -> str:
    return deploy(host, TOOLBOX, name=name, config=struct({"egress": {**OPEN, **policy}}))


def refused(output: agent_io_pb2.AgentOutput, code: str) -> None:
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR, data(output)
    assert output.error.code == code, output.error.message


def test_a_body_over_the_policy_cap_is_never_sent(host: HostProcess, web: Recorder) -> None:
    """A POST whose body is one byte over the policy's max_request_bytes is refused with
    request_too_large before anything is sent, and the audit log says why; a body exactly at
    the cap goes through whole."""
    agent = fetcher(host, "bounds-body-small", max_request_bytes=100)
    over = fetch(host, agent, web.url("/over"), method="POST", body="x" * 101)
    refused(over, "request_too_large")
    at_cap = fetch(host, agent, web.url("/at-cap"), method="POST", body="y" * 100)
    assert at_cap.status == agent_io_pb2.TASK_STATUS_SUCCESS, at_cap.error
    # Only the second request reached the server, with all of its body.
    assert [(method, path, body) for method, path, _, body in web.requests] == [
        ("POST", "/at-cap", b"y" * 100)
    ]
    denial, sent = audit_of(host, agent)
    assert (denial.decision, denial.reason, denial.method, denial.url) == (
        DENIED,
        "request_too_large",
        "POST",
        web.url("/over"),
    )
    assert "max_request_bytes" in denial.rule
    assert (denial.request_bytes, denial.redirect_depth, denial.task_id) == (101, 0, over.task_id)
    assert (denial.resolved_address, denial.status_code, denial.response_bytes) == ("", 0, 0)
    assert (sent.decision, sent.reason, sent.request_bytes, sent.status_code) == (
        ALLOWED,
        "allowed",
        100,
        200,
    )


def test_a_body_over_the_default_cap_of_one_mib_is_never_sent(
    host: HostProcess, web: Recorder
) -> None:
    """With no max_request_bytes in any policy table, a body of 1 MiB + 1 byte is refused
    with request_too_large and audited; the server is never reached."""
    agent = fetcher(host, "bounds-body-default")
    refused(
        fetch(host, agent, web.url("/huge"), method="POST", body="z" * (MiB + 1)),
        "request_too_large",
    )
    assert web.paths == []
    [record] = audit_of(host, agent)
    assert (record.decision, record.reason, record.method, record.request_bytes) == (
        DENIED,
        "request_too_large",
        "POST",
        MiB + 1,
    )


LIMITS = [
    pytest.param({}, DEFAULT_MAX_REDIRECTS, id="default"),
    pytest.param({"max_redirects": 2}, 2, id="configured-2"),
]


@pytest.mark.parametrize(("policy", "limit"), LIMITS)
def test_one_redirect_past_the_limit_is_refused(
    host: HostProcess, chain: Chain, policy: dict[str, Any], limit: int
) -> None:
    """A chain one redirect longer than max_redirects fails with too_many_redirects: every hop
    up to the limit is made and audited, and the redirect past it is audited as the denial and
    never requested."""
    agent = fetcher(host, f"bounds-redirects-over-{limit}", **policy)
    output = fetch(host, agent, chain.url(limit + 1))
    refused(output, "too_many_redirects")
    assert chain.paths == [f"/chain/{n}" for n in range(limit + 1, 0, -1)]
    records = audit_of(host, agent)
    assert [(r.decision, r.reason, r.redirect_depth, r.status_code) for r in records] == [
        *[(ALLOWED, "allowed", depth, 302) for depth in range(limit + 1)],
        (DENIED, "too_many_redirects", limit + 1, 0),
    ]
    denial = records[-1]
    assert (denial.url, denial.method, denial.task_id) == (chain.url(0), "GET", output.task_id)
    assert "max_redirects" in denial.rule


@pytest.mark.parametrize(("policy", "limit"), LIMITS)
def test_a_chain_of_exactly_the_limit_is_followed(
    host: HostProcess, chain: Chain, policy: dict[str, Any], limit: int
) -> None:
    """A chain of exactly max_redirects redirects is followed to its end: the agent gets the
    final answer, and every hop is audited as allowed with its depth."""
    agent = fetcher(host, f"bounds-redirects-at-{limit}", **policy)
    output = fetch(host, agent, chain.url(limit))
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    result = data(output)
    assert (result["status"], result["text"], result["redirects"], result["url"]) == (
        200,
        "end of the chain",
        limit,
        chain.url(0),
    )
    assert chain.paths == [f"/chain/{n}" for n in range(limit, -1, -1)]
    records = audit_of(host, agent)
    assert [(r.decision, r.redirect_depth, r.status_code) for r in records] == [
        *[(ALLOWED, depth, 302) for depth in range(limit)],
        (ALLOWED, limit, 200),
    ]
    assert [r.id for r in records] == result["audit_ids"]
