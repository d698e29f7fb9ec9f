"""Claims of docs/notifications.md and docs/gateway.md no other test asserted, checked on real
hosts (`ether serve`), real agents (tests/agents/chatter, worker) and a real webhook receiver
on loopback (tests/notifications/support.py):

- notifications.md, "Webhooks": a 408 and a 425 are tried again like a 429; "a failure to
  connect" is tried again, `max_attempts` times in all, then the delivery ends `failed`.
- notifications.md, "Webhooks" / "Egress": "a refusal that may pass (`rate_limited`, ...) is
  retried as a 5xx is": the `@notify` rate limit delays a delivery, it does not deny it.
- notifications.md, "What is delivered": a task that ends with an RPC error (a deadline, an
  agent not found) is delivered as `status` `ERROR` with `error` `{code, reason, message}`
  under the task's id (an agent not found too: the task has its id before it is looked up);
  `delivery_id` is "one per output and place": a webhook and a reply topic get one each.
- notifications.md, "Sessions" / "What is delivered": a turn without a reply is delivered with
  `reply` null and its `errors` and `steps_run`; a CloseSession without a reason is delivered
  as `closed by the client`, on a topic as a `session_closed` message from `@notify`; a turn
  cut short by the session closing, or ended `host_restarted` by the next host, is not
  delivered.
- gateway.md, "Audit": ListAudit's time range filter.
- gateway.md, "Host configuration" / "End": a session's `idle_timeout` defaults to the host's
  `[gateway] idle_timeout` and is capped by `max_idle_timeout`, and the cap is what closes it.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2, json_format

from ether.v1 import agent_io_pb2, common_pb2, gateway_pb2
from tests.notifications.support import (
    BUDGET,
    SECRET,
    Receiver,
    deliveries,
    final_record,
    notify_config,
)
from tests.support.agents import AGENTS, deploy, watch_until
from tests.support.calls import agent_input
from tests.support.host import HostProcess, sandbox_grants

from ._support import Conversation, close_session, kinds, of, open_session, subscribe

MAX_ATTEMPTS = 3  # the notifying host's [notifications] max_attempts
DELIVERY_ID = re.compile(r"n-[0-9a-f]{16}")


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """A host whose notifier may POST to loopback (backoff 0.05 s, 3 attempts)."""
    folder = tmp_path_factory.mktemp("session-claims")
    config = notify_config(folder, SECRET, max_attempts=MAX_ATTEMPTS)
    process = HostProcess(folder / "state", env={"ETHER_CONFIG": str(config)})
    try:
        process.wait_serving()
        deploy(process, AGENTS / "worker")
        deploy(process, AGENTS / "chatter")
        yield process
    finally:
        process.stop()


def _execute(
    host: HostProcess, agent: str, action: str, params: dict[str, Any], **notify: str
) -> agent_io_pb2.AgentOutput:
    request = agent_io_pb2.ExecuteRequest(
        input=agent_input(agent, action, params), notify=common_pb2.Notify(**notify)
    )
    return host.agents.Execute(request, timeout=30).output


def _audit(host: HostProcess, task_id: str) -> list[gateway_pb2.AuditRecord]:
    """The `@notify` audit records of ``task_id``'s deliveries, oldest first."""
    request = gateway_pb2.ListAuditRequest(agent="@notify", page_size=1000)
    records = host.gateway.ListAudit(request, timeout=10).records
    return [r for r in records if r.task_id == task_id][::-1]


def _settled(host: HostProcess, subject: str, count: int) -> list[dict[str, Any]]:
    """The delivery records of ``subject`` once ``count`` of them left `pending` (logged)."""
    ended: set[str] = set()

    def settled(record: dict[str, Any]) -> bool:
        if (
            record.get("event") == "notification attempt"
            and record.get("subject") == subject
            and record.get("state") != "pending"
        ):
            ended.add(str(record.get("delivery")))
        return len(ended) >= count

    host.wait_for_log(settled, BUDGET)
    return deliveries(host, subject)


# -- webhooks: what is tried again -------------------------------------------------------------


