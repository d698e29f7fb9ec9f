"""Retention: ended runs past the host's [workflows] keep_runs, or created more than keep_days ago,
are deleted with their tasks and events; a run that has not ended never is."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from ether.v1 import agent_io_pb2, workflow_pb2
from tests.support.agents import AGENTS, deploy, watch_until
from tests.support.calls import details
from tests.support.host import HostProcess
from tests.workflows.runs import create, events, run_to_end, state, tasks, wait

ECHO = "name: {name}\nstages:\n  - {{name: a, agent: flow, action: echo}}\n"
HOLDING = """\
name: holding
stages:
  - {{name: wait, agent: flow, action: step, inputs: [{{hold: {tag}}}]}}
"""


def deleted(total: int) -> Callable[[dict[str, Any]], bool]:
    """A wait_for_log predicate: true once "ended runs deleted" lines add up to ``total`` runs."""
    seen = 0

    def check(record: dict[str, Any]) -> bool:
        nonlocal seen
        if record.get("event") == "ended runs deleted":
            seen += int(record["count"])
        return seen >= total

    return check


def listed(host: HostProcess) -> list[str]:
    response = host.workflows.ListRuns(workflow_pb2.ListRunsRequest(page_size=100), timeout=10)
    return [run.id for run in response.runs]


def gone(host: HostProcess, run_id: str) -> None:
    """The run, its tasks and its events are all NOT_FOUND, and the message says why."""
    for call in (
        lambda: host.workflows.GetRun(workflow_pb2.GetRunRequest(run_id=run_id), timeout=10),
        lambda: tasks(host, run_id),
        lambda: events(host, run_id),
    ):
        with pytest.raises(grpc.RpcError) as error:
            call()
        assert error.value.code() == grpc.StatusCode.NOT_FOUND
        assert "keep_runs and keep_days" in str(error.value.details())
        assert details(error.value)["ResourceInfo"].resource_name == run_id


def stored_rows(tmp_path: Path, run_ids: list[str]) -> int:
    """Rows of these runs' tasks and events left in the host's run store."""
    marks = ", ".join("?" for _ in run_ids)
    with sqlite3.connect(tmp_path / "state" / "workflows" / "runs.sqlite3") as db:
        return sum(
            db.execute(
                f"SELECT COUNT(*) FROM {table} WHERE run_id IN ({marks})", run_ids
            ).fetchone()[0]
            for table in ("tasks", "events")
        )


def host_with(tmp_path: Path, config_text: str) -> HostProcess:
    config = tmp_path / "ether.toml"
    config.write_text(config_text)
    host = HostProcess(tmp_path / "state", "--config", str(config))
    host.wait_serving()
    known = host.agents.ListAgents(agent_io_pb2.ListAgentsRequest(), timeout=10).agents
    if any(a.name == "flow" for a in known):  # a restarted host brings back what was deployed
        watch_until(host, "flow", {"RUNNING"})
    else:
        deploy(host, AGENTS / "flow")
    return host


def test_only_the_newest_ended_runs_are_kept(tmp_path: Path) -> None:
    host = host_with(tmp_path, "[workflows]\nkeep_runs = 2\n")
    try:
        holding = create(host, HOLDING.format(tag=f"keep-{uuid.uuid4().hex[:8]}"))
        ended = [
            run_to_end(host, ECHO.format(name=f"r{i}"), request_id=f"retention-{i}").id
            for i in range(4)
        ]
        host.wait_for_log(deleted(2))
        assert listed(host) == [ended[3], ended[2], holding.id]  # newest first; running kept
        for run_id in ended[:2]:
            gone(host, run_id)
        assert stored_rows(tmp_path, ended[:2]) == 0  # their tasks and events too, not just hidden
        assert stored_rows(tmp_path, ended[2:]) > 0
        # A kept run's request id still finds it; a deleted run's request id is forgotten.
        again = create(host, ECHO.format(name="again"), request_id="retention-3")
        assert again.id == ended[3]
        fresh = create(host, ECHO.format(name="fresh"), request_id="retention-0")
        assert fresh.id not in ended
        assert state(wait(host, fresh.id)) == "SUCCEEDED"
        host.workflows.CancelRun(workflow_pb2.CancelRunRequest(run_id=holding.id), timeout=10)
    finally:
        host.stop()


def test_runs_older_than_keep_days_are_deleted_when_the_host_starts(tmp_path: Path) -> None:
    first = host_with(tmp_path, "")  # the defaults: 1000 runs, 30 days
    old = run_to_end(first, ECHO.format(name="old"), request_id="aged").id
    assert first.stop() == 0
    # 1e-9 days is 86 µs: every run made before this start is older than that.
    again = host_with(tmp_path, "[workflows]\nkeep_days = 1e-9\n")
    try:
        again.wait_for_log(deleted(1))
        gone(again, old)
        assert listed(again) == []
    finally:
        again.stop()
