"""Turn pipelines: which agents run on a user turn, in what order, and when.

A pipeline is checked once, when the session opens: every step names a
deployed agent (and one of its actions, when the agent has said hello), the
triggers parse, at most one step replies and it comes last. Problems are
reported together as field violations. At run time a step runs on a turn
when every trigger it sets holds; consecutive steps of one parallel group
run concurrently.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ether_host.errors import FieldViolation, InvalidArgument
from ether_host.gateway.conditions import Condition, ConditionError
from ether_host.reasons import Reason
from ether_host.supervisor import Supervisor
from ether_host.value_levels import MAX_VALUE_LEVELS, OBJECT_LEVELS, nests_too_deep

STEP_NAME = re.compile(r"^[a-z0-9_-]{1,64}$")
REPLY_STEP = "reply"
MAX_STEPS = 64
MAX_TURN_TIMEOUT = 3600.0


@dataclass(frozen=True)
class Trigger:
    """When a step runs; every rule that is set must hold."""

    every: int = 0
    at_turns: tuple[int, ...] = ()
    when: Condition | None = None

    def holds(self, turn: int, scope: dict[str, Any]) -> bool:
        if self.every and turn % self.every:
            return False
        if self.at_turns and turn not in self.at_turns:
            return False
        return self.when is None or self.when.holds(scope)

    def describe(self) -> dict[str, Any]:
        return {
            "every": self.every,
            "at_turns": list(self.at_turns),
            "when": self.when.text if self.when else "",
        }


@dataclass(frozen=True)
class Step:
    """One agent task of a turn."""

    name: str
    agent: str = ""  # empty on the reply step: the session's gateway agent
    action: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    parallel_group: str = ""
    trigger: Trigger | None = None
    reply: bool = False
    output_key: str = ""
    timeout: float | None = None  # seconds


@dataclass(frozen=True)
class Pipeline:
    """The steps of every turn; the last one replies."""

    steps: tuple[Step, ...]
    turn_timeout: float | None = None
    implicit_reply: bool = True  # no step replies: the gateway agent answers after the steps

    def all_steps(self) -> tuple[Step, ...]:
        """The steps with the implicit reply step appended when there is one."""
        if self.implicit_reply:
            return (*self.steps, Step(REPLY_STEP, reply=True))
        return self.steps

    def groups(self) -> list[list[Step]]:
        """Steps in run order, consecutive steps of one parallel group together."""
        out: list[list[Step]] = []
        for step in self.all_steps():
            if out and step.parallel_group and out[-1][0].parallel_group == step.parallel_group:
                out[-1].append(step)
            else:
                out.append([step])
        return out


DEFAULT = Pipeline(())


def build_pipeline(
    raw: dict[str, Any] | None,
    supervisor: Supervisor,
    elsewhere: Mapping[str, list[str]] | None = None,
) -> Pipeline:
    """Check a pipeline spec (plain values, as the transport decoded it); INVALID_ARGUMENT lists every problem."""
    if not raw or not raw.get("steps"):
        turn_timeout = (raw or {}).get("turn_timeout")
        problems: list[FieldViolation] = []
        timeout = _timeout(turn_timeout, "pipeline.turn_timeout", MAX_TURN_TIMEOUT, problems)
        _raise(problems)
        return Pipeline((), timeout)
    problems = []
    raw_steps = list(raw.get("steps") or [])
    if len(raw_steps) > MAX_STEPS:
        problems.append(FieldViolation("pipeline.steps", f"at most {MAX_STEPS} steps"))
    seen: set[str] = set()
    steps = []
    replies = [i for i, s in enumerate(raw_steps) if s.get("reply")]
    if len(replies) > 1:
        problems.append(
            FieldViolation("pipeline.steps", f"{len(replies)} steps set reply; at most one may")
        )
    elif replies and replies[0] != len(raw_steps) - 1:
        problems.append(
            FieldViolation(
                f"pipeline.steps[{replies[0]}].reply", "the reply step must be the last step"
            )
        )
    for index, item in enumerate(raw_steps):
        steps.append(_step(index, item, supervisor, elsewhere or {}, seen, problems))
    timeout = _timeout(raw.get("turn_timeout"), "pipeline.turn_timeout", MAX_TURN_TIMEOUT, problems)
    _raise(problems)
    return Pipeline(tuple(steps), timeout, implicit_reply=not replies)


def _step(
    index: int,
    item: dict[str, Any],
    supervisor: Supervisor,
    elsewhere: Mapping[str, list[str]],
    seen: set[str],
    problems: list[FieldViolation],
) -> Step:
    """``elsewhere``: the agents only other hosts of the cluster run, with their actions."""
    where = f"pipeline.steps[{index}]"
    name = str(item.get("name") or "")
    reply = bool(item.get("reply"))
    if not STEP_NAME.match(name):
        problems.append(FieldViolation(f"{where}.name", "required: 1-64 characters of a-z 0-9 _ -"))
    elif name in seen:
        problems.append(FieldViolation(f"{where}.name", f"{name!r} is used by an earlier step"))
    elif name == REPLY_STEP and not reply:
        problems.append(
            FieldViolation(f"{where}.name", f"{REPLY_STEP!r} is reserved for the reply step")
        )
    seen.add(name)
    agent_name = str(item.get("agent") or "")
    action = str(item.get("action") or "")
    if not agent_name and not reply:
        problems.append(
            FieldViolation(f"{where}.agent", "required (only the reply step may leave it empty)")
        )
    elif agent_name:
        names: list[str] | None = None
        if agent_name in supervisor.agents:
            names = [a.name for a in supervisor.get(agent_name).actions]
        elif agent_name in elsewhere:
            names = list(elsewhere[agent_name])
        if names is None:
            known = ", ".join(sorted({*supervisor.agents, *elsewhere})) or "none"
            problems.append(
                FieldViolation(
                    f"{where}.agent", f"no agent named {agent_name!r} (deployed: {known})"
                )
            )
        else:
            if names and action and action not in names:
                problems.append(
                    FieldViolation(
                        f"{where}.action",
                        f"{agent_name} has no action {action!r}; its actions: {', '.join(names)}",
                    )
                )
            elif len(names) > 1 and not action:
                problems.append(
                    FieldViolation(
                        f"{where}.action",
                        f"required: {agent_name} has several actions ({', '.join(names)})",
                    )
                )
    trigger = _trigger(where, item.get("trigger"), problems)
    group = str(item.get("parallel_group") or "")
    if reply and group:
        problems.append(FieldViolation(f"{where}.parallel_group", "the reply step runs alone"))
    if reply and trigger is not None:
        problems.append(FieldViolation(f"{where}.trigger", "the reply step runs on every turn"))
    params = item.get("params") or {}
    if not isinstance(params, dict):
        problems.append(FieldViolation(f"{where}.params", "a JSON object"))
        params = {}
    elif nests_too_deep(params):  # GetSession shows them as a Struct: one no client could decode
        problems.append(
            FieldViolation(
                f"{where}.params",
                "nests objects and lists deeper than a protobuf Struct can carry to a client "
                f"(at most {MAX_VALUE_LEVELS} levels: an object takes {OBJECT_LEVELS}, a list 2, "
                "the params themselves an object)",
            )
        )
    return Step(
        name=name,
        agent=agent_name,
        action=action,
        params=params,
        parallel_group=group,
        trigger=trigger,
        reply=reply,
        output_key=str(item.get("output_key") or ""),
        timeout=_timeout(item.get("timeout"), f"{where}.timeout", MAX_TURN_TIMEOUT, problems),
    )


def _trigger(
    where: str, raw: dict[str, Any] | None, problems: list[FieldViolation]
) -> Trigger | None:
    if not raw:
        return None
    every = int(raw.get("every") or 0)
    if every < 0:
        problems.append(
            FieldViolation(f"{where}.trigger.every", "0 (no cadence) or a positive number of turns")
        )
    at_turns = tuple(int(t) for t in raw.get("at_turns") or ())
    if any(t < 1 for t in at_turns):
        problems.append(FieldViolation(f"{where}.trigger.at_turns", "turn numbers start at 1"))
    when = None
    text = str(raw.get("when") or "")
    if text:
        try:
            when = Condition(text)
        except ConditionError as error:
            problems.append(FieldViolation(f"{where}.trigger.when", str(error)))
    if not every and not at_turns and when is None:
        return None
    return Trigger(max(0, every), at_turns, when)


def _timeout(value: Any, where: str, limit: float, problems: list[FieldViolation]) -> float | None:
    if value is None:
        return None
    seconds = float(value)
    if not 0 < seconds <= limit:
        problems.append(FieldViolation(where, f"more than 0 and at most {limit:g} seconds"))
        return None
    return seconds


def _raise(problems: list[FieldViolation]) -> None:
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InvalidArgument(
            f"the pipeline is not valid: {first.field}: {first.description}{more}",
            reason=Reason.INVALID_PIPELINE,
            violations=problems,
        )


def describe(pipeline: Pipeline) -> dict[str, Any]:
    """The pipeline as plain values again (for GetSession)."""
    return {
        "steps": [
            {
                "name": s.name,
                "agent": s.agent,
                "action": s.action,
                "params": s.params,
                "parallel_group": s.parallel_group,
                "trigger": s.trigger.describe() if s.trigger else None,
                "reply": s.reply,
                "output_key": s.output_key,
                "timeout": s.timeout,
            }
            for s in pipeline.steps
        ],
        "turn_timeout": pipeline.turn_timeout,
    }


def restore_pipeline(described: dict[str, Any]) -> Pipeline:
    """A pipeline from :func:`describe`, as a stored session kept it. It was checked when the
    session opened; its agents are not looked up again (after a restart they may not be
    deployed yet: a step then fails as it would if the agent had been removed)."""
    problems: list[FieldViolation] = []
    steps = tuple(
        Step(
            name=str(s["name"]),
            agent=str(s.get("agent") or ""),
            action=str(s.get("action") or ""),
            params=dict(s.get("params") or {}),
            parallel_group=str(s.get("parallel_group") or ""),
            trigger=_trigger(f"pipeline.steps[{index}]", s.get("trigger"), problems),
            reply=bool(s.get("reply")),
            output_key=str(s.get("output_key") or ""),
            timeout=s.get("timeout"),
        )
        for index, s in enumerate(described.get("steps") or [])
    )
    _raise(problems)
    return Pipeline(
        steps, described.get("turn_timeout"), implicit_reply=not any(s.reply for s in steps)
    )