@pytest.mark.parametrize("status", [408, 425])
def test_a_408_or_a_425_is_tried_again(host: HostProcess, receiver: Receiver, status: int) -> None:
    """ "A 5xx, 408, 425 or 429 ... is tried again": a receiver answering 408 (or 425) once
    gets the same delivery a second time, and its 200 then ends it `delivered`."""
    path = f"/again-{status}"
    receiver.plan[path] = [status]
    output = _execute(host, "worker", "echo", {"for": path}, webhook_url=receiver.url(path))
    record = final_record(host, output.task_id)
    assert (record["state"], record["attempts"]) == ("delivered", 2), record
    assert record["outcomes"] == ["http_error", "delivered"]
    first, second = receiver.wait(path, 2)
    assert [first.headers["x-ether-attempt"], second.headers["x-ether-attempt"]] == ["1", "2"]
    assert first.headers["x-ether-delivery"] == second.headers["x-ether-delivery"]


def test_a_receiver_that_cannot_be_reached_gets_max_attempts_then_fails(
    host: HostProcess,
) -> None:
    """ "a failure to connect ... is tried again ... up to `max_attempts` in all": a webhook on
    a port nobody listens on is attempted 3 times (each one audited ALLOWED with its transport
    error), then the delivery ends `failed`, not `denied`."""
    closed = socket.socket()  # bound, never listening: every connection is refused
    closed.bind(("127.0.0.1", 0))
    try:
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/nobody"
        output = _execute(host, "worker", "echo", {"to": "nobody"}, webhook_url=url)
        record = final_record(host, output.task_id)
    finally:
        closed.close()
    assert (record["state"], record["attempts"]) == ("failed", MAX_ATTEMPTS), record
    assert record["outcomes"] == ["fetch_failed"] * MAX_ATTEMPTS
    audit = _audit(host, output.task_id)
    assert [(a.decision, a.url) for a in audit] == [
        (gateway_pb2.AUDIT_DECISION_ALLOWED, url)
    ] * MAX_ATTEMPTS
    assert all(a.error and a.status_code == 0 for a in audit), audit


# -- what is delivered ---------------------------------------------------------------------------


def test_a_task_past_its_deadline_delivers_the_error(host: HostProcess, receiver: Receiver) -> None:
    """ "for a task that ended with an RPC error (a deadline, ...), `status` `ERROR` and `error`
    `{code, reason, message}` with the gRPC code": a task still running when its RPC's deadline
    passes reaches the webhook as DEADLINE_EXCEEDED, under its task id."""
    late = agent_io_pb2.ExecuteRequest(
        input=agent_input("worker", "nap", {"ms": 60_000}),
        notify=common_pb2.Notify(webhook_url=receiver.url("/late")),
    )
    with pytest.raises(grpc.RpcError) as deadline:
        host.agents.Execute(late, timeout=2)
    assert deadline.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    (hit,) = receiver.wait("/late", 1)
    body = json.loads(hit.body)
    output = body["output"]
    assert (body["kind"], body["id"]) == ("task", output["task_id"])
    assert output["task_id"].startswith("t-"), output
    assert (output["status"], output["agent"], output["action"]) == ("ERROR", "worker", "nap")
    assert output["error"]["code"] == "DEADLINE_EXCEEDED", output
    assert output["error"]["reason"] and output["error"]["message"], output
    assert final_record(host, output["task_id"])["state"] == "delivered"


def test_a_task_for_an_agent_not_found_is_delivered_under_its_task_id(
    host: HostProcess, receiver: Receiver
) -> None:
    """ "`id` | the task's ... id" and "`output` ... for a task that ended with an RPC error
    (..., an agent not found), `status` `ERROR` and `error` ... with the gRPC code": the
    webhook gets NOT_FOUND under a task id, by which its delivery record can be found."""
    missing = agent_io_pb2.ExecuteRequest(
        input=agent_input("nobody-runs-this", "echo", {}),
        notify=common_pb2.Notify(webhook_url=receiver.url("/missing")),
    )
    with pytest.raises(grpc.RpcError) as not_found:
        host.agents.Execute(missing, timeout=30)
    assert not_found.value.code() == grpc.StatusCode.NOT_FOUND
    (hit,) = receiver.wait("/missing", 1)
    body = json.loads(hit.body)
    output = body["output"]
    assert (output["status"], output["agent"]) == ("ERROR", "nobody-runs-this"), output
    assert output["error"]["code"] == "NOT_FOUND", output
    assert body["id"] == output["task_id"]
    assert body["id"].startswith("t-"), body
    assert final_record(host, body["id"])["state"] == "delivered"


