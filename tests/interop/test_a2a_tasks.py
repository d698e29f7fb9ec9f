"""The A2A task book's bounds (ether_host/a2a/tasks.py): finished tasks are kept up to a count
and for a time, the oldest go first, running tasks are never dropped, and each caller sees its
own tasks only."""

from __future__ import annotations

from a2a.types import a2a_pb2

from ether_host.a2a.tasks import TaskBook


def _task(book: TaskBook, number: int, owner: str = "alice") -> str:
    task_id = f"t-{number}"
    book.add(a2a_pb2.Task(id=task_id, context_id="c"), "flow", owner)
    return task_id


def _finish(book: TaskBook, task_id: str, owner: str = "alice") -> None:
    record = book.get(task_id, owner)
    assert record is not None
    record.set_status(a2a_pb2.TASK_STATE_COMPLETED)


def test_the_oldest_finished_tasks_go_first_and_running_ones_stay() -> None:
    book = TaskBook(max_finished=2)
    running = _task(book, 0)
    for number in range(1, 4):
        _finish(book, _task(book, number))
    _task(book, 4)  # an add forgets what is past the bound
    kept = [record.id for record in book.newest_first("alice")]
    assert kept == ["t-4", "t-3", "t-2", running]
    assert book.get("t-1", "alice") is None


def test_finished_tasks_past_their_time_are_forgotten() -> None:
    book = TaskBook(ttl=-1)  # every finished task is past its time
    _finish(book, _task(book, 1))
    running = _task(book, 2)
    assert [record.id for record in book.newest_first("alice")] == [running]


def test_a_task_is_its_senders_only() -> None:
    book = TaskBook()
    mine = _task(book, 1, owner="alice")
    assert book.get(mine, "bob") is None
    assert list(book.newest_first("bob")) == []
    assert book.get(mine, "alice") is not None


def test_a_finished_task_lets_its_events_go() -> None:
    book = TaskBook()
    task_id = _task(book, 1)
    record = book.get(task_id, "alice")
    assert record is not None and record.events is not None
    _finish(book, task_id)
    assert record.finished and record.events is None and record.done is None
