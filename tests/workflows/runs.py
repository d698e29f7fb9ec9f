"""Helpers for the workflow tests: create runs, wait on them, read their events, tasks and logs.

Everything waits on the host's own signals (WaitRun, StreamRunEvents,
StreamLogs with follow); nothing sleeps.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import grpc
from google.protobuf import json_format

from ether.v1 import supervisor_pb2, workflow_pb2
from ether_host.agents import Dispatcher
from ether_host.procs import ChildRegistry
from ether_host.supervisor import Supervisor
from ether_host.workflows import Workflows
from tests.support.agents import AGENTS
from tests.support.host import HostProcess

Event = workflow_pb2.StreamRunEventsResponse


def map_spec(name: str, count: int, max_concurrency: int) -> str:
    """A run of one map stage: ``flow.double`` of the inputs 0 .. count-1, side by side."""
    return f"""\
name: {name}
stages:
  - name: map
    agent: flow
    action: double
    inputs: {json.dumps(list(range(count)))}
    parallel: true
    max_concurrency: {max_concurrency}
"""


@asynccontextmanager
async def core_with_flow(state_dir: Path) -> AsyncIterator[Workflows]:
    """The host's workflows core in this process (supervisor, dispatcher, workflows, no gRPC)
    with the real `flow` agent deployed; its agents stopped and its group ended on exit."""
    supervisor = Supervisor(state_dir, ChildRegistry())
    dispatcher = Dispatcher(supervisor)
    workflows = Workflows(state_dir, supervisor, dispatcher)
    async with anyio.create_task_group() as tg:
        await tg.start(supervisor.run)
        await tg.start(dispatcher.run)
        await tg.start(workflows.run)
        await supervisor.deploy({"path": str(AGENTS / "flow"), "name": "flow"})
        yield workflows
        await supervisor.stop_all()
        tg.cancel_scope.cancel()


def create(host: HostProcess, spec_text: str, **fields: Any) -> workflow_pb2.Run:
    request = workflow_pb2.CreateRunRequest(spec_text=spec_text, **fields)
    return host.workflows.CreateRun(request, timeout=30).run  # type: ignore[no-any-return]


def wait(host: HostProcess, run_id: str, timeout: float = 90) -> workflow_pb2.Run:
    """The run once it ended (WaitRun blocks until then)."""
    run = host.workflows.WaitRun(workflow_pb2.WaitRunRequest(run_id=run_id), timeout=timeout).run
    assert state(run) not in ("PENDING", "RUNNING"), f"run {run_id} still {state(run)}"
    return run  # type: ignore[no-any-return]


def run_to_end(host: HostProcess, spec_text: str, **fields: Any) -> workflow_pb2.Run:
    return wait(host, create(host, spec_text, **fields).id)


def state(run: workflow_pb2.Run) -> str:
    return workflow_pb2.RunState.Name(run.state).removeprefix("RUN_STATE_")


def stage_states(run: workflow_pb2.Run) -> dict[str, str]:
    return {
        s.name: workflow_pb2.StageState.Name(s.state).removeprefix("STAGE_STATE_")
        for s in run.stages
    }


def task_state(task: workflow_pb2.RunTask) -> str:
    return workflow_pb2.RunTaskState.Name(task.state).removeprefix("RUN_TASK_STATE_")


def value(message: Any) -> Any:
    """A google.protobuf.Value / Struct as plain JSON, integral numbers as ints."""
    return _integral(json_format.MessageToDict(message))


def _integral(item: Any) -> Any:
    if isinstance(item, float) and item.is_integer():
        return int(item)
    if isinstance(item, list):
        return [_integral(i) for i in item]
    if isinstance(item, dict):
        return {k: _integral(v) for k, v in item.items()}
    return item


def events(
    host: HostProcess, run_id: str, after: int = 0, timeout: float = 90, **fields: Any
) -> list[Event]:
    """Every event after ``after`` until the stream ends (after run_completed)."""
    request = workflow_pb2.StreamRunEventsRequest(run_id=run_id, after_sequence=after, **fields)
    return list(host.workflows.StreamRunEvents(request, timeout=timeout))


def follow_until(
    host: HostProcess,
    run_id: str,
    done: Callable[[list[Event]], bool],
    after: int = 0,
    timeout: float = 90,
) -> list[Event]:
    """Events from the stream until ``done(events so far)``; then the stream is dropped."""
    stream = host.workflows.StreamRunEvents(
        workflow_pb2.StreamRunEventsRequest(run_id=run_id, after_sequence=after), timeout=timeout
    )
    seen: list[Event] = []
    try:
        for event in stream:
            seen.append(event)
            if done(seen):
                return seen
    finally:
        stream.cancel()
    raise AssertionError(
        f"stream of {run_id} ended before the condition held; kinds: {kinds(seen)}"
    )


def started(count: int, stage: str = "") -> Callable[[list[Event]], bool]:
    """A follow_until condition: ``count`` task_started events (of ``stage``)."""

    def check(seen: list[Event]) -> bool:
        return (
            sum(
                1
                for e in seen
                if e.WhichOneof("event") == "task_started"
                and (not stage or e.task_started.task.stage == stage)
            )
            >= count
        )

    return check


def kinds(seen: list[Event]) -> list[str]:
    return [str(e.WhichOneof("event")) for e in seen]


def tasks(host: HostProcess, run_id: str, **fields: Any) -> list[workflow_pb2.RunTask]:
    """Every task of the run (all pages), in creation order."""
    out: list[workflow_pb2.RunTask] = []
    token = ""
    while True:
        page = host.workflows.ListRunTasks(
            workflow_pb2.ListRunTasksRequest(
                run_id=run_id, page_token=token, page_size=500, **fields
            ),
            timeout=30,
        )
        out.extend(page.tasks)
        token = page.next_page_token
        if not token:
            return out


def report(host: HostProcess, run_id: str, fmt: int) -> workflow_pb2.GetRunReportResponse:
    request = workflow_pb2.GetRunReportRequest(run_id=run_id, format=fmt)
    return host.workflows.GetRunReport(request, timeout=30)  # type: ignore[no-any-return]


def saw_cancel(
    host: HostProcess, agent: str, tags: set[str], timeout: float = 60
) -> dict[str, dict[str, Any]]:
    """Follow the agent's log until it has logged "saw cancel" for every tag; their fields by tag."""
    return logged(host, agent, "saw cancel", tags, timeout)


def logged(
    host: HostProcess, agent: str, message: str, tags: set[str], timeout: float = 60
) -> dict[str, dict[str, Any]]:
    """Follow the agent's log until it has logged ``message`` with every tag; their fields by tag."""
    found: dict[str, dict[str, Any]] = {}
    stream = host.supervisor.StreamLogs(
        supervisor_pb2.StreamLogsRequest(agent=agent, tail_lines=10000, follow=True),
        timeout=timeout,
    )
    try:
        for line in stream:
            fields = value(line.fields)
            if line.message == message and fields.get("tag") in tags:
                found[fields["tag"]] = fields
                if set(found) == tags:
                    return found
    except grpc.RpcError as error:
        raise AssertionError(
            f"{agent} logged {message!r} only for {sorted(found)} of {sorted(tags)}"
        ) from error
    finally:
        stream.cancel()
    raise AssertionError(f"log of {agent} ended; {message!r} only for {sorted(found)}")
