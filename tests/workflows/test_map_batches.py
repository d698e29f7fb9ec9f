"""Map stages in batches: a stage's tasks run through the core's batched pipe within the stage's
window, and the run's task rows and events reach the store in batches without weakening what a
restart promises (docs/workflows.md, "Persistence, restarts and resume")."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from ether.v1 import workflow_pb2
from tests.support.agents import AGENTS, deploy, watch_until
from tests.support.host import HostProcess
from tests.workflows.runs import (
    create,
    events,
    follow_until,
    kinds,
    logged,
    map_spec,
    run_to_end,
    saw_cancel,
    started,
    state,
    task_state,
    tasks,
    value,
    wait,
)


def test_a_map_stage_runs_no_more_than_its_window_and_cancels_cleanly(
    host: HostProcess, flow: str
) -> None:
    """30 holding tasks under max_concurrency 5: five start, no sixth; CancelRun sends the five
    cancel frames and the 25 never started end CANCELLED without a start."""
    tags = [f"w{i}" for i in range(30)]
    run = create(
        host,
        f"""\
name: window
stages:
  - name: hold
    agent: flow
    action: hold
    inputs: {json.dumps(tags)}
    params: {{tag: "${{input}}"}}
    parallel: true
    max_concurrency: 5
""",
    )
    follow_until(host, run.id, started(5, "hold"))
    logged(host, flow, "holding", set(tags[:5]))
    host.workflows.CancelRun(workflow_pb2.CancelRunRequest(run_id=run.id), timeout=10)
    ended = wait(host, run.id)
    assert state(ended) == "CANCELLED"
    seen = events(host, run.id)
    assert kinds(seen).count("task_started") == 5  # the window held: no sixth began
    assert [e.sequence for e in seen] == list(range(1, len(seen) + 1))
    saw_cancel(host, flow, set(tags[:5]))
    every = tasks(host, run.id)
    assert [task_state(t) for t in every] == ["CANCELLED"] * 30
    assert [t.attempts for t in every] == [1] * 5 + [0] * 25


def test_the_log_lines_of_a_map_stages_tasks_are_events_of_the_run(
    host: HostProcess, flow: str
) -> None:
    """Four holding tasks sent to the agent together: the line each one logs as it starts reaches
    the run's events as a task_progress naming that task, after its task_started; a cancel then
    ends all four."""
    tags = [f"log{i}" for i in range(4)]
    run = create(
        host,
        f"""\
name: logs
stages:
  - name: hold
    agent: flow
    action: hold
    inputs: {json.dumps(tags)}
    params: {{tag: "${{input}}"}}
    parallel: true
    max_concurrency: 4
""",
    )

    def holding(seen: list[workflow_pb2.StreamRunEventsResponse]) -> list[str]:
        return [
            e.task_progress.task_id
            for e in seen
            if e.WhichOneof("event") == "task_progress" and e.task_progress.log.message == "holding"
        ]

    seen = follow_until(host, run.id, lambda seen: len(holding(seen)) == 4)
    ids = {t.task_id: t.input_index for t in tasks(host, run.id)}
    logged_ids = holding(seen)
    assert sorted(ids[i] for i in logged_ids) == [0, 1, 2, 3]  # one line per task, each its own
    for e in seen:
        if e.WhichOneof("event") == "task_progress":
            line = e.task_progress
            assert line.stage == "hold" and value(line.log.fields) == {
                "tag": tags[ids[line.task_id]]
            }
            began = next(
                s.sequence
                for s in seen
                if s.WhichOneof("event") == "task_started"
                and s.task_started.task.task_id == line.task_id
            )
            assert began < e.sequence
    host.workflows.CancelRun(workflow_pb2.CancelRunRequest(run_id=run.id), timeout=10)
    ended = wait(host, run.id)
    assert state(ended) == "CANCELLED"
    assert [task_state(t) for t in tasks(host, run.id)] == ["CANCELLED"] * 4


def test_a_late_follower_reads_every_event_of_a_map_larger_than_the_memory_ring(
    host: HostProcess, flow: str
) -> None:
    """A live run whose map stage made more events than the live run keeps in memory (4096):
    a follower from the start gets every one of them, numbered without gaps, from the store."""
    run = create(
        host,
        f"""\
