"""Workflow calls that overlap on one run (docs/workflows.md, "Runs as resources";
docs/notifications.md, "The caller may go away" and "Across a host restart"): a CreateRun
repeated with its request_id while the first is under way, a ResumeRun repeated at once, and
CancelRuns at once while a WaitRun and a StreamRunEvents follow the run.

Before, a repeat of a CreateRun still being checked was answered by rules meant for a new run:
on a host at its max_active_runs it was refused RESOURCE_EXHAUSTED, though the run it asked
for had started; and every repeat had the run watched with its own notify, so a repeat after
the run ended had it delivered again. Two ResumeRun at once with one request_id had the
notifier watch the run more than once, and its end was delivered as often. (The cancels held before as
now: a cancel is decided under the service's lock, and the first reason to halt a run wins.)
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from ether.v1 import common_pb2, workflow_pb2
from tests.notifications.support import (
    BUDGET,
    SECRET,
    Hit,
    Receiver,
    notify_config,
    notifying_host,
)
from tests.notifications.test_notification_doc_claims import kill_minus_nine
from tests.support.agents import AGENTS, deploy, watch_until
from tests.support.host import HostProcess
from tests.workflows.runs import create, logged, state, wait

PARSE_SLOWLY = list(range(20_000))  # a spec of ~130 KB: its check takes ~0.2 s in a worker thread


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """A host that keeps one run active at a time and delivers notifications to loopback."""
    folder = tmp_path_factory.mktemp("overlapping-runs")
    with notifying_host(folder, "[workflows]\nmax_active_runs = 1\n") as process:
        yield process


def _posted(receiver: Receiver, path: str, done: Callable[[list[Hit]], bool]) -> list[Hit]:
    """The POSTs to ``path`` once ``done`` holds for them (within BUDGET)."""
    with receiver.changed:
        receiver.changed.wait_for(
            lambda: done([h for h in receiver.hits if h.path == path]), BUDGET
        )
        hits = [h for h in receiver.hits if h.path == path]
    assert done(hits), f"POSTs to {path}: {[json.loads(h.body).get('id') for h in hits]}"
    return hits


def _delivered(run_id: str) -> Callable[[list[Hit]], bool]:
    return lambda hits: any(json.loads(h.body)["id"] == run_id for h in hits)


def _runs_named(host: HostProcess, name: str) -> list[workflow_pb2.Run]:
    request = workflow_pb2.ListRunsRequest(name=name, page_size=100)
    return list(host.workflows.ListRuns(request, timeout=30).runs)


def test_a_create_run_repeated_while_the_first_is_checked_gets_the_run_it_started(
    host: HostProcess, flow: str
) -> None:
    """Six CreateRun with one request_id at once, on a host that keeps one run active: each
    answers with the one run the first started (a repeat waits for the request under way),
    and that run is the only one. Before, a repeat that arrived while the first was still
    being checked was then checked against max_active_runs, with the first's run active, and
    refused RESOURCE_EXHAUSTED."""
    name = f"once-{uuid.uuid4().hex[:8]}"
    spec = (
        f"name: {name}\nstages:\n  - name: wait\n    agent: {flow}\n    action: hold\n"
        f"    params: {{tag: {name}, input: {json.dumps(PARSE_SLOWLY)}}}\n"
    )
    request = workflow_pb2.CreateRunRequest(spec_text=spec, request_id=f"request-{name}")
    calls = [host.workflows.CreateRun.future(request, timeout=60) for _ in range(6)]
    answers: list[str] = []
    refused: list[str] = []
    for call in calls:
        try:
            answers.append(call.result().run.id)
        except grpc.RpcError as error:
            refused.append(f"{error.code().name}: {error.details()}")
    try:
        assert refused == [], refused
        assert len(set(answers)) == 1, answers
        assert [r.id for r in _runs_named(host, name)] == answers[:1]
    finally:
        for run in _runs_named(host, name):
            cancel = workflow_pb2.CancelRunRequest(run_id=run.id)
            host.workflows.CancelRun(cancel, timeout=30)
            assert state(wait(host, run.id)) == "CANCELLED"


def test_cancels_at_once_with_a_wait_and_a_stream_open_all_see_one_end(
    host: HostProcess, flow: str
) -> None:
    """Three CancelRun at once of a run whose task holds, with a WaitRun and a StreamRunEvents
    open: every cancel answers OK, the WaitRun answers the run CANCELLED, the stream ends with
    one `run_completed` CANCELLED, and GetRun, ListRuns and the report say CANCELLED too."""
    tag = f"cancelled-{uuid.uuid4().hex[:8]}"
    spec = f"name: {tag}\nstages:\n  - {{name: wait, agent: {flow}, action: hold, params: {{tag: {tag}}}}}\n"
    run = create(host, spec)
    logged(host, flow, "holding", {tag})
    waiting = host.workflows.WaitRun.future(workflow_pb2.WaitRunRequest(run_id=run.id), timeout=60)
    stream = host.workflows.StreamRunEvents(
        workflow_pb2.StreamRunEventsRequest(run_id=run.id), timeout=60
    )
    cancel = workflow_pb2.CancelRunRequest(run_id=run.id, reason="overlap")
    calls = [host.workflows.CancelRun.future(cancel, timeout=30) for _ in range(3)]
    assert {c.result().run.id for c in calls} == {run.id}
    assert state(waiting.result().run) == "CANCELLED"
    ends = [e.run_completed for e in stream if e.WhichOneof("event") == "run_completed"]
    assert [workflow_pb2.RunState.Name(e.state) for e in ends] == ["RUN_STATE_CANCELLED"]
    got = host.workflows.GetRun(workflow_pb2.GetRunRequest(run_id=run.id), timeout=30).run
    assert (state(got), got.error.message) == ("CANCELLED", "overlap")
    assert [state(r) for r in _runs_named(host, tag)] == ["CANCELLED"]
    request = workflow_pb2.GetRunReportRequest(
        run_id=run.id, format=workflow_pb2.REPORT_FORMAT_JSON
    )
    assert (
        host.workflows.GetRunReport(request, timeout=30).run_state
        == workflow_pb2.RUN_STATE_CANCELLED
    )


def test_a_create_run_repeated_after_its_run_ended_delivers_it_no_second_time(
    host: HostProcess, flow: str, receiver: Receiver
) -> None:
    """A CreateRun repeated with its request_id and notify (a client retrying) once the run
    ended and was delivered answers with that run and delivers nothing again: "a CreateRun
    repeated with its request_id keeps the first request's notify". A run of its own, created
    next with the same notify, is the webhook's next POST. Before, the repeat had the run
    watched again, and the webhook got it twice."""
    tag = uuid.uuid4().hex[:8]
    path = f"/retried-{tag}"
    notify = common_pb2.Notify(webhook_url=receiver.url(path))
    quick = f"name: quick-{tag}\nstages:\n  - {{name: a, agent: {flow}, action: echo}}\n"
    run = create(host, quick, request_id=f"retried-{tag}", notify=notify)
    _posted(receiver, path, _delivered(run.id))
    again = create(host, quick, request_id=f"retried-{tag}", notify=notify)
    assert again.id == run.id
    later = create(host, quick, request_id=f"later-{tag}", notify=notify)
    hits = _posted(receiver, path, _delivered(later.id))
    assert [json.loads(h.body)["id"] for h in hits] == [run.id, later.id]


def test_a_resume_run_repeated_at_once_delivers_the_runs_end_once(
    tmp_path: Path, receiver: Receiver
) -> None:
    """Four ResumeRun with one request_id at once, of a run watched with a webhook: the run
    continues once and its end is delivered once; a run created next with the same webhook is
    its next POST. Before, each resume had the notifier watch the run (the repeats asked while
    the first was still recording it), and the end was delivered two or three times.

    The run is interrupted by a kill -9; the next host tells it INTERRUPTED and is stopped, so
    that the host resuming it (the third) has only told it INTERRUPTED before, as in
    tests/notifications/test_notification_doc_claims.py."""
    tag = f"resumed-{uuid.uuid4().hex[:8]}"  # text, never a number to YAML
    path = f"/{tag}"
    config = {"ETHER_CONFIG": str(notify_config(tmp_path, SECRET))}
    spec = f"name: resumed\nstages:\n  - {{name: wait, agent: flow, action: hold, params: {{tag: {tag}}}}}\n"
    first = HostProcess(tmp_path / "state", env=config)
    try:
        first.wait_serving()
        deploy(first, AGENTS / "flow")
        run = create(first, spec, notify=common_pb2.Notify(webhook_url=receiver.url(path)))
        logged(first, "flow", "holding", {tag})
    finally:
        kill_minus_nine(first)
    second = HostProcess(tmp_path / "state", env=config)
    try:
        second.wait_serving()
        _posted(receiver, path, _delivered(run.id))  # told INTERRUPTED
    finally:
        assert second.stop() == 0

    third = HostProcess(tmp_path / "state", env=config)
    try:
        third.wait_serving()
        watch_until(third, "flow", {"RUNNING"})
        resume = workflow_pb2.ResumeRunRequest(run_id=run.id, request_id=f"resume-{tag}")
        calls = [third.workflows.ResumeRun.future(resume, timeout=60) for _ in range(4)]
        assert [call.result().run.id for call in calls] == [run.id] * 4
        logged(third, "flow", "holding", {tag})
        third.workflows.CancelRun(workflow_pb2.CancelRunRequest(run_id=run.id), timeout=30)
        _posted(receiver, path, lambda hits: len([h for h in hits if run.id in str(h.body)]) >= 2)
        quick = "name: next\nstages:\n  - {name: a, agent: flow, action: echo}\n"
        later = create(third, quick, notify=common_pb2.Notify(webhook_url=receiver.url(path)))
        hits = _posted(receiver, path, _delivered(later.id))
    finally:
        assert third.stop() == 0
    told = [(b["id"], b["run"]["state"]) for b in (json.loads(h.body) for h in hits)]
    ended = [s for i, s in told if i == run.id]
    assert ended == ["RUN_STATE_INTERRUPTED", "RUN_STATE_CANCELLED"], told
