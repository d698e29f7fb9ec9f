"""A run's notify holds whatever its callers do (docs/notifications.md, "The caller may go
away" and "Across a host restart"): a CreateRun whose caller goes away while the run's notify
is being recorded, and a CancelRun of a run a host restart left INTERRUPTED, after the new
host's own look at the run and during it.

Before, the CreateRun's handler was cancelled with its caller (grpc.aio cancels the handler's
task) after the run had started and before the notifier watched it: the run ended and nothing
was delivered, and a repeat of the CreateRun with its request_id answered with the run, still
unwatched. A CancelRun of an INTERRUPTED run was delivered CANCELLED only by the next host to
start; later, still so for one that came during the new host's look at the run.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ether.v1 import common_pb2, workflow_pb2
from tests.notifications.support import (
    BUDGET,
    SECRET,
    Receiver,
    deliveries,
    notify_config,
    notifying_host,
)
from tests.notifications.test_notification_doc_claims import kill_minus_nine
from tests.support.agents import AGENTS, deploy
from tests.support.host import HostProcess
from tests.workflows.runs import create, logged, state

CREATE_RUN = "/ether.v1.WorkflowService/CreateRun"


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """A host that delivers notifications to loopback."""
    with notifying_host(tmp_path_factory.mktemp("notify-watch")) as process:
        yield process


def _told(receiver: Receiver, path: str, count: int) -> list[tuple[str, str]]:
    """(run id, state) of the first ``count`` POSTs to ``path``."""
    bodies = [json.loads(hit.body) for hit in receiver.wait(path, count)]
    return [(body["id"], body["run"]["state"]) for body in bodies]


def _awaited(state_dir: Path, run_id: str) -> list[tuple[str, ...]]:
    """The notifier's record that ``run_id``'s end is still to be delivered (of a stopped host)."""
    with sqlite3.connect(state_dir / "notifications.sqlite3") as db:
        return list(db.execute("SELECT run_id FROM awaited_runs WHERE run_id = ?", [run_id]))


def test_a_create_run_whose_caller_leaves_while_its_notify_is_recorded_delivers_the_run(
    host: HostProcess, flow: str, receiver: Receiver
) -> None:
    """The notifier's records are held locked (a write transaction of the test's own), so the
    CreateRun stays at recording the run's notify; the run starts and ends meanwhile, and the
    caller goes away. Once the lock is let go, the run's end is delivered, a repeat of the
    CreateRun with its request_id answers with that run, and a run created next with the same
    webhook is its next POST (the first was delivered once).

    The notifier waits up to SQLite's busy_timeout (5 s) for the lock: the test lets go of it
    as soon as the host logged the cancelled call, a few hundred ms after it took it."""
    tag = uuid.uuid4().hex[:8]
    path = f"/left-{tag}"
    notify = common_pb2.Notify(webhook_url=receiver.url(path))
    quick = f"name: left-{tag}\nstages:\n  - {{name: a, agent: {flow}, action: echo}}\n"
    request = workflow_pb2.CreateRunRequest(
        spec_text=quick, request_id=f"left-{tag}", notify=notify
    )
    records = sqlite3.connect(host.state_dir / "notifications.sqlite3", isolation_level=None)
    try:
        records.execute("BEGIN IMMEDIATE")
        after = len(host.records)
        call = host.workflows.CreateRun.future(request, timeout=BUDGET)
        ended = host.wait_for_log(lambda r: r.get("event") == "run ended", BUDGET, after=after)
        assert call.cancel(), f"CreateRun answered before its caller left: {call.exception()}"
        host.wait_for_log(
            lambda r: (
                r.get("event") == "rpc"
                and r.get("method") == CREATE_RUN
                and r.get("code") == "CANCELLED"
            ),
            BUDGET,
            after=after,
        )
    finally:
        records.execute("ROLLBACK")
        records.close()
    run_id = ended["run_id"]
    assert _told(receiver, path, 1) == [(run_id, "RUN_STATE_SUCCEEDED")]
    again = host.workflows.CreateRun(request, timeout=BUDGET).run
    assert again.id == run_id
    later = create(host, quick, notify=notify)
    assert _told(receiver, path, 2) == [
        (run_id, "RUN_STATE_SUCCEEDED"),
        (later.id, "RUN_STATE_SUCCEEDED"),
    ]


def _interrupted_run(
    tmp_path: Path, receiver: Receiver
) -> tuple[workflow_pb2.Run, common_pb2.Notify, dict[str, str], str]:
    """A run watched with a webhook of ``receiver``, left INTERRUPTED in ``tmp_path / "state"``
    by a kill -9 of its host; with its notify, the hosts' environment and the webhook's path."""
    tag = f"interrupted-{uuid.uuid4().hex[:8]}"  # text, never a number to YAML
    path = f"/{tag}"
    notify = common_pb2.Notify(webhook_url=receiver.url(path))
    config = {"ETHER_CONFIG": str(notify_config(tmp_path, SECRET))}
    spec = f"name: {tag}\nstages:\n  - {{name: wait, agent: flow, action: hold, params: {{tag: {tag}}}}}\n"
    first = HostProcess(tmp_path / "state", env=config)
    try:
        first.wait_serving()
        deploy(first, AGENTS / "flow")
        run = create(first, spec, notify=notify)
        logged(first, "flow", "holding", {tag})
    finally:
        kill_minus_nine(first)
    return run, notify, config, path


def _nothing_more_of(
    run_id: str,
    tmp_path: Path,
    notify: common_pb2.Notify,
    config: dict[str, str],
    receiver: Receiver,
    path: str,
) -> None:
    """The host started next on the state directory delivers nothing more of ``run_id``, told
    INTERRUPTED and CANCELLED once each: a run created there with the same webhook is the
    webhook's next POST."""
    third = HostProcess(tmp_path / "state", env=config)
    try:
        third.wait_serving()
        quick = "name: next\nstages:\n  - {name: a, agent: flow, action: echo}\n"
        later = create(third, quick, notify=notify)
        told = _told(receiver, path, 3)
    finally:
        assert third.stop() == 0
    assert sorted(told[:2]) == [
        (run_id, "RUN_STATE_CANCELLED"),
        (run_id, "RUN_STATE_INTERRUPTED"),
    ], told
    assert told[2] == (later.id, "RUN_STATE_SUCCEEDED"), told
    assert len(deliveries(third, run_id)) == 2