def test_a_webhook_and_a_topic_each_get_a_delivery_of_their_own(
    host: HostProcess, receiver: Receiver
) -> None:
    """ "`delivery_id`: one per output and place": one task naming a webhook and a reply topic
    gives two deliveries with two ids, the same object otherwise, each recorded delivered."""
    topic = "claims.both-places"
    watch = subscribe(host, topic=topic, after=0)
    output = _execute(
        host, "worker", "echo", {"to": "both"}, webhook_url=receiver.url("/both"), reply_topic=topic
    )
    (hit,) = receiver.wait("/both", 1)
    message = next(watch).message
    watch.cancel()
    posted = json.loads(hit.body)
    published = json_format.MessageToDict(message.data)
    assert (message.type, message.sender) == ("task_completed", "@notify")
    assert DELIVERY_ID.fullmatch(posted["delivery_id"]) and DELIVERY_ID.fullmatch(
        published["delivery_id"]
    )
    assert posted["delivery_id"] != published["delivery_id"]
    assert {**posted, "delivery_id": ""} == {**published, "delivery_id": ""}
    assert posted["output"]["data"] == {"to": "both"}
    records = {r["target"]: r for r in _settled(host, output.task_id, 2)}
    assert sorted(records) == ["topic", "webhook"]
    assert [r["state"] for r in records.values()] == ["delivered", "delivered"]
    assert {r["id"] for r in records.values()} == {posted["delivery_id"], published["delivery_id"]}


def test_list_audit_keeps_to_the_time_range(host: HostProcess, receiver: Receiver) -> None:
    """gateway.md, "Audit": "`ListAudit` pages newest first with filters (agent, decision,
    host, time range)" (proto: at or after start_time, before end_time): a webhook's audit
    record is listed by a range around its time, and not by one that ends before it or starts
    after it."""
    output = _execute(host, "worker", "echo", {"n": "audited"}, webhook_url=receiver.url("/when"))
    assert final_record(host, output.task_id)["state"] == "delivered"
    (record,) = _audit(host, output.task_id)
    at = record.time.ToNanoseconds()

    def listed(start: int | None, end: int | None) -> bool:
        request = gateway_pb2.ListAuditRequest(agent="@notify", page_size=1000)
        if start is not None:
            request.start_time.FromNanoseconds(start)
        if end is not None:
            request.end_time.FromNanoseconds(end)
        return record.id in [r.id for r in host.gateway.ListAudit(request, timeout=10).records]

    ms = 1_000_000
    assert listed(at - ms, at + ms) and listed(at - ms, None) and listed(None, at + ms)
    assert not listed(at + ms, None), "listed although it is older than start_time"
    assert not listed(None, at - ms), "listed although it is newer than end_time"
    assert not listed(at - 2 * ms, at - ms)


# -- sessions ----------------------------------------------------------------------------------


def test_a_turn_without_a_reply_delivers_its_errors_and_steps(
    host: HostProcess, receiver: Receiver
) -> None:
    """ "`reply` ... `null` when the turn gave none), `errors` (the turn's `error` events:
    `step`, `code`, `message`, ...), `steps_run`": a pipeline step that fails and a reply that
    outlives the turn's time give a turn delivery with no reply, both errors as the stream
    showed them, and the steps that ran."""
    pipeline = gateway_pb2.PipelineSpec(
        steps=[gateway_pb2.PipelineStep(name="check", agent="worker", action="broken")],
        turn_timeout=duration_pb2.Duration(seconds=2),
    )
    url = receiver.url("/no-reply")
    session = open_session(
        host, agent="chatter", pipeline=pipeline, notify=common_pb2.Notify(webhook_url=url)
    )
    talk = Conversation(host, session.id)
    events = talk.turn("hang", client_message_id="m-hang")
    talk.close()
    assert "reply" not in kinds(events), kinds(events)
    shown = [(e.step, e.error.code) for e in of(events, "error")]
    (hit,) = receiver.wait("/no-reply", 1)
    body = json.loads(hit.body)
    close_session(host, session.id)
    turn = body["turn"]
    assert (body["kind"], turn["number"], turn["client_message_id"]) == ("turn", 1, "m-hang")
    assert turn["reply"] is None
    assert [(e["step"], e["code"]) for e in turn["errors"]] == shown
    assert [e["step"] for e in turn["errors"]] == ["check", ""]  # the step, then the turn
    assert shown[1][1] == "timeout" and all(e["message"] for e in turn["errors"])
    assert turn["steps_run"] == ["check", "reply"]


