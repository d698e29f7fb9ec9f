"""Completion notifications (docs/notifications.md): a task or a workflow run that names a webhook
gets its final output POSTed there, signed with the host's secret and retried on a 500, under
the gateway's egress policy (a denial is recorded and audited); one that names a reply topic
has it published there, where a subscribed agent finds it; a caller that goes away does not
stop the task or its delivery. The receiver is a real HTTP server in this process, on loopback.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from ether.v1 import agent_io_pb2, common_pb2, gateway_pb2
from tests.notifications.support import (
    BUDGET,
    SECRET,
    Receiver,
    final_record,
    notify_config,
    notifying_host,
)
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input, data, execute
from tests.support.host import HostProcess
from tests.workflows.runs import create


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    with notifying_host(tmp_path_factory.mktemp("notify")) as process:
        deploy(process, AGENTS / "worker")
        deploy(process, AGENTS / "flow")
        deploy(process, AGENTS / "toolbox", name="listener")
        yield process


def _notify(**fields: str) -> common_pb2.Notify:
    return common_pb2.Notify(**fields)


def _execute(
    host: HostProcess, params: dict[str, Any], notify: common_pb2.Notify
) -> agent_io_pb2.AgentOutput:
    request = agent_io_pb2.ExecuteRequest(
        input=agent_input("worker", "echo", params), notify=notify
    )
    return host.agents.Execute(request, timeout=30).output


def test_a_webhook_gets_the_output_signed_with_the_secret(
    host: HostProcess, receiver: Receiver
) -> None:
    output = _execute(host, {"hello": "hook"}, _notify(webhook_url=receiver.url("/signed")))
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS
    (hit,) = receiver.wait("/signed", 1)
    expected = hmac.new(SECRET.encode(), hit.body, hashlib.sha256).hexdigest()
    assert hit.headers["x-ether-signature"] == f"sha256={expected}"
    assert hit.headers["content-type"] == "application/json"
    body = json.loads(hit.body)
    assert body["kind"] == "task" and body["id"] == output.task_id
    assert body["output"]["status"] == "SUCCESS"
    assert body["output"]["data"] == {"hello": "hook"}
    assert hit.headers["x-ether-delivery"] == body["delivery_id"]
    record = final_record(host, output.task_id)
    assert (record["state"], record["attempts"], record["outcomes"]) == (
        "delivered",
        1,
        ["delivered"],
    )


def test_a_500_is_retried_with_the_same_delivery_until_it_is_taken(
    host: HostProcess, receiver: Receiver
) -> None:
    receiver.plan["/flaky"] = [500, 500]
    output = _execute(host, {"n": 1}, _notify(webhook_url=receiver.url("/flaky")))
    hits = receiver.wait("/flaky", 3)
    assert [h.headers["x-ether-attempt"] for h in hits] == ["1", "2", "3"]
    assert len({h.headers["x-ether-delivery"] for h in hits}) == 1
    assert len({h.body for h in hits}) == 1
    record = final_record(host, output.task_id)
    assert record["state"] == "delivered" and record["attempts"] == 3
    assert record["outcomes"] == ["http_error", "http_error", "delivered"]


def test_a_webhook_the_egress_policy_refuses_is_recorded_denied_and_audited(
    host: HostProcess, receiver: Receiver
) -> None:
    port = receiver.server.server_address[1]
    url = f"http://localhost:{port}/refused"  # the policy allows 127.0.0.1 only
    output = _execute(host, {"n": 2}, _notify(webhook_url=url))
    record = final_record(host, output.task_id)
    assert record["state"] == "denied" and record["attempts"] == 1
    assert "host_not_allowed" in record["last_error"]
    audit = host.gateway.ListAudit(
        gateway_pb2.ListAuditRequest(agent="@notify"), timeout=10
    ).records
    assert [(a.decision, a.reason, a.url) for a in audit if a.task_id == output.task_id] == [
        (gateway_pb2.AUDIT_DECISION_DENIED, "host_not_allowed", url)
    ]
    assert not [h for h in receiver.hits if h.path == "/refused"]


def test_a_reply_topic_reaches_a_subscribed_agent(host: HostProcess) -> None:
    assert data(execute(host, "listener", "subscribe", {"topic": "done.tasks"})) == ["done.tasks"]
    output = _execute(host, {"via": "topic"}, _notify(reply_topic="done.tasks"))
    budget = time.monotonic() + BUDGET
    while True:  # each receive waits up to 5 s for a message in the mailbox
        got = data(execute(host, "listener", "receive", {"wait_ms": 5000}))
        if got or time.monotonic() > budget:
            break
    (message,) = got
    assert (message["type"], message["sender"]) == ("task_completed", "@notify")
    assert message["data"]["id"] == output.task_id
    assert message["data"]["output"]["data"] == {"via": "topic"}


def test_the_task_and_its_delivery_go_on_when_the_caller_goes_away(
    host: HostProcess, receiver: Receiver
) -> None:
    """The caller reads ExecuteStream's started event and cancels the call: the task still runs
    to its end and its output reaches the webhook."""
    request = agent_io_pb2.ExecuteStreamRequest(
        input=agent_input("worker", "nap", {"ms": 300}),
        notify=_notify(webhook_url=receiver.url("/gone")),
    )
    stream = host.agents.ExecuteStream(request, timeout=30)
    first = next(stream)
    assert first.WhichOneof("event") == "started"
    stream.cancel()
    (hit,) = receiver.wait("/gone", 1)
    body = json.loads(hit.body)
    assert body["id"] == first.task_id
    assert body["output"]["status"] == "SUCCESS"
    assert body["output"]["data"] == {"slept": 300}


def test_a_workflow_run_is_delivered_when_it_ends(host: HostProcess, receiver: Receiver) -> None:
    run = create(
        host,
        "name: told\nstages:\n  - {name: a, agent: flow, action: echo, inputs: [1]}\n",
        notify=_notify(webhook_url=receiver.url("/run")),
    )
    (hit,) = receiver.wait("/run", 1)
    body = json.loads(hit.body)
    assert body["kind"] == "run" and body["id"] == run.id
    assert body["run"]["id"] == run.id and body["run"]["state"] == "RUN_STATE_SUCCEEDED"


@pytest.mark.parametrize(
    ("notify", "names"),
    [
        ({"webhook_url": "ftp://127.0.0.1/x"}, "notify.webhook_url"),
        ({"webhook_url": "not a url"}, "notify.webhook_url"),
        ({"reply_topic": "Not A Topic"}, "topic"),
    ],
)
def test_a_bad_notify_is_refused_before_the_task_runs(
    host: HostProcess, notify: dict[str, str], names: str
) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        _execute(host, {}, _notify(**notify))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert names in caught.value.details()


def test_a_webhook_needs_a_secret_on_the_host(tmp_path: Path, receiver: Receiver) -> None:
    process = HostProcess(
        tmp_path / "state", env={"ETHER_CONFIG": str(notify_config(tmp_path, secret=""))}
    )
    try:
        process.wait_serving()
        with pytest.raises(grpc.RpcError) as caught:
            _execute(process, {}, _notify(webhook_url=receiver.url("/unsigned")))
    finally:
        process.stop()
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "secret" in caught.value.details()


def test_a_pending_delivery_goes_on_after_a_host_restart(
    tmp_path: Path, receiver: Receiver
) -> None:
    """The receiver fails every POST while the first host runs; the host stops with the
    delivery pending, and the next host on the same state directory delivers it (same id)."""
    receiver.plan["/later"] = [500] * 10_000
    config = {"ETHER_CONFIG": str(notify_config(tmp_path, SECRET, max_attempts=1000))}
    first = HostProcess(tmp_path / "state", env=config)
    try:
        first.wait_serving()
        deploy(first, AGENTS / "worker")
        output = _execute(first, {"kept": True}, _notify(webhook_url=receiver.url("/later")))
        failed = receiver.wait("/later", 2)
    finally:
        first.stop()
    with receiver.changed:
        receiver.plan["/later"] = []
        before = len([h for h in receiver.hits if h.path == "/later"])
    second = HostProcess(tmp_path / "state", env=config)
    try:
        second.wait_serving()
        delivered = receiver.wait("/later", before + 1)[-1]
        record = final_record(second, output.task_id)
    finally:
        second.stop()
    assert delivered.headers["x-ether-delivery"] == failed[0].headers["x-ether-delivery"]
    assert json.loads(delivered.body)["output"]["data"] == {"kept": True}
    assert record["state"] == "delivered" and record["attempts"] >= 3


def test_a_cancelled_task_delivers_how_it_ended(host: HostProcess, receiver: Receiver) -> None:
    """CancelTask still reaches a task with a notify; the webhook gets the error that ended it."""
    request = agent_io_pb2.ExecuteStreamRequest(
        input=agent_input("worker", "nap", {"ms": 60_000}),
        notify=_notify(webhook_url=receiver.url("/cancelled")),
    )
    stream = host.agents.ExecuteStream(request, timeout=60)
    first = next(stream)
    assert first.WhichOneof("event") == "started"
    host.agents.CancelTask(
        agent_io_pb2.CancelTaskRequest(task_id=first.task_id, reason="changed my mind"), timeout=10
    )
    with pytest.raises(grpc.RpcError) as caught:
        list(stream)
    assert caught.value.code() == grpc.StatusCode.CANCELLED
    (hit,) = receiver.wait("/cancelled", 1)
    output = json.loads(hit.body)["output"]
    assert (output["task_id"], output["status"]) == (first.task_id, "ERROR")
    assert output["error"]["code"] == "CANCELLED"
    assert "changed my mind" in output["error"]["message"]