def _until_cancelled(host: HostProcess, run_id: str) -> None:
    """Once GetRun shows ``run_id`` CANCELLED (within BUDGET): the CancelRun stored it so."""
    deadline = time.monotonic() + BUDGET
    request = workflow_pb2.GetRunRequest(run_id=run_id)
    while state(host.workflows.GetRun(request, timeout=BUDGET).run) != "CANCELLED":
        assert time.monotonic() < deadline, f"run {run_id} not CANCELLED within {BUDGET} s"


def test_a_cancel_of_an_interrupted_run_is_delivered_at_once_and_by_no_later_host(
    tmp_path: Path, receiver: Receiver
) -> None:
    """A run watched with a webhook is interrupted by a kill -9; the next host tells it
    INTERRUPTED, and a CancelRun of it there is delivered CANCELLED while that host runs. Its
    notify is then no longer awaited, and the host started after delivers nothing more of it:
    a run created there with the same webhook is the webhook's next POST."""
    run, notify, config, path = _interrupted_run(tmp_path, receiver)
    second = HostProcess(tmp_path / "state", env=config)
    try:
        second.wait_serving()
        # The second host's own look at the run tells it INTERRUPTED: it hands the record that
        # it told the run to a worker thread before the POST is even started, and is done with
        # the run long before the POST comes (a CancelRun during that look: the next test).
        assert _told(receiver, path, 1) == [(run.id, "RUN_STATE_INTERRUPTED")]
        cancel = workflow_pb2.CancelRunRequest(run_id=run.id, reason="not resuming")
        assert state(second.workflows.CancelRun(cancel, timeout=30).run) == "CANCELLED"
        assert _told(receiver, path, 2)[1] == (run.id, "RUN_STATE_CANCELLED")
    finally:
        assert second.stop() == 0
    assert _awaited(tmp_path / "state", run.id) == []
    _nothing_more_of(run.id, tmp_path, notify, config, receiver, path)


def test_a_cancel_while_the_new_host_tells_the_run_interrupted_is_delivered_by_that_host(
    tmp_path: Path, receiver: Receiver
) -> None:
    """As above, but the CancelRun comes while the second host's own look at the run is still
    at it: that look, having read the run INTERRUPTED, waits to record the delivery that tells
    it so (the notifier's records are held locked by a write transaction of the test's own,
    taken before the host starts), and the CancelRun stores the run CANCELLED meanwhile (GetRun
    shows it). Once the lock goes, that host delivers INTERRUPTED and CANCELLED, once each, and
    the host started after delivers nothing more of the run.

    Before, the CancelRun found the run being watched and left it to that look, which ended at
    INTERRUPTED: CANCELLED was delivered only by the next host to start. The notifier waits up
    to SQLite's busy_timeout (5 s) for the lock: the test lets go of it once the host serves
    and GetRun shows the run cancelled, about a second after the host took up the run."""
    run, notify, config, path = _interrupted_run(tmp_path, receiver)
    records = sqlite3.connect(tmp_path / "state" / "notifications.sqlite3", isolation_level=None)
    second = None
    try:
        records.execute("BEGIN IMMEDIATE")
        second = HostProcess(tmp_path / "state", env=config)
        second.wait_serving()
        request = workflow_pb2.CancelRunRequest(run_id=run.id, reason="not resuming")
        cancel = second.workflows.CancelRun.future(request, timeout=BUDGET)
        _until_cancelled(second, run.id)
        records.execute("ROLLBACK")
        assert state(cancel.result().run) == "CANCELLED"
        assert sorted(_told(receiver, path, 2)) == [
            (run.id, "RUN_STATE_CANCELLED"),
            (run.id, "RUN_STATE_INTERRUPTED"),
        ]
    finally:
        if records.in_transaction:
            records.execute("ROLLBACK")
        records.close()
        if second is not None:
            assert second.stop() == 0
    assert _awaited(tmp_path / "state", run.id) == []
    _nothing_more_of(run.id, tmp_path, notify, config, receiver, path)