name: many-events
stages:
  - name: map
    agent: flow
    action: double
    inputs: {json.dumps(list(range(2500)))}
    parallel: true
    max_concurrency: 64
  - {{name: wait, agent: flow, action: hold, params: {{tag: late}}}}
""",
    )
    follow_until(host, run.id, started(1, "wait"), timeout=180)  # the map is done
    seen = follow_until(host, run.id, started(1, "wait"))  # from the start, the run still live
    assert [e.sequence for e in seen] == list(range(1, len(seen) + 1))
    assert len(seen) > 5000
    done = [e.task_completed.task for e in seen if e.WhichOneof("event") == "task_completed"]
    assert len(done) == 2500
    assert sorted(t.input_index for t in done) == list(range(2500))
    assert all(value(t.output.data) == {"value": 2 * t.input_index} for t in done)
    host.workflows.CancelRun(workflow_pb2.CancelRunRequest(run_id=run.id), timeout=10)
    assert state(wait(host, run.id)) == "CANCELLED"


def _stored(state_dir: Path, run_id: str) -> dict[str, str]:
    """The task states the host's store holds for the run, by task id, read from its SQLite
    file as another reader sees it (committed transactions only)."""
    path = state_dir / "workflows" / "runs.sqlite3"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10) as connection:
        rows = connection.execute(
            "SELECT task_id, state FROM tasks WHERE run_id = ?", (run_id,)
        ).fetchall()
    return {task_id: task_state.removeprefix("RUN_TASK_STATE_") for task_id, task_state in rows}


def _until_stored(state_dir: Path, run_id: str, succeeded: int, budget: float = 60) -> None:
    """Wait (within ``budget`` seconds) until the store holds ``succeeded`` finished tasks."""
    deadline = time.monotonic() + budget
    while time.monotonic() < deadline:
        if list(_stored(state_dir, run_id).values()).count("SUCCEEDED") >= succeeded:
            return
        time.sleep(0.05)
    raise AssertionError(f"the store never held {succeeded} succeeded tasks of {run_id}")


def test_a_map_killed_mid_stage_resumes_from_what_was_committed(tmp_path: Path) -> None:
    """A map of 100 inputs x (echo, gate) under max_concurrency 8: the first eight gates hold,
    eight echoes finish and reach the store. After a kill -9 the store holds the whole plan
    (200 tasks) and, for every task it holds finished, that task's task_completed event (rows
    and events are committed together); ResumeRun runs only what had not finished: the eight
    echoes keep their first output (same process, one attempt) and the stage data is whole."""
    first = HostProcess(tmp_path / "state", shared=(tmp_path,))
    second: HostProcess | None = None
    markers = [str(tmp_path / f"m{i}") for i in range(100)]
    try:
        first.wait_serving()
        deploy(first, AGENTS / "flow")
        run = create(
            first,
            f"""\
name: killed-map
stages:
  - name: map
    agent: flow
    inputs: {json.dumps(markers)}
    parallel: true
    max_concurrency: 8
    map:
      - {{action: echo}}
      - {{action: gate, params: {{marker: "${{input}}"}}}}
