"""Redirects of `net.fetch` take httpx's semantics and the host's policy at every hop.

Two real HTTP servers on loopback, on two ports, are two origins: method rewriting (303, and
301/302 after a POST, become GET), headers dropped for another origin, the policy checked and
audited again at each hop, and a Location that is not a URL.
"""

from __future__ import annotations

from collections.abc import Iterator
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
    "allow_methods": ["GET", "POST", "HEAD"],
    "burst": 100,
}
SECRETS = {"Authorization": "Bearer s3cret", "Cookie": "session=abc", "X-Trace": "t-1"}


@pytest.fixture(scope="module")
def first() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def second() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _fresh(first: Recorder, second: Recorder) -> None:
    for server in (first, second):
        server.paths.clear()
        server.requests.clear()


def fetcher(host: HostProcess, name: str, **policy: Any) -> str:
    return deploy(host, TOOLBOX, name=name, config=struct({"egress": {**OPEN, **policy}}))


@pytest.mark.parametrize(
    ("status", "method", "then"),
    [
        (303, "POST", "GET"),
        (303, "GET", "GET"),
        (302, "POST", "GET"),
        (301, "POST", "GET"),
        (307, "POST", "POST"),
        (308, "POST", "POST"),
        (301, "GET", "GET"),
    ],
)
def test_redirect_method_rewriting(
    host: HostProcess, first: Recorder, second: Recorder, status: int, method: str, then: str
) -> None:
    """303, and 301/302 after a POST, go on as a GET without the body, as browsers do; 307
    and 308 repeat the method and the body. Each hop is audited with the method it used."""
    agent = fetcher(host, f"redirect-{status}-{method.lower()}")
    first.redirect_to = second.url("/landing")
    payload = b"payload" if method == "POST" else b""
    output = fetch(
        host, agent, first.url(f"/redirect/{status}"), method=method, body=payload.decode()
    )
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    result = data(output)
    assert (result["status"], result["redirects"], result["url"]) == (
        200,
        1,
        second.url("/landing"),
    )
    [(_, _, _, sent)] = first.requests
    assert sent == payload
    [(used, path, headers, body)] = second.requests
    assert (used, path) == (then, "/landing")
    resent = payload if then == method else b""
    assert body == resent
    assert headers.get("content-length") == (str(len(resent)) if resent else None)
    records = audit_of(host, agent)
    assert [(r.method, r.redirect_depth, r.status_code, r.decision) for r in records] == [
        (method, 0, status, ALLOWED),
        (then, 1, 200, ALLOWED),
    ]
    assert [r.request_bytes for r in records] == [len(payload), len(resent)]


def test_credentials_stay_with_their_origin(
    host: HostProcess, first: Recorder, second: Recorder
) -> None:
    """Authorization and Cookie go to the origin the agent named, not to another one a
    redirect points at; other headers follow."""
    agent = fetcher(host, "redirect-away")
    first.redirect_to = second.url("/elsewhere")
    result = data(fetch(host, agent, first.url("/redirect"), headers=SECRETS))
    assert result["status"] == 200
    [(_, _, asked, _)] = first.requests
    assert (asked["authorization"], asked["cookie"], asked["x-trace"]) == (
        "Bearer s3cret",
        "session=abc",
        "t-1",
    )
    [(_, _, followed, _)] = second.requests
    assert "authorization" not in followed and "cookie" not in followed
    assert followed["x-trace"] == "t-1"
    assert followed["host"] == f"127.0.0.1:{second.port}"


def test_authorization_follows_within_the_origin(host: HostProcess, first: Recorder) -> None:
    """A redirect to the same origin keeps Authorization (httpx leaves Cookie to the fetch's
    own cookie jar, so the agent's Cookie header goes to the first hop only)."""
    agent = fetcher(host, "redirect-same")
    first.redirect_to = first.url("/hello")
    assert data(fetch(host, agent, first.url("/redirect"), headers=SECRETS))["status"] == 200
    [(_, _, _, _), (_, path, followed, _)] = first.requests
    assert path == "/hello"
    assert (followed["authorization"], followed["x-trace"]) == ("Bearer s3cret", "t-1")
    assert "cookie" not in followed


# (reason, the agent's policy given the first server, the redirect's host, method, status)
REFUSED_HOPS: list[tuple[str, Any, str, str, int]] = [
    ("host_not_allowed", lambda first: {}, "localhost", "GET", 302),
    # a POST sent on as a GET by the 303, and GET is not allowed
    ("method_not_allowed", lambda first: {"allow_methods": ["POST"]}, "127.0.0.1", "POST", 303),
    ("port_not_allowed", lambda first: {"allow_ports": [first.port]}, "127.0.0.1", "GET", 302),
    # the first server is exempt by its /32; the second's name is pinned to a loopback address
    # that is not
    (
        "loopback_address",
        lambda first: {
            "allow_hosts": ["127.0.0.1", "other.test"],
            "resolve": {"other.test": ["127.0.0.3"]},
        },
        "other.test",
        "GET",
        302,
    ),
]


@pytest.mark.parametrize(
    ("reason", "policy", "target", "method", "status"),
    REFUSED_HOPS,
    ids=[row[0] for row in REFUSED_HOPS],
)
def test_policy_is_checked_at_each_hop(
    host: HostProcess,
    first: Recorder,
    second: Recorder,
    reason: str,
    policy: Any,
    target: str,
    method: str,
    status: int,
) -> None:
    """A redirect the policy refuses ends the fetch at that hop: the second server is never
    reached, and both hops are in the audit log."""
    agent = fetcher(host, f"redirect-deny-{reason.split('_')[0]}", **policy(first))
    first.redirect_to = f"http://{target}:{second.port}/landing"
    output = fetch(host, agent, first.url(f"/redirect/{status}"), method=method, body="x")
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR, data(output)
    assert output.error.code == reason, output.error.message
    assert len(first.requests) == 1 and second.requests == []
    records = audit_of(host, agent)
    assert [(r.decision, r.reason, r.redirect_depth) for r in records] == [
        (ALLOWED, "allowed", 0),
        (DENIED, reason, 1),
    ]
    assert records[1].url == first.redirect_to and records[1].port == second.port


def test_a_location_that_is_not_a_url(host: HostProcess, first: Recorder) -> None:
    """A redirect whose Location is not a URL fails the fetch with invalid_redirect; the hop
    that answered it is audited with the error."""
    agent = fetcher(host, "redirect-malformed")
    first.redirect_to = "http://[::1/broken"
    output = fetch(host, agent, first.url("/redirect"))
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR, data(output)
    assert output.error.code == "invalid_redirect", output.error.message
    assert "http://[::1/broken" in output.error.message
    [record] = audit_of(host, agent)
    assert (record.decision, record.status_code, record.redirect_depth) == (ALLOWED, 302, 0)
    assert "location" in record.error.lower()
