"""How a webhook delivery ends, by what the receiver answers (docs/notifications.md, "Webhooks"):
a 4xx other than 408, 425 and 429 means the receiver refused the body, so the delivery ends
`failed` after that one attempt; a 429 is retried, and the next 2xx delivers it; a receiver that
keeps answering 5xx gets `[notifications] max_attempts` attempts in all, then the delivery ends
`failed`. The host, the agent and the receiver (a real HTTP server on loopback) are real; the
outcome is read from the persisted delivery record and the host's log.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ether.v1 import agent_io_pb2, common_pb2
from tests.notifications.support import (
    SECRET,
    Receiver,
    final_record,
    notify_config,
)
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input
from tests.support.host import HostProcess

MAX_ATTEMPTS = 3  # the host's [notifications] max_attempts (backoff 0.05 s, at most 0.2 s)


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    folder = tmp_path_factory.mktemp("outcomes")
    config = notify_config(folder, SECRET, max_attempts=MAX_ATTEMPTS)
    process = HostProcess(folder / "state", env={"ETHER_CONFIG": str(config)})
    try:
        process.wait_serving()
        deploy(process, AGENTS / "worker")
        yield process
    finally:
        process.stop()


def _notify_webhook(host: HostProcess, receiver: Receiver, path: str) -> str:
    """Run a task that succeeds and names ``path`` on the receiver as its webhook; its id."""
    request = agent_io_pb2.ExecuteRequest(
        input=agent_input("worker", "echo", {"for": path}),
        notify=common_pb2.Notify(webhook_url=receiver.url(path)),
    )
    output = host.agents.Execute(request, timeout=30).output
    assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS
    return output.task_id


def _ended(host: HostProcess, subject: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``subject``'s delivery record once it left `pending`, and its logged attempts."""
    record = final_record(host, subject)
    attempts = [
        r
        for r in list(host.records)
        if r.get("event") == "notification attempt" and r.get("subject") == subject
    ]
    return record, attempts


def _posts(receiver: Receiver, path: str) -> list[str]:
    """The ``X-Ether-Attempt`` of every POST the receiver got at ``path``, in order."""
    with receiver.changed:
        return [h.headers["x-ether-attempt"] for h in receiver.hits if h.path == path]


def test_a_receiver_that_answers_404_is_not_asked_again(
    host: HostProcess, receiver: Receiver
) -> None:
    """A 404 means the receiver refused the body: the delivery ends `failed` at once, after one
    POST, although the host would have retried up to max_attempts times."""
    receiver.plan["/gone-for-good"] = [404] * 10
    task_id = _notify_webhook(host, receiver, "/gone-for-good")
    record, attempts = _ended(host, task_id)
    assert record["state"] == "failed"
    assert record["attempts"] == 1
    assert record["outcomes"] == ["failed"]
    assert record["last_status"] == 404
    assert "404" in record["last_error"]
    assert [(a["attempt"], a["status"], a["state"]) for a in attempts] == [(1, 404, "failed")]
    assert _posts(receiver, "/gone-for-good") == ["1"]


def test_a_429_is_retried_and_the_next_200_delivers_it(
    host: HostProcess, receiver: Receiver
) -> None:
    """A receiver that says "too many requests" gets the same delivery again after a pause;
    its 200 then ends the delivery `delivered`, after two attempts."""
    receiver.plan["/busy"] = [429]
    task_id = _notify_webhook(host, receiver, "/busy")
    record, attempts = _ended(host, task_id)
    assert record["state"] == "delivered"
    assert record["attempts"] == 2
    assert record["outcomes"] == ["http_error", "delivered"]
    assert [(a["attempt"], a["status"], a["state"]) for a in attempts] == [
        (1, 429, "pending"),
        (2, 200, "delivered"),
    ]
    assert _posts(receiver, "/busy") == ["1", "2"]
    hits = receiver.wait("/busy", 2)
    assert hits[0].headers["x-ether-delivery"] == hits[1].headers["x-ether-delivery"]
    assert hits[0].body == hits[1].body


def test_a_receiver_that_keeps_failing_gets_max_attempts_then_the_delivery_fails(
    host: HostProcess, receiver: Receiver
) -> None:
    """A receiver answering 500 to every POST is tried `max_attempts` times in all (the host's
    config), then the delivery ends `failed` and nothing more is sent."""
    receiver.plan["/down"] = [500] * 100
    task_id = _notify_webhook(host, receiver, "/down")
    record, attempts = _ended(host, task_id)
    assert record["state"] == "failed"
    assert record["attempts"] == MAX_ATTEMPTS
    assert record["outcomes"] == ["http_error"] * MAX_ATTEMPTS
    assert record["last_status"] == 500
    assert [(a["attempt"], a["status"]) for a in attempts] == [
        (n, 500) for n in range(1, MAX_ATTEMPTS + 1)
    ]
    assert [a["state"] for a in attempts] == ["pending"] * (MAX_ATTEMPTS - 1) + ["failed"]
    assert _posts(receiver, "/down") == [str(n) for n in range(1, MAX_ATTEMPTS + 1)]