def test_a_close_without_a_reason_reaches_a_topic_as_closed_by_the_client(
    host: HostProcess,
) -> None:
    """ "`reason` (`idle_timeout`, the CloseSession reason, or `closed by the client`)" and
    "published on the gateway topic as a message of type ... `session_closed` from sender
    `@notify`": a client subscribed to the session's reply topic gets the closing."""
    topic = "claims.closings"
    watch = subscribe(host, topic=topic, after=0)
    session = open_session(host, agent="chatter", notify=common_pb2.Notify(reply_topic=topic))
    talk = Conversation(host, session.id)
    talk.turn("one")
    talk.close()
    first = next(watch).message  # the turn
    close_session(host, session.id)  # no reason
    closing = next(watch).message
    watch.cancel()
    assert (first.type, closing.type, closing.sender) == (
        "turn_completed",
        "session_closed",
        "@notify",
    )
    body = json_format.MessageToDict(closing.data)
    assert (body["kind"], body["id"]) == ("session_closed", session.id)
    assert body["session"]["reason"] == "closed by the client"
    assert body["session"]["turns"] == 1


def test_a_turn_cut_short_by_the_closing_is_not_delivered(
    host: HostProcess, receiver: Receiver
) -> None:
    """ "What is not delivered: ... a turn cut short by the session closing (the
    `session_closed` delivery follows)": turn 1 is answered and delivered; turn 2 hangs when
    the session closes, and what follows turn 1 is the closing alone (turns: 2)."""
    url = receiver.url("/cut")
    session = open_session(host, agent="chatter", notify=common_pb2.Notify(webhook_url=url))
    talk = Conversation(host, session.id)
    talk.turn("answered")
    talk.say("hang")
    talk.until(lambda e: e.WhichOneof("event") == "accepted" and e.turn == 2)
    close_session(host, session.id)
    assert kinds(talk.rest())[-1] == "session_closed"
    bodies = [json.loads(hit.body) for hit in receiver.wait("/cut", 2)]
    _settled(host, session.id, 2)
    assert sorted(b["kind"] for b in bodies) == ["session_closed", "turn"]
    (turn,) = [b["turn"] for b in bodies if b["kind"] == "turn"]
    assert turn["number"] == 1 and turn["reply"]["text"] == "chatter heard: answered"
    (closed,) = [b["session"] for b in bodies if b["kind"] == "session_closed"]
    assert closed["turns"] == 2
    # Every delivery the host recorded for the session: nothing for turn 2, now or later.
    recorded = sorted(json.loads(r["body"])["kind"] for r in deliveries(host, session.id))
    assert recorded == ["session_closed", "turn"], recorded


# -- a host of tighter settings ------------------------------------------------------------------


