"""Egress: agents fetch through `net.fetch` only, under a per-agent policy, with an audit trail.

Every test talks to HTTP servers on loopback; "public" or private addresses appear only as
fixed name resolutions in a policy, and the point of each such test is that nothing connects.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import grpc
import pytest

from ether.v1 import agent_io_pb2, gateway_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import data, details, execute, struct
from tests.support.host import HostProcess

from ._support import Recorder

TOOLBOX = AGENTS / "toolbox"
LOOPBACK_ONLY = {"allow_hosts": ["127.0.0.1"], "allow_addresses": ["127.0.0.1/32"], "burst": 100}
ALLOWED, DENIED = gateway_pb2.AUDIT_DECISION_ALLOWED, gateway_pb2.AUDIT_DECISION_DENIED


@pytest.fixture(autouse=True)
def _fresh_paths(web: Recorder) -> None:
    web.paths.clear()


def fetcher(host: HostProcess, name: str, **policy: Any) -> str:
    config = struct({"egress": policy}) if policy else None
    return deploy(host, TOOLBOX, name=name, config=config)


def fetch(host: HostProcess, agent: str, url: str, **params: Any) -> agent_io_pb2.AgentOutput:
    return execute(host, agent, "get", {"url": url, **params})


def audit(ether: HostProcess, **filters: Any) -> list[gateway_pb2.AuditRecord]:
    return list(
        ether.gateway.ListAudit(gateway_pb2.ListAuditRequest(**filters), timeout=10).records
    )


def refused(output: agent_io_pb2.AgentOutput, code: str) -> None:
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR, data(output)
    assert output.error.code == code, output.error.message


def test_deny_by_default(host: HostProcess, web: Recorder) -> None:
    """An agent without a policy reaches nothing, and the refusal is recorded."""
    agent = fetcher(host, "fetch-none")
    refused(fetch(host, agent, web.url("/hello")), "host_not_allowed")
    assert web.paths == []
    [record] = audit(host, agent=agent)
    assert (record.decision, record.reason, record.host, record.port) == (
        DENIED,
        "host_not_allowed",
        "127.0.0.1",
        web.port,
    )
    assert "deny by default" in record.rule and record.resolved_address == ""


def test_allowed_fetch_is_sent_and_audited(host: HostProcess, web: Recorder) -> None:
    agent = fetcher(host, "fetch-open", **LOOPBACK_ONLY)
    output = fetch(host, agent, web.url("/hello?x=1"))
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    result = data(output)
    assert (result["status"], result["text"]) == (200, "hello from /hello?x=1")
    assert web.paths == [("GET", "/hello?x=1")]
    [record] = audit(host, agent=agent)
    assert record.id == result["audit_ids"][0]
    assert (record.decision, record.reason, record.method, record.status_code) == (
        ALLOWED,
        "allowed",
        "GET",
        200,
    )
    assert record.resolved_address == "127.0.0.1" and record.response_bytes == len(result["text"])
    assert record.url == web.url("/hello?x=1") and record.task_id == output.task_id
    assert record.duration.ToNanoseconds() > 0


def test_method_not_allowed(host: HostProcess, web: Recorder) -> None:
    agent = fetcher(host, "fetch-getonly", **LOOPBACK_ONLY)
    refused(
        fetch(host, agent, web.url("/submit"), method="POST", body="data"), "method_not_allowed"
    )
    assert web.paths == []
    assert [(r.method, r.reason) for r in audit(host, agent=agent)] == [
        ("POST", "method_not_allowed")
    ]


def test_post_when_allowed(host: HostProcess, web: Recorder) -> None:
    agent = fetcher(host, "fetch-post", **LOOPBACK_ONLY, allow_methods=["GET", "POST"])
    output = fetch(host, agent, web.url("/submit"), method="POST", body="payload")
    assert data(output)["text"] == "hello from /submit got payload"
    [record] = audit(host, agent=agent)
    assert (record.method, record.request_bytes) == ("POST", len("payload"))


@pytest.mark.parametrize(
    ("host_name", "address"),
    [
        ("127.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("[::ffff:127.0.0.1]", "::ffff:127.0.0.1"),
        ("[::1]", "::1"),
        ("localhost", "127.0.0.1"),
    ],
)
def test_loopback_in_every_spelling_is_refused(
    host: HostProcess, web: Recorder, host_name: str, address: str
) -> None:
    """The host is on the allow list, but the address it resolves to is loopback: refused, on the
    address actually resolved, without connecting."""
    agent = "fetch-spell-" + "".join(c if c.isalnum() else "-" for c in host_name.lower()).strip(
        "-"
    )
    fetcher(host, agent, allow_hosts=[host_name], burst=100)
    refused(fetch(host, agent, f"http://{host_name}:{web.port}/secret"), "loopback_address")
    assert web.paths == []
    [record] = audit(host, agent=agent)
    assert (record.decision, record.reason) == (DENIED, "loopback_address")
    if host_name != "localhost":  # localhost may resolve to ::1 first
        assert ipaddress.ip_address(record.resolved_address) == ipaddress.ip_address(address)


@pytest.mark.parametrize(
    ("addresses", "reason"),
    [
        (["10.1.2.3"], "private_address"),
        (["192.168.0.10"], "private_address"),
        (["100.64.0.1"], "private_address"),
        (["fd12:3456::1"], "private_address"),
        (["169.254.1.1"], "link_local_address"),
        (["169.254.169.254"], "metadata_address"),
        (["fd00:ec2::254"], "metadata_address"),
        (["::ffff:169.254.169.254"], "metadata_address"),
        # Rebinding: a name whose answers mix an allowed address with a refused one is refused.
        (["127.0.0.1", "169.254.169.254"], "metadata_address"),
    ],
)
def test_refused_address_classes(
    host: HostProcess, web: Recorder, addresses: list[str], reason: str
) -> None:
    agent = (
        "fetch-class-"
        + "-".join("".join(c if c.isalnum() else "-" for c in a) for a in addresses)[:48]
    )
    fetcher(
        host,
        agent,
        allow_hosts=["service.test"],
        allow_addresses=["127.0.0.1/32"],
        resolve={"service.test": addresses},
        burst=100,
    )
    refused(fetch(host, agent, f"http://service.test:{web.port}/x"), reason)
    assert web.paths == []
    [record] = audit(host, agent=agent)
    assert record.reason == reason
    assert ipaddress.ip_address(record.resolved_address) in [
        ipaddress.ip_address(a) for a in addresses
    ]


def test_redirect_is_checked_again(host: HostProcess, web: Recorder) -> None:
    """A redirect to a name that resolves to a refused address is refused at that hop; both hops
    are in the audit log."""
    agent = fetcher(
        host,
        "fetch-redirect",
        allow_hosts=["127.0.0.1", "inside.test"],
        allow_addresses=["127.0.0.1/32"],
        resolve={"inside.test": ["127.0.0.2"]},
        burst=100,
    )
    web.redirect_to = f"http://inside.test:{web.port}/secret"
    refused(fetch(host, agent, web.url("/redirect")), "loopback_address")
    assert web.paths == [("GET", "/redirect")]
    records = audit(host, agent=agent)[::-1]
    assert [(r.decision, r.reason, r.redirect_depth, r.status_code) for r in records] == [
        (ALLOWED, "allowed", 0, 302),
        (DENIED, "loopback_address", 1, 0),
    ]
    assert records[1].url == web.redirect_to and records[1].resolved_address == "127.0.0.2"


def test_allowed_redirect_is_followed(host: HostProcess, web: Recorder) -> None:
    agent = fetcher(host, "fetch-follow", **LOOPBACK_ONLY)
    result = data(fetch(host, agent, web.url("/hop")))
    assert (result["status"], result["text"], result["redirects"]) == (200, "hello from /hello", 1)
    assert [r.redirect_depth for r in audit(host, agent=agent)] == [1, 0]


def test_rate_limit(host: HostProcess, web: Recorder) -> None:
    agent = fetcher(host, "fetch-limited", **{**LOOPBACK_ONLY, "burst": 2, "rate": 0.001})
    assert [fetch(host, agent, web.url("/r")).status for _ in range(2)] == [
        agent_io_pb2.TASK_STATUS_SUCCESS
    ] * 2
    third = fetch(host, agent, web.url("/r"))
    refused(third, "rate_limited")
    assert "retry_after_ms=" in third.error.message
    assert len(web.paths) == 2
    assert [r.reason for r in audit(host, agent=agent)] == ["rate_limited", "allowed", "allowed"]


def test_response_size_cap(host: HostProcess, web: Recorder) -> None:
    agent = fetcher(host, "fetch-small", **LOOPBACK_ONLY, max_response_bytes=1000)
    refused(fetch(host, agent, web.url("/big")), "response_too_large")
    [record] = audit(host, agent=agent)
    assert (record.decision, record.reason, record.status_code) == (
        DENIED,
        "response_too_large",
        200,
    )
    assert record.response_bytes > 1000


def test_time_cap(host: HostProcess, web: Recorder) -> None:
    agent = fetcher(host, "fetch-quick", **LOOPBACK_ONLY, timeout=1)
    refused(fetch(host, agent, web.url("/slow")), "timeout")
    [record] = audit(host, agent=agent)
    assert (record.decision, record.reason, record.resolved_address) == (
        DENIED,
        "timeout",
        "127.0.0.1",
    )


@pytest.mark.parametrize("broken", [{"rate": -1}, {"max_redirects": -1}, {"max_redirects": 2.5}])
def test_a_broken_policy_denies_and_is_audited(
    host: HostProcess, web: Recorder, broken: dict[str, float]
) -> None:
    """A policy that cannot be read fails closed: denied, with the reason recorded."""
    name = "fetch-broken-" + "-".join(f"{k}{v}".replace(".", "_") for k, v in broken.items())
    agent = fetcher(host, name.replace("_", "-"), allow_hosts="127.0.0.1", **broken)
    refused(fetch(host, agent, web.url("/hello")), "policy_error")
    assert web.paths == []
    assert [(r.decision, r.reason) for r in audit(host, agent=agent)] == [(DENIED, "policy_error")]


def test_oversized_request_headers_are_refused(host: HostProcess, web: Recorder) -> None:
    agent = fetcher(host, "fetch-headers", **LOOPBACK_ONLY)
    output = fetch(host, agent, web.url("/hello"), headers={"x-big": "y" * 9000})
    refused(output, "headers_too_large")
    assert web.paths == []


def test_list_audit_filters_and_pages(host: HostProcess, web: Recorder) -> None:
    agent = fetcher(host, "fetch-paged", **LOOPBACK_ONLY)
    for index in range(3):
        fetch(host, agent, web.url(f"/page{index}"))
    fetch(host, agent, "http://elsewhere.test/")
    allowed = audit(host, agent=agent, decision=ALLOWED)
    assert [r.url for r in allowed] == [web.url(f"/page{i}") for i in (2, 1, 0)]  # newest first
    assert [r.host for r in audit(host, agent=agent, host="elsewhere.test")] == ["elsewhere.test"]
    first = host.gateway.ListAudit(
        gateway_pb2.ListAuditRequest(agent=agent, page_size=3), timeout=10
    )
    second = host.gateway.ListAudit(
        gateway_pb2.ListAuditRequest(agent=agent, page_size=3, page_token=first.next_page_token),
        timeout=10,
    )
    assert len(first.records) == 3 and len(second.records) == 1 and second.next_page_token == ""
    assert first.records[-1].id > second.records[0].id
    with pytest.raises(grpc.RpcError) as foreign:
        host.gateway.ListAudit(
            gateway_pb2.ListAuditRequest(agent="other", page_token=first.next_page_token),
            timeout=10,
        )
    assert foreign.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    request = gateway_pb2.ListAuditRequest()
    request.start_time.FromSeconds(2_000_000_000)
    request.end_time.FromSeconds(1_000_000_000)
    with pytest.raises(grpc.RpcError) as backwards:
        host.gateway.ListAudit(request, timeout=10)
    assert backwards.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details(backwards.value)["ErrorInfo"].reason == "INVALID_TIME_RANGE"


def test_watch_audit_streams_new_records_and_replays(host: HostProcess, web: Recorder) -> None:
    agent = fetcher(host, "fetch-watched", **LOOPBACK_ONLY)
    fetch(host, agent, web.url("/watched"))
    fetch(host, agent, "http://denied.test/")
    watch = host.gateway.WatchAudit(
        gateway_pb2.WatchAuditRequest(agent=agent, after_id=0), timeout=60
    )
    stored = [next(watch).record, next(watch).record]
    assert [(r.decision, r.host) for r in stored] == [
        (ALLOWED, "127.0.0.1"),
        (DENIED, "denied.test"),
    ]
    fetch(host, agent, web.url("/later"))  # written while the stream follows
    live = next(watch).record
    watch.cancel()
    assert (live.url, live.id > stored[1].id) == (web.url("/later"), True)
    denied_only = host.gateway.WatchAudit(
        gateway_pb2.WatchAuditRequest(agent=agent, after_id=0, decision=DENIED), timeout=60
    )
    first_denied = next(denied_only).record
    denied_only.cancel()
    assert first_denied.id == stored[1].id


def test_audit_log_is_under_the_state_dir(host: HostProcess) -> None:
    assert (host.state_dir / "gateway" / "audit.sqlite3").is_file()
