"""Claims of docs/gateway.md and docs/notifications.md no other test asserted: the host-wide
session limit, a closed session's retention, the host's own `max_context_bytes`,
`topic_retention` with `lagged`, the host's default `mailbox_size`, egress refusals of other
schemes and of credentials in the URL, and a reply topic's delivery refused by
`max_message_bytes`. One real host whose `[gateway]` table sets every limit small, real agents
(tests/agents/chatter, toolbox, worker) and real gRPC clients.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest

from ether.v1 import agent_io_pb2, common_pb2, gateway_pb2
from tests.notifications.support import BUDGET, deliveries
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input, data, details, execute, struct
from tests.support.host import HostProcess, sandbox_grants

from ._support import (
    Recorder,
    audit_of,
    close_session,
    fetch,
    gateway_host,
    open_session,
    subscribe,
)

RETENTION = 10  # seconds a closed session stays readable here: room for a loaded machine
DENIED = gateway_pb2.AUDIT_DECISION_DENIED


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    config = (
        sandbox_grants()
        + "[gateway]\nmax_sessions = 2\nmax_sessions_per_owner = 100\n"
        + f"retention = {RETENTION}\nmax_context_bytes = 4096\ntopic_retention = 3\n"
        + "mailbox_size = 2\nmax_message_bytes = 2048\n"
    )
    with gateway_host(tmp_path_factory.mktemp("gateway-more"), config) as host:
        yield host


def test_max_sessions_bounds_open_sessions_on_the_whole_host(small: HostProcess) -> None:
    """ "`max_sessions`, `max_sessions_per_owner` | 1000, 100 open sessions": the host-wide
    limit (2 here) holds even when the owner's own (100) is far away; a closed one frees a place."""
    opened = [open_session(small, agent="chatter").id for _ in range(2)]
    try:
        with pytest.raises(grpc.RpcError) as error:
            open_session(small, agent="chatter")
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        info = details(error.value)["ErrorInfo"]
        # Not the per-caller reason: this is the host's limit.
        assert info.reason == "TOO_MANY_SESSIONS", info
        assert (info.metadata["setting"], info.metadata["limit"]) == ("max_sessions", "2")
        close_session(small, opened.pop(0))
        opened.append(open_session(small, agent="chatter").id)
    finally:
        for session_id in opened:
            close_session(small, session_id)


def test_a_closed_session_stays_readable_for_the_retention_then_is_gone(
    small: HostProcess,
) -> None:
    """ "A closed session stays readable for 1 hour" (`retention`, 10 s here): right after
    CloseSession its record and context are there; once the retention passed, NOT_FOUND."""
    session = open_session(small, agent="chatter", context={"kept": "for a while"})
    close_session(small, session.id)
    get = gateway_pb2.GetSessionRequest(session_id=session.id)
    got = small.gateway.GetSession(get, timeout=10).session
    assert got.state == gateway_pb2.SESSION_STATE_CLOSED
    context = small.gateway.GetContext(
        gateway_pb2.GetContextRequest(session_id=session.id), timeout=10
    )
    assert context.context["kept"] == "for a while"
    # Ask until the host forgets it (the answer we wait on), within a budget far past the retention.
    deadline = time.monotonic() + BUDGET
    while True:
        try:
            small.gateway.GetSession(get, timeout=10)
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.NOT_FOUND, error
            break
        assert time.monotonic() < deadline, "the closed session was never forgotten"
        time.sleep(0.2)  # between questions only; the assertion is on the answer
    with pytest.raises(grpc.RpcError) as gone:
        small.gateway.GetContext(gateway_pb2.GetContextRequest(session_id=session.id), timeout=10)
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND


def test_the_hosts_max_context_bytes_bounds_the_context(small: HostProcess) -> None:
    """ "at most 1 MiB" is `max_context_bytes` (4096 here): a change past it is
    RESOURCE_EXHAUSTED `CONTEXT_TOO_LARGE` and changes nothing; one within it is accepted."""
    session = open_session(small, agent="chatter", context={"a": 1})
    try:
        request = gateway_pb2.UpdateContextRequest(
            session_id=session.id, set=struct({"blob": "x" * 5000})
        )
        with pytest.raises(grpc.RpcError) as error:
            small.gateway.UpdateContext(request, timeout=10)
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert details(error.value)["ErrorInfo"].reason == "CONTEXT_TOO_LARGE"
        read = gateway_pb2.GetContextRequest(session_id=session.id)
        assert small.gateway.GetContext(read, timeout=10).version == 1
        request.set.CopyFrom(struct({"blob": "x" * 3000}))
        assert small.gateway.UpdateContext(request, timeout=10).change.version == 2
    finally:
        close_session(small, session.id)


