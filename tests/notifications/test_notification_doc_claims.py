"""The two claims docs/notifications.md ("Across a host restart") marks "not tested":

- "the record is written before the first attempt, so a `kill -9` leaves it pending as well":
  the next host on the same state directory delivers it, with the same `delivery_id` and body;
- "A run being watched is watched again by the next host".

Both kill the first host with SIGKILL (nothing of its own stop runs), then start a second host
on its state directory. The receiver is a real HTTP server in this process, on loopback; it can
hold a POST unanswered, so the host is killed with its first attempt in flight.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ether.v1 import agent_io_pb2, common_pb2, workflow_pb2
from tests.notifications.support import BUDGET, SECRET, deliveries, final_record, notify_config
from tests.support.agents import AGENTS, deploy, watch_until
from tests.support.calls import agent_input
from tests.support.host import HostProcess
from tests.workflows.runs import create, logged


@dataclass
class Hit:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A loopback HTTP server recording every POST. The first POST to a path in ``hold`` gets no
    answer until ``release`` is set (its connection is cut first when the host dies); every other
    POST is answered 200."""

    hold: set[str] = field(default_factory=set)
    hits: list[Hit] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)
    release: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                with receiver.changed:
                    held = self.path in receiver.hold
                    receiver.hold.discard(self.path)
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    receiver.hits.append(Hit(self.path, headers, body))
                    receiver.changed.notify_all()
                if held:
                    receiver.release.wait(BUDGET)
                try:
                    self.send_response(500 if held else 200)
                    self.send_header("content-length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:
                    pass  # the host that sent it is gone

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def wait(self, path: str, count: int) -> list[Hit]:
        """The first ``count`` POSTs to ``path``, once they came (within BUDGET)."""
        with self.changed:
            self.changed.wait_for(
                lambda: len([h for h in self.hits if h.path == path]) >= count, BUDGET
            )
            found = [h for h in self.hits if h.path == path]
        assert len(found) >= count, f"{len(found)} POSTs to {path}, wanted {count}"
        return found[:count]

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    server.start()
    yield server
    server.stop()


def kill_minus_nine(host: HostProcess) -> None:
    """SIGKILL the host (no stop of its own runs) and reap it; its agents go by themselves."""
    host.process.kill()
    host.process.wait()
    host.stop()  # closes the test's channel; the process is gone already


def test_a_delivery_pending_at_a_kill_minus_nine_is_delivered_by_the_next_host(
    tmp_path: Path, receiver: Receiver
) -> None:
    """The host is killed while its first POST waits for an answer: by then the delivery was
    recorded (pending, no attempt counted), and the next host on the state directory delivers
    it with the same delivery id and body."""
    path = f"/held-{uuid.uuid4().hex[:8]}"
    receiver.hold.add(path)
    config = {"ETHER_CONFIG": str(notify_config(tmp_path, SECRET, max_attempts=10))}
    first = HostProcess(tmp_path / "state", env=config)
    try:
        first.wait_serving()
        deploy(first, AGENTS / "worker")
        request = agent_io_pb2.ExecuteRequest(
            input=agent_input("worker", "echo", {"kept": "across kill -9"}),
            notify=common_pb2.Notify(webhook_url=receiver.url(path)),
        )
        output = first.agents.Execute(request, timeout=30).output
        (sent,) = receiver.wait(path, 1)  # the first attempt, unanswered
        recorded = [(r["state"], r["attempts"]) for r in deliveries(first, output.task_id)]
        assert recorded == [("pending", 0)], "not recorded before its first attempt"
    finally:
        kill_minus_nine(first)

    second = HostProcess(tmp_path / "state", env=config)
    try:
        second.wait_serving()
        again = receiver.wait(path, 2)[1]
        record = final_record(second, output.task_id)
    finally:
        assert second.stop() == 0
    assert again.headers["x-ether-delivery"] == sent.headers["x-ether-delivery"]
    assert again.body == sent.body
    body = json.loads(again.body)
    assert (body["kind"], body["id"]) == ("task", output.task_id)
    assert body["output"]["data"] == {"kept": "across kill -9"}
    # The attempt cut off by the kill was never recorded: the count starts again (a receiver
    # deduplicates on X-Ether-Delivery, as the doc says).
    assert again.headers["x-ether-attempt"] == "1"
    assert (record["state"], record["attempts"]) == ("delivered", 1), record


def test_a_run_being_watched_is_watched_again_by_the_next_host(
    tmp_path: Path, receiver: Receiver
) -> None:
    """A run with a webhook holds in flow.hold when the host is killed: nothing is delivered
    then. The next host on the state directory marks the run INTERRUPTED (the state a run the
    host stopped during ends in, docs/workflows.md) and delivers it: kind `run`, the run as
    GetRun shows it. A third host does not tell it again; once ResumeRun continues it there
    (twice, with one request_id: the repeat changes nothing), its real end is delivered, once."""
    path = f"/run-{uuid.uuid4().hex[:8]}"
    tag = f"watched-{uuid.uuid4().hex[:8]}"
    config = {"ETHER_CONFIG": str(notify_config(tmp_path, SECRET))}
    spec = (
        "name: watched\nstages:\n"
        f"  - {{name: wait, agent: flow, action: hold, params: {{tag: {tag}}}}}\n"
    )
    first = HostProcess(tmp_path / "state", env=config)
    try:
        first.wait_serving()
        deploy(first, AGENTS / "flow")
        run = create(first, spec, notify=common_pb2.Notify(webhook_url=receiver.url(path)))
        logged(first, "flow", "holding", {tag})  # the run is under way, its task in the agent
    finally:
        kill_minus_nine(first)
    assert [h for h in receiver.hits if h.path == path] == []

    second = HostProcess(tmp_path / "state", env=config)
    try:
        second.wait_serving()
        (hit,) = receiver.wait(path, 1)
        recorded = second.wait_for_log(
            lambda r: r.get("event") == "notification recorded" and r.get("subject") == run.id,
            BUDGET,
        )
        stored = second.workflows.GetRun(workflow_pb2.GetRunRequest(run_id=run.id), timeout=10)
    finally:
        assert second.stop() == 0
    assert recorded["kind"] == "run"
    body = json.loads(hit.body)
    assert (body["kind"], body["id"]) == ("run", run.id)
    assert body["run"]["id"] == run.id
    assert body["run"]["state"] == "RUN_STATE_INTERRUPTED"
    assert stored.run.state == workflow_pb2.RUN_STATE_INTERRUPTED

    third = HostProcess(tmp_path / "state", env=config)
    try:
        third.wait_serving()
        watch_until(third, "flow", {"RUNNING"})  # restored from the agent store: ResumeRun needs it
        for _ in range(2):
            resume = workflow_pb2.ResumeRunRequest(run_id=run.id, request_id="resume-once")
            third.workflows.ResumeRun(resume, timeout=30)
        logged(third, "flow", "holding", {tag})  # the resumed run's hold runs again
        third.workflows.CancelRun(workflow_pb2.CancelRunRequest(run_id=run.id), timeout=30)
        hits = receiver.wait(path, 2)
        # The end was recorded after its delivery: any second delivery of the end or a repeat
        # of INTERRUPTED would have been recorded by now.
        third.wait_for_log(
            lambda r: r.get("event") == "notification attempt" and r.get("subject") == run.id,
            BUDGET,
        )
        recorded = [record["state"] for record in deliveries(third, run.id)]
    finally:
        assert third.stop() == 0
    states = [json.loads(hit.body)["run"]["state"] for hit in receiver.hits if hit.path == path]
    assert states == ["RUN_STATE_INTERRUPTED", "RUN_STATE_CANCELLED"], states
    assert json.loads(hits[1].body)["run"]["id"] == run.id
    assert recorded == ["delivered", "delivered"], recorded
