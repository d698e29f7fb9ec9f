"""Turn pipelines: steps on every user message, triggers, parallel groups, the reply last."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2, json_format

from ether.v1 import agent_io_pb2, gateway_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.calls import details, struct
from tests.support.host import HostProcess

from ._support import Conversation, of, open_session, reply_text


@pytest.fixture(scope="module")
def agents(host: HostProcess) -> tuple[str, str]:
    return deploy(host, AGENTS / "chatter"), deploy(host, AGENTS / "stepper")


def step(
    name: str,
    action: str = "note",
    agent: str = "stepper",
    trigger: dict[str, Any] | None = None,
    timeout: float | None = None,
    **fields: Any,
) -> gateway_pb2.PipelineStep:
    params = fields.pop("params", {"label": name})
    message = gateway_pb2.PipelineStep(
        name=name, agent=agent, action=action, params=struct(params), **fields
    )
    if trigger is not None:
        message.trigger.CopyFrom(gateway_pb2.PipelineTrigger(**trigger))
    if timeout is not None:
        message.timeout.FromNanoseconds(int(timeout * 1e9))
    return message


def steps_run(events: list[gateway_pb2.ConverseResponse]) -> list[str]:
    return list(of(events, "turn_completed")[0].steps_run)


def test_every_trigger_kind_and_a_parallel_group(
    host: HostProcess, agents: tuple[str, str]
) -> None:
    """every: 2, at_turns: [3] and a `when` on the context each run on exactly their turns; the
    two steps of a parallel group run at the same time (they wait for each other)."""
    meet = {"meet": "first", "peers": 2}
    pipeline = gateway_pb2.PipelineSpec(steps=[
        step("mood", params={"label": "mood", **meet}, parallel_group="first", output_key="mood", timeout=20),
        step("scan", params={"label": "scan", **meet}, parallel_group="first", timeout=20),
        step("every2", trigger={"every": 2}),
        step("at3", trigger={"at_turns": [3]}),
        step("flagged", trigger={"when": "context.flag == true and turn >= 2"}),
    ])  # fmt: skip
    session = open_session(host, agent=agents[0], pipeline=pipeline)
    talk = Conversation(host, session.id)
    turns = [talk.turn("one"), talk.turn("two"), talk.turn("three")]
    host.gateway.UpdateContext(
        gateway_pb2.UpdateContextRequest(session_id=session.id, set=struct({"flag": True})),
        timeout=10,
    )
    turns.append(talk.turn("four"))
    talk.close()
    assert [steps_run(t) for t in turns] == [
        ["mood", "scan", "reply"],
        ["mood", "scan", "every2", "reply"],
        ["mood", "scan", "at3", "reply"],
        ["mood", "scan", "every2", "flagged", "reply"],
    ]
    assert all(not of(t, "error") for t in turns), [of(t, "error") for t in turns]
    fourth = turns[3]
    completed = {s.step: s for s in of(fourth, "step_completed")}
    assert set(completed) == {"mood", "scan", "every2", "flagged", "reply"}
    assert all(
        s.status == agent_io_pb2.TASK_STATUS_SUCCESS and s.latency.ToNanoseconds() > 0
        for s in completed.values()
    )
    assert completed["every2"].agent == "stepper" and completed["reply"].agent == agents[0]
    # Steps of the group do not see each other's output; later steps and the reply see both.
    mood = next(c for c in of(fourth, "context_changed") if "mood" in c.keys)
    assert (
        mood.author == "agent:stepper"
        and json_format.MessageToDict(mood.values)["mood"]["saw"] == []
    )
    final = next(r for r in of(fourth, "reply") if not r.partial)
    assert json_format.MessageToDict(final.data)["steps"] == ["every2", "flagged", "mood", "scan"]


def test_when_reads_the_message(host: HostProcess, agents: tuple[str, str]) -> None:
    pipeline = gateway_pb2.PipelineSpec(
        steps=[step("urgent", trigger={"when": "'urgent' in message.text"})]
    )
    talk = Conversation(host, open_session(host, agent=agents[0], pipeline=pipeline).id)
    calm, urgent = talk.turn("hello"), talk.turn("this is urgent")
    talk.close()
    assert steps_run(calm) == ["reply"] and steps_run(urgent) == ["urgent", "reply"]


def test_a_failing_step_is_an_error_event_and_the_turn_goes_on(
    host: HostProcess, agents: tuple[str, str]
) -> None:
    pipeline = gateway_pb2.PipelineSpec(steps=[step("breaks", action="broken", params={})])
    talk = Conversation(host, open_session(host, agent=agents[0], pipeline=pipeline).id)
    events = talk.turn("go")
    talk.close()
    errors = of(events, "error")
    assert [(e.step, e.error.code) for e in errors] == [("breaks", "step_broke")]
    statuses = {s.step: s.status for s in of(events, "step_completed")}
    assert statuses == {
        "breaks": agent_io_pb2.TASK_STATUS_ERROR,
        "reply": agent_io_pb2.TASK_STATUS_SUCCESS,
    }
    assert reply_text(events) == f"{agents[0]} heard: go"


def test_an_explicit_reply_step(host: HostProcess, agents: tuple[str, str]) -> None:
    pipeline = gateway_pb2.PipelineSpec(steps=[step("answer", reply=True)])
    talk = Conversation(host, open_session(host, agent=agents[0], pipeline=pipeline).id)
    events = talk.turn("echo me")
    talk.close()
    assert steps_run(events) == ["answer"]
    final = [r for r in of(events, "reply") if not r.partial]
    assert [(r.agent, r.text) for r in final] == [("stepper", "echo me")]


def test_turn_timeout_is_an_error_and_the_session_goes_on(
    host: HostProcess, agents: tuple[str, str]
) -> None:
    limit = duration_pb2.Duration(seconds=1)
    pipeline = gateway_pb2.PipelineSpec(turn_timeout=limit)
    talk = Conversation(host, open_session(host, agent=agents[0], pipeline=pipeline).id)
    stuck = talk.turn("hang")
    after = talk.turn("hello again")
    talk.close()
    assert "timeout" in [e.error.code for e in of(stuck, "error")]
    assert not [r for r in of(stuck, "reply") if not r.partial]
    assert reply_text(after) == f"{agents[0]} heard: hello again"


def test_a_step_past_its_own_timeout_names_itself_and_the_turn_goes_on(
    host: HostProcess, agents: tuple[str, str]
) -> None:
    """A step's `timeout` sooner than the turn's: one `error` `timeout` naming the step, then the
    reply as usual."""
    waits = step("waits", params={"label": "waits", "meet": "nobody-comes", "peers": 2}, timeout=1)
    pipeline = gateway_pb2.PipelineSpec(
        steps=[waits], turn_timeout=duration_pb2.Duration(seconds=60)
    )
    session = open_session(host, agent=agents[0], pipeline=pipeline)
    talk = Conversation(host, session.id)
    events = talk.turn("hello")
    talk.close()
    assert [(e.step, e.error.code) for e in of(events, "error")] == [("waits", "timeout")]
    assert reply_text(events) == f"{agents[0]} heard: hello"
    assert steps_run(events) == ["waits", "reply"]


def test_a_turn_past_its_time_says_so_once_whichever_step_was_running(
    host: HostProcess, agents: tuple[str, str]
) -> None:
    """Two parallel steps still running when the turn's time runs out: one `error` `timeout` with
    no step -- not one per step, whichever of the task's deadline and the turn's timer is seen
    first -- and the reply step does not run."""
    meet = {"meet": "too-few", "peers": 3}
    pipeline = gateway_pb2.PipelineSpec(
        steps=[
            step(name, params={"label": name, **meet}, parallel_group="both")
            for name in ("left", "right")
        ],
        turn_timeout=duration_pb2.Duration(seconds=1),
    )
    session = open_session(host, agent=agents[0], pipeline=pipeline)
    talk = Conversation(host, session.id)
    for number in range(1, 4):
        events = talk.turn(f"try {number}")
        assert [(e.step, e.error.code) for e in of(events, "error")] == [("", "timeout")]
        assert not of(events, "reply") and steps_run(events) == ["left", "right"]
    talk.close()


@pytest.mark.parametrize(
    ("steps", "field"),
    [
        ([step("x", agent="ghost")], "pipeline.steps[0].agent"),
        ([step("x", action="nope")], "pipeline.steps[0].action"),
        ([step("x", trigger={"when": "__import__('os')"})], "pipeline.steps[0].trigger.when"),
        ([step("x", trigger={"when": "context.a >"})], "pipeline.steps[0].trigger.when"),
        # Nested past MAX_DEPTH (64) within 1000 characters: refused, not a RecursionError.
        ([step("x", trigger={"when": "-" * 998 + "1"})], "pipeline.steps[0].trigger.when"),
        ([step("x", trigger={"when": "not " * 249 + "turn"})], "pipeline.steps[0].trigger.when"),
        ([step("x", trigger={"at_turns": [0]})], "pipeline.steps[0].trigger.at_turns"),
        ([step("a", reply=True), step("b", reply=True)], "pipeline.steps"),
        ([step("a", reply=True), step("b")], "pipeline.steps[0].reply"),
        ([step("same"), step("same")], "pipeline.steps[1].name"),
        ([step("Bad Name")], "pipeline.steps[0].name"),
    ],
)
def test_bad_pipelines_are_refused_with_the_field(
    host: HostProcess, agents: tuple[str, str], steps: list[gateway_pb2.PipelineStep], field: str
) -> None:
    with pytest.raises(grpc.RpcError) as error:
        open_session(host, agent=agents[0], pipeline=gateway_pb2.PipelineSpec(steps=steps))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    found = details(error.value)
    assert found["ErrorInfo"].reason == "INVALID_PIPELINE"
    assert field in [v.field for v in found["BadRequest"].field_violations]