def test_a_topic_keeps_its_last_messages_and_a_late_subscriber_learns_what_it_missed(
    small: HostProcess,
) -> None:
    """ "The last 1000 messages of a topic are kept; `after_sequence` replays them. A subscriber
    that falls further behind is told how many it missed (`lagged`)." With topic_retention 3
    and five messages, a subscriber from 0 is told 2 were dropped, then gets 3, 4 and 5."""
    topic = "more.retained"
    request = gateway_pb2.PublishRequest(topic=topic, type="tick")
    sequences = [small.gateway.Publish(request, timeout=10).message.sequence for _ in range(5)]
    assert sequences == [1, 2, 3, 4, 5]
    late = subscribe(small, topic=topic, after=0)
    first = next(late)
    replayed = [next(late).message.sequence for _ in range(3)]
    late.cancel()
    assert first.WhichOneof("event") == "lagged", first
    assert (first.lagged.dropped, first.lagged.first_dropped_sequence) == (2, 1)
    assert replayed == [3, 4, 5]


def test_the_hosts_mailbox_size_bounds_an_agent_that_sets_none(small: HostProcess) -> None:
    """ "at most 100 waiting, `mailbox_size` in the agent's deployment config" and the host's
    `[gateway] mailbox_size` (2 here) for an agent that sets none: the third is
    `MAILBOX_FULL` with RetryInfo, and the two waiting are received."""
    agent = deploy(small, AGENTS / "toolbox", name="plain-box")  # no config of its own
    sent = [
        small.gateway.SendMessage(
            gateway_pb2.SendMessageRequest(agent=agent, type="job"), timeout=10
        ).message.id
        for _ in range(2)
    ]
    with pytest.raises(grpc.RpcError) as full:
        small.gateway.SendMessage(
            gateway_pb2.SendMessageRequest(agent=agent, type="job"), timeout=10
        )
    assert full.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    found = details(full.value)
    assert found["ErrorInfo"].reason == "MAILBOX_FULL" and "RetryInfo" in found
    assert found["ErrorInfo"].metadata["limit"] == "2"
    assert [m["id"] for m in data(execute(small, agent, "receive"))] == sent


def test_egress_refuses_other_schemes_and_credentials_in_the_url(
    small: HostProcess, web: Recorder
) -> None:
    """Audit reasons `scheme_not_allowed` and `invalid_url`, and the audit's "URL (without
    credentials)": an ftp URL and a URL carrying a password are refused without connecting,
    each one DENIED record, and the password appears in no record."""
    policy = {"allow_hosts": ["127.0.0.1"], "allow_addresses": ["127.0.0.1/32"], "burst": 100}
    agent = deploy(small, AGENTS / "toolbox", name="schemes", config=struct({"egress": policy}))
    web.paths.clear()
    other = fetch(small, agent, f"ftp://127.0.0.1:{web.port}/file")
    secret = fetch(small, agent, f"http://ada:hunter2-pw@127.0.0.1:{web.port}/private")
    for output, reason in ((other, "scheme_not_allowed"), (secret, "invalid_url")):
        assert output.status == agent_io_pb2.TASK_STATUS_ERROR, data(output)
        assert output.error.code == reason, output.error.message
    assert web.paths == []  # nothing connected
    records = audit_of(small, agent)
    assert [(r.decision, r.reason) for r in records] == [
        (DENIED, "scheme_not_allowed"),
        (DENIED, "invalid_url"),
    ]
    assert records[1].host == "127.0.0.1" and "/private" in records[1].url
    assert all("hunter2-pw" not in str(r) for r in records), records[1].url


def test_a_reply_topic_message_over_max_message_bytes_ends_the_delivery_failed(
    small: HostProcess,
) -> None:
    """docs/notifications.md: "A publish the gateway refuses (a message over its
    `max_message_bytes`) ends the delivery `failed`" (after that one attempt: only an
    UNAVAILABLE one is retried). The topic's subscriber never gets it."""
    deploy(small, AGENTS / "worker")
    topic = "more.too-big"
    watch = subscribe(small, topic=topic, after=0)  # a new topic: it sees everything published
    request = agent_io_pb2.ExecuteRequest(
        input=agent_input("worker", "echo", {"blob": "x" * 3000}),  # over 2048 as a message
        notify=common_pb2.Notify(reply_topic=topic),
    )
    output = small.agents.Execute(request, timeout=30).output
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error
    small.wait_for_log(
        lambda r: (
            r.get("event") == "notification attempt"
            and r.get("subject") == output.task_id
            and r.get("state") != "pending"
        ),
        BUDGET,
    )
    (record,) = deliveries(small, output.task_id)
    assert (record["state"], record["attempts"], record["outcomes"]) == ("failed", 1, ["failed"])
    assert "2048" in record["last_error"], record["last_error"]
    # A marker published now is the topic's first message: the delivery never got there.
    marker = gateway_pb2.PublishRequest(topic=topic, type="marker")
    assert small.gateway.Publish(marker, timeout=10).message.sequence == 1
    seen = next(watch).message
    watch.cancel()
    assert (seen.type, seen.sequence) == ("marker", 1)
