"""Agent data too deep for a protobuf Value, seen through a workflow run (docs/limits.md,
"Agents and tasks"). A run keeps what its agents answered, and later reads answer it as Values
and Structs; data nested past what protobuf's decoders read (100 levels) is replaced in its
place by a text saying so, so GetRun, ListRunTasks and StreamRunEvents keep answering messages
a client can decode. (Before, ListRunTasks and StreamRunEvents answered INTERNAL for the
whole page or stream.)"""

from __future__ import annotations

from google.protobuf import json_format

from ether.v1 import agent_io_pb2
from tests.support.calls import nested
from tests.support.host import HostProcess
from tests.workflows.runs import events, run_to_end, state, tasks, value

# flow.nest answers a list holding a list ...: 45 lists (90 protobuf levels) are the most a
# Value carries; 50 is past what any reply could hold once its own messages are counted.
FITS, TOO_DEEP = 45, 50
NOTE = "is not shown here: it nests objects and lists deeper than a protobuf Value can carry"


def _spec(levels: int) -> str:
    """Stage `nest` answers the deep list; stage `pass` gets it as its params (`input`) and
    echoes them."""
    return f"""\
name: deep-{levels}
stages:
  - name: nest
    agent: flow
    action: nest
    params: {{levels: {levels}}}
  - name: pass
    agent: flow
    action: echo
    reduce: true
"""


def test_data_within_the_bound_is_shown_as_it_is(host: HostProcess, flow: str) -> None:
    """43 lists under `pass`'s object (3 + 86 levels) are shown whole, everywhere."""
    levels = (FITS * 2 - 3) // 2  # `pass` puts the list under an object: 3 levels more
    run = run_to_end(host, _spec(levels))
    assert state(run) == "SUCCEEDED", run
    assert value(run.result) == {"input": nested(levels)}
    nest, echoed = tasks(host, run.id)
    assert value(nest.output.data) == nested(levels)
    assert value(echoed.params) == {"input": nested(levels)}
    completed = [
        e.task_completed.task for e in events(host, run.id) if e.HasField("task_completed")
    ]
    assert [value(t.output.data) for t in completed] == [
        nested(levels),
        {"input": nested(levels)},
    ]


def test_data_too_deep_is_replaced_by_a_note_in_every_read(host: HostProcess, flow: str) -> None:
    """50 lists: the run succeeds (its agents did their work), and its result, each task's
    data and the params that carried it read as a text saying why they are not shown."""
    run = run_to_end(host, _spec(TOO_DEEP))
    assert state(run) == "SUCCEEDED", run  # the agents did their work: only showing it fails
    assert run.result.string_value.startswith("the run's result " + NOTE), run.result

    nest, echoed = tasks(host, run.id)
    assert nest.output.status == agent_io_pb2.TASK_STATUS_SUCCESS
    assert nest.output.data.string_value.startswith("the task's data " + NOTE)
    assert json_format.MessageToDict(echoed.params) == {
        "not_shown": "the task's params " + NOTE + echoed.params["not_shown"].split(NOTE, 1)[1]
    }
    assert echoed.output.data.string_value.startswith("the task's data " + NOTE)

    completed = [
        e.task_completed.task for e in events(host, run.id) if e.HasField("task_completed")
    ]
    assert [t.task_id for t in completed] == [nest.task_id, echoed.task_id]
    assert completed[0].output.data.string_value == nest.output.data.string_value
    assert completed[1].params == echoed.params