""",
        )
        logged(first, "flow", "gate waiting", set(markers[:8]))
        _until_stored(first.state_dir, run.id, 8)
        before = {t.task_id: t for t in tasks(first, run.id) if task_state(t) == "SUCCEEDED"}
        assert [t.action for t in before.values()] == ["echo"] * 8
        first.process.kill()
        first.process.wait()
        first.stop()

        second = HostProcess(tmp_path / "state", shared=(tmp_path,))
        second.wait_serving()
        cut = second.workflows.GetRun(workflow_pb2.GetRunRequest(run_id=run.id), timeout=10).run
        assert state(cut) == "INTERRUPTED"
        kept = tasks(second, run.id)
        assert len(kept) == 200  # the stage's plan was committed whole
        replay = events(second, run.id)
        assert [e.sequence for e in replay] == list(range(1, len(replay) + 1))
        completed = {
            e.task_completed.task.task_id
            for e in replay
            if e.WhichOneof("event") == "task_completed"
        }
        assert completed == {t.task_id for t in kept if task_state(t) == "SUCCEEDED"}
        assert set(before) <= completed

        watch_until(second, "flow", {"RUNNING"})
        for marker in markers:  # every gate passes now
            Path(marker).touch()
        second.workflows.ResumeRun(workflow_pb2.ResumeRunRequest(run_id=run.id), timeout=10)
        ended = wait(second, run.id, timeout=120)
        assert state(ended) == "SUCCEEDED", ended.error
        assert ended.tasks.succeeded == 200
        assert value(ended.result) == [
            item for m in markers for item in ({"input": m}, {"passed": None})
        ]
        after = {t.task_id: t for t in tasks(second, run.id)}
        for task_id, task in before.items():  # not run again: the output from before the kill
            assert after[task_id].attempts == 1
            assert after[task_id].output.metadata.pid == task.output.metadata.pid
    finally:
        (second or first).stop()


def _event_rows(state_dir: Path, run_id: str) -> list[tuple[int, float, str, str]]:
    path = state_dir / "workflows" / "runs.sqlite3"
    with sqlite3.connect(path, timeout=10) as connection:
        return connection.execute(
            "SELECT sequence, time, kind, body FROM events WHERE run_id = ? ORDER BY sequence",
            (run_id,),
        ).fetchall()


def test_a_maps_events_share_rows_and_a_store_of_one_row_per_event_still_reads(
    tmp_path: Path,
) -> None:
    """A map's events reach the store several to a row (a run's events committed together);
    a follower reads them one by one, from any sequence number. A store written before that
    (one row per event, as the previous version wrote) reads the same after a restart."""
    first = HostProcess(tmp_path / "state", shared=(tmp_path,))
    second: HostProcess | None = None
    try:
        first.wait_serving()
        deploy(first, AGENTS / "flow")
        run = create(
            first,
            f"""\
name: rows
stages:
  - name: map
    agent: flow
    action: double
    inputs: {json.dumps(list(range(300)))}
    parallel: true
    max_concurrency: 16
""",
        )
        assert state(wait(first, run.id)) == "SUCCEEDED"
        seen = events(first, run.id)
        assert [e.sequence for e in seen] == list(range(1, len(seen) + 1))
        assert kinds(seen).count("task_completed") == 300
        for after in (1, 7, len(seen) // 2, len(seen) - 1):  # inside a row of several, too
            assert events(first, run.id, after=after) == seen[after:]
        assert first.stop() == 0
        rows = _event_rows(first.state_dir, run.id)
        assert len(rows) < len(seen)  # several events to a row (how many: what a batch held)

        path = first.state_dir / "workflows" / "runs.sqlite3"
        with sqlite3.connect(path, timeout=10) as connection:  # the previous version's rows
            connection.execute("DELETE FROM events WHERE run_id = ?", (run.id,))
            for sequence, at, kind, body in rows:
                held = json.loads(body) if kind.startswith("+") else [[sequence, at, kind, body]]
                for item_sequence, item_at, item_kind, item_body in held:
                    connection.execute(
                        "INSERT INTO events VALUES (?, ?, ?, ?, ?)",
                        (
                            run.id,
                            item_sequence,
                            item_at,
                            item_kind,
                            item_body if isinstance(item_body, str) else json.dumps(item_body),
                        ),
                    )
        assert len(_event_rows(first.state_dir, run.id)) == len(seen)

        second = HostProcess(tmp_path / "state", shared=(tmp_path,))
        second.wait_serving()
        assert events(second, run.id) == seen
        assert events(second, run.id, after=len(seen) // 2) == seen[len(seen) // 2 :]
        assert len(tasks(second, run.id)) == 300
    finally:
        (second or first).stop()


def test_a_map_stage_waits_while_the_run_store_is_behind(host: HostProcess, flow: str) -> None:
    """A stage hands its tasks to agents no faster than the run store commits what they did:
    with the store's file locked by another writer, the stage stops starting tasks once the
    store's writer is stage_pipe.MAX_BACKLOG (10,000) rows behind, and the host says so; once the
    lock goes, the run goes on to its end with every task stored.

    The lock is held from before CreateRun (which answers once its run is committed, so from a
    future) until the host's line: ~4,000 echo tasks' rows, well within the 5 s the writer waits
    on a locked file (its busy_timeout) before it gives up a commit."""
    count = 8000  # two events per task at least: more than the bound's rows before the end
    spec = map_spec("store-behind", count, 64)
    database = host.state_dir / "workflows" / "runs.sqlite3"
    blocker = sqlite3.connect(database, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")  # the write lock: the host's writer waits on it
        mark = len(host.records)
        creating = host.workflows.CreateRun.future(
            workflow_pb2.CreateRunRequest(spec_text=spec), timeout=60
        )
        said = host.wait_for_log(
            lambda r: r.get("event") in ("stage waits for the run store", "run ended"),
            after=mark,
        )
        assert said["event"] == "stage waits for the run store", said  # not ended unbounded
        assert said["stage"] == "map" and said["rows_behind"] > said["max_backlog"] == 10_000
        held = host.workflows.GetRun(
            workflow_pb2.GetRunRequest(run_id=said["run_id"]), timeout=10
        ).run
        assert state(held) == "RUNNING"
        assert held.tasks.succeeded < count
    finally:
        if blocker.in_transaction:
            blocker.execute("ROLLBACK")
        blocker.close()
    run_id = creating.result().run.id
    assert run_id == said["run_id"]
    ended = wait(host, run_id, timeout=180)
    assert state(ended) == "SUCCEEDED"
    assert ended.tasks.succeeded == count
    host.workflows.ListRuns(workflow_pb2.ListRunsRequest(), timeout=30)  # commits what is queued
    assert list(_stored(host.state_dir, run_id).values()) == ["SUCCEEDED"] * count


def test_a_maps_events_never_show_more_tasks_running_than_its_window(
    host: HostProcess, flow: str
) -> None:
    """A task that succeeded gives its slot to the next task before its end is recorded (so
    the agent is not kept waiting while the host records), yet the run's events tell the story
    in order: read in sequence, no more tasks are running at once than max_concurrency and
    every task starts before it completes, failures among the successes too."""
    window = 4
    run = run_to_end(
        host,
        f"""\
