"""Which failed attempts the host runs again (docs/agents.md, "Retries"): a task whose process
died under it goes again only when it is idempotent, and the caller's
`AgentInput.idempotent` wins over the action's own flag either way; a task every replica
refuses as shutting down ends UNAVAILABLE with AGENT_SHUTTING_DOWN after at most 5 attempts.
Each new attempt is in the host's log as `retrying task`."""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import pytest

from ether.v1 import agent_io_pb2
from tests.support.agents import AGENTS, agent_pids, deploy, kill_once_running, remove_agent
from tests.support.calls import agent_input, data, details, execute
from tests.support.host import HostProcess

FLOW = AGENTS / "flow"
WORKER = AGENTS / "worker"
REFUSER = AGENTS / "refuser"


def _task_id() -> str:
    return f"retry-rules-{uuid.uuid4().hex[:12]}"


def _retries_logged(
    host: HostProcess, task_id: str, method: str, code: str, seen: int
) -> list[dict[str, Any]]:
    """The `retrying task` lines of ``task_id``, once the call's own `rpc` line (ended with
    ``code``) is in: the host writes that line after everything logged during the call."""
    host.wait_for_log(
        lambda r: (
            r.get("event") == "rpc"
            and str(r.get("method", "")).endswith(f"/{method}")
            and r.get("code") == code
        ),
        after=seen,
    )
    return [
        r
        for r in host.records[seen:]
        if r.get("event") == "retrying task" and r.get("task_id") == task_id
    ]


def test_the_callers_not_idempotent_wins_over_the_actions_idempotent(host: HostProcess) -> None:
    """An action the agent declares idempotent, called with `idempotent: false`: when its
    process dies under the task the caller gets UNAVAILABLE (AGENT_DIED) and the task is not
    run again, although another replica was free to run it."""
    name = deploy(host, FLOW, name="declared-idempotent", replicas=2)
    task_id = _task_id()
    seen = len(host.records)
    try:
        request = agent_io_pb2.ExecuteStreamRequest(
            input=agent_input(name, "hold", {"tag": task_id}, task_id=task_id, idempotent=False)
        )
        stream = host.agents.ExecuteStream(request, timeout=60)
        kill_once_running(stream)
        with pytest.raises(grpc.RpcError) as failed:
            for event in stream:
                assert event.WhichOneof("event") != "started", "the task was sent again"
        assert failed.value.code() == grpc.StatusCode.UNAVAILABLE, failed.value.details()
        assert details(failed.value)["ErrorInfo"].reason == "AGENT_DIED"
        assert _retries_logged(host, task_id, "ExecuteStream", "UNAVAILABLE", seen) == []
    finally:
        remove_agent(host, name)


def test_the_callers_idempotent_wins_over_the_actions_not_idempotent(host: HostProcess) -> None:
    """An action the agent does not declare idempotent, called with `idempotent: true`: when
    its process dies under the task, the task runs again on the live replica and the caller
    gets its success (attempt 2); the host logged `retrying task` for it, attempt 2, reason
    AGENT_DIED."""
    name = deploy(host, WORKER, name="caller-idempotent", replicas=2)
    task_id = _task_id()
    seen = len(host.records)
    try:
        request = agent_io_pb2.ExecuteStreamRequest(
            input=agent_input(name, "nap", {"ms": 3000}, task_id=task_id, idempotent=True)
        )
        stream = host.agents.ExecuteStream(request, timeout=60)
        killed = kill_once_running(stream)
        events = list(stream)
        started = [e.started for e in events if e.WhichOneof("event") == "started"]
        assert [s.attempt for s in started] == [2]
        output = events[-1].output
        assert output.status == agent_io_pb2.TASK_STATUS_SUCCESS, output.error.message
        assert output.task_id == task_id
        assert data(output) == {"slept": 3000}
        assert output.metadata.attempt == 2
        assert output.metadata.pid == started[0].pid
        assert output.metadata.pid not in (0, killed)
        assert output.metadata.pid in agent_pids(host, name)  # a live replica answered
        retries = _retries_logged(host, task_id, "ExecuteStream", "OK", seen)
        assert [(r.get("attempt"), r.get("reason")) for r in retries] == [(2, "AGENT_DIED")]
    finally:
        remove_agent(host, name)


def test_a_task_every_attempt_refuses_ends_unavailable_shutting_down(host: HostProcess) -> None:
    """Every replica answers every task `shutting_down` (it did not run it): the host tries
    the task 5 times in all, logging `retrying task` for attempts 2 to 5, and the caller then
    gets UNAVAILABLE with reason AGENT_SHUTTING_DOWN rather than a deadline or a success."""
    name = deploy(host, REFUSER, name="all-refusing", replicas=5)
    task_id = _task_id()
    seen = len(host.records)
    try:
        with pytest.raises(grpc.RpcError) as failed:
            execute(host, name, "serve", task_id=task_id, timeout=60)
        assert failed.value.code() == grpc.StatusCode.UNAVAILABLE, failed.value.details()
        assert details(failed.value)["ErrorInfo"].reason == "AGENT_SHUTTING_DOWN"
        retries = _retries_logged(host, task_id, "Execute", "UNAVAILABLE", seen)
        assert [(r.get("attempt"), r.get("reason")) for r in retries] == [
            (attempt, "AGENT_SHUTTING_DOWN") for attempt in (2, 3, 4, 5)
        ]
    finally:
        remove_agent(host, name)