@pytest.fixture(scope="module")
def tight(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """Sessions idle out after 1.5 s by default and 2 s at most; the `@notify` egress allows
    one POST per 20 s (burst 1); deliveries are tried 20 times, 0.5 s apart doubling to 2 s
    (37 s in all: a refused attempt is delivered once the bucket refills, and a machine that
    stalls for less than 20 s still finds it empty right after a POST)."""
    folder = tmp_path_factory.mktemp("session-claims-tight")
    config = folder / "tight.toml"
    config.write_text(
        sandbox_grants()
        + "[gateway]\nidle_timeout = 1.5\nmax_idle_timeout = 2\n"
        + f'[notifications]\nsecret = "{SECRET}"\n'
        + "backoff = 0.5\nmax_backoff = 2\nmax_attempts = 20\n"
        + '[gateway.egress.agents."@notify"]\n'
        + 'allow_hosts = ["127.0.0.1"]\nallow_addresses = ["127.0.0.1/32"]\n'
        + 'allow_methods = ["POST"]\nrate = 0.05\nburst = 1\n'
    )
    process = HostProcess(folder / "state", env={"ETHER_CONFIG": str(config)})
    try:
        process.wait_serving()
        deploy(process, AGENTS / "worker")
        deploy(process, AGENTS / "chatter")
        yield process
    finally:
        process.stop()


def test_max_idle_timeout_caps_a_sessions_idle_timeout(tight: HostProcess) -> None:
    """ "`idle_timeout`, `max_idle_timeout` | 3600, 86400": a session that asks for none gets
    the host's `idle_timeout` (1.5 s); one that asks for an hour gets `max_idle_timeout` (2 s),
    and idles out by it: its WatchContext ends with `session_closed` `idle_timeout`."""
    plain = open_session(tight, agent="chatter")
    assert plain.idle_timeout.ToNanoseconds() == 1_500_000_000
    asked = open_session(tight, agent="chatter", idle_timeout=duration_pb2.Duration(seconds=3600))
    assert asked.idle_timeout.ToNanoseconds() == 2_000_000_000
    got = tight.gateway.GetSession(gateway_pb2.GetSessionRequest(session_id=asked.id), timeout=10)
    assert got.session.idle_timeout.ToNanoseconds() == 2_000_000_000
    watch = tight.gateway.WatchContext(
        gateway_pb2.WatchContextRequest(session_id=asked.id), timeout=60
    )
    events = list(watch)
    assert [e.WhichOneof("event") for e in events] == ["snapshot", "session_closed"]
    assert events[-1].session_closed.reason == "idle_timeout"


def test_a_rate_limited_webhook_is_tried_again_not_denied(
    tight: HostProcess, receiver: Receiver
) -> None:
    """ "a refusal that may pass (`rate_limited`, `timeout`, `fetch_failed`) is retried as a
    5xx is": with one POST per 20 s, a second delivery right after a first is refused by the
    `@notify` rate limit (audited DENIED `rate_limited`), then delivered once the bucket
    refills, ending `delivered` with one POST that counts the refused attempts."""
    first = _execute(tight, "worker", "echo", {"n": 1}, webhook_url=receiver.url("/rate-1"))
    assert final_record(tight, first.task_id)["state"] == "delivered"
    second = _execute(tight, "worker", "echo", {"n": 2}, webhook_url=receiver.url("/rate-2"))
    record = final_record(tight, second.task_id)
    assert record["state"] == "delivered", record
    outcomes = record["outcomes"]
    assert outcomes[0] == "rate_limited" and outcomes[-1] == "delivered", outcomes
    assert set(outcomes[:-1]) == {"rate_limited"}, outcomes
    audit = _audit(tight, second.task_id)
    assert [(a.decision, a.reason) for a in audit] == [
        (gateway_pb2.AUDIT_DECISION_DENIED, "rate_limited")
    ] * (len(outcomes) - 1) + [(gateway_pb2.AUDIT_DECISION_ALLOWED, "allowed")]
    (hit,) = receiver.wait("/rate-2", 1)
    assert hit.headers["x-ether-attempt"] == str(len(outcomes))
    assert json.loads(hit.body)["output"]["data"] == {"n": 2}


def test_a_turn_the_restart_ended_is_not_delivered(tmp_path: Path, receiver: Receiver) -> None:
    """notifications.md, "Sessions": "What is not delivered: a turn the host ended
    `host_restarted` ... (it did not run to its end; the client sees it on Converse)". Turn 1
    hangs when the host stops; the next host on the state directory ends it `host_restarted`
    and answers turn 2: the webhook gets turn 2 alone, and turn 1 has no delivery record."""
    config = {"ETHER_CONFIG": str(notify_config(tmp_path, SECRET))}
    url = receiver.url("/restart-cut")
    first = HostProcess(tmp_path / "state", env=config)
    try:
        first.wait_serving()
        deploy(first, AGENTS / "chatter")
        session = open_session(first, agent="chatter", notify=common_pb2.Notify(webhook_url=url))
        talk = Conversation(first, session.id)
        talk.say("hang")
        talk.until(lambda e: e.WhichOneof("event") == "accepted")
    finally:
        assert first.stop() == 0
    talk.close()
    second = HostProcess(tmp_path / "state", env=config)
    try:
        second.wait_serving()
        watch_until(second, "chatter", {"RUNNING"})  # deployed before the restart
        again = Conversation(second, session.id, after=0)
        ended = again.until(lambda e: e.WhichOneof("event") == "turn_completed" and e.turn == 1)
        answered = again.turn("after")
        again.close()
        (hit,) = receiver.wait("/restart-cut", 1)
        recorded = _settled(second, session.id, 1)
    finally:
        second.stop()
    assert [e.error.code for e in of(ended, "error")] == ["host_restarted"]
    assert answered[0].turn == 2
    body = json.loads(hit.body)
    assert (body["kind"], body["turn"]["number"]) == ("turn", 2)
    assert body["turn"]["reply"]["text"] == "chatter heard: after"
    assert [json.loads(r["body"])["turn"]["number"] for r in recorded] == [2], recorded
    assert [h for h in receiver.hits if h.path == "/restart-cut"] == [hit]