name: window-in-order
stages:
  - name: work
    agent: flow
    inputs: {json.dumps(list(range(150)))}
    parallel: true
    max_concurrency: {window}
    on_failure: continue
    map:
      - action: double
      - action: double
      - action: explode
""",
    )
    assert state(run) == "PARTIAL", run.error
    running: set[str] = set()
    most = 0
    ended: dict[str, str] = {}
    for event in events(host, run.id):
        kind = event.WhichOneof("event")
        if kind == "task_started":
            task_id = event.task_started.task.task_id
            assert task_id not in ended, f"{task_id} started after it completed"
            running.add(task_id)
            most = max(most, len(running))
        elif kind == "task_completed":
            task = event.task_completed.task
            assert task.task_id in running, f"{task.task_id} completed before it started"
            running.discard(task.task_id)
            ended[task.task_id] = task_state(task)
        elif kind == "stage_progress":
            assert event.stage_progress.tasks.running <= window
    assert most == window  # the window was used, and never passed
    assert sorted(ended.values()).count("SUCCEEDED") == 300
    assert sorted(ended.values()).count("FAILED") == 150
    assert (run.tasks.succeeded, run.tasks.failed, run.tasks.running) == (300, 150, 0)


def test_list_pages_default_to_100_and_stop_at_1000(host: HostProcess, flow: str) -> None:
    """A List method's page_size: 0 gives the default page of 100, a size past the maximum
    gives pages of 1000 (AIP-158: clamped, not refused), and the pages together hold every item
    once, in order (docs/limits.md). Read on a run of 1,001 tasks."""
    run = run_to_end(host, map_spec("paging", 1001, 64))
    assert state(run) == "SUCCEEDED"

    def page(size: int, token: str = "") -> workflow_pb2.ListRunTasksResponse:
        request = workflow_pb2.ListRunTasksRequest(run_id=run.id, page_size=size, page_token=token)
        return host.workflows.ListRunTasks(request, timeout=30)  # type: ignore[no-any-return]

    default = page(0)
    assert len(default.tasks) == 100 and default.next_page_token
    first = page(5000)
    assert len(first.tasks) == 1000 and first.next_page_token
    rest = page(5000, first.next_page_token)
    assert len(rest.tasks) == 1 and not rest.next_page_token
    ids = [t.task_id for t in (*first.tasks, *rest.tasks)]
    assert len(set(ids)) == 1001
    assert [t.task_id for t in default.tasks] == ids[:100]
