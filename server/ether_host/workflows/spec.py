"""Workflow specs: parse, validate completely, and write back in the API's JSON shape.

A spec arrives as plain data (a WorkflowSpec message as proto3 JSON, or YAML
text loaded by ``source``) and leaves as a ``WorkflowSpec`` or as one
INVALID_ARGUMENT listing every problem as a field violation. Nothing runs
before a spec passes.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ether_host.agents import Budget
from ether_host.errors import FieldViolation, InvalidArgument
from ether_host.reasons import Reason
from ether_host.workflows.checks import Checker, join, kind, suggest
from ether_host.workflows.expr import Condition, ExprError, parse_condition
from ether_host.workflows.limits import MAX_SPEC_BYTES
from ether_host.workflows.paths import DataPath, PathError, parse_path
from ether_host.workflows.source import Source, check_shape
from ether_host.workflows.stage_graph import StageLayout, refused_reference, stage_edges

STAGE_NAME = re.compile(r"^[a-z0-9_-]{1,64}$")
PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
DEFAULT_STAGE_CONCURRENCY = 16
DEFAULT_RUN_CONCURRENCY = 64
MAX_CONCURRENCY = 10000
STOP, CONTINUE = "STOP", "CONTINUE"
VIOLATION_CHARS = 400  # longest description of one problem
REPORT_CHARS = 3000  # field paths and descriptions of all the problems listed in one error

# What the validator needs to know about agents: None for an unknown agent,
# else (its action names, or [] before its first hello).
Catalog = Callable[[str], "list[str] | None"]


@dataclass
class RetrySpec:
    """Retries of failed tasks of idempotent actions."""

    max_attempts: int = 1
    initial_backoff: float = 1.0
    max_backoff: float = 60.0
    multiplier: float = 2.0
    retryable_only: bool = False

    def delay(self, attempt: int) -> float:
        """Backoff after failed attempt number ``attempt`` (1-based)."""
        return float(min(self.max_backoff, self.initial_backoff * self.multiplier ** (attempt - 1)))


@dataclass
class FollowSpec:
    """Bounds for following the next_actions that agents propose."""

    max_actions: int = 10
    max_depth: int = 1
    allowed_agents: list[str] = field(default_factory=list)


@dataclass
class ActionRef:
    """One action a stage runs for each input."""

    agent: str
    action: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class StageSpec:
    """One validated stage."""

    name: str
    description: str = ""
    agent: str = ""
    action: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    inputs: list[Any] = field(default_factory=list)
    input_from: DataPath | None = None
    input_param: str = "input"
    parallel: bool = False
    max_concurrency: int = 0
    map: list[ActionRef] = field(default_factory=list)
    reduce: bool = False
    reduce_include_failed: bool = False
    reduce_outputs: bool = False
    when: Condition | None = None
    on_failure: str = STOP
    retry: RetrySpec | None = None
    budget: Budget = field(default_factory=Budget)
    task_timeout: float | None = None
    follow: FollowSpec | None = None

    @property
    def actions(self) -> list[ActionRef]:
        """What runs for each input: the map, or the stage's own action."""
        return self.map or [ActionRef(self.agent, self.action)]

    def concurrency(self, run_cap: int) -> int:
        if not self.parallel:
            return 1
        return min(self.max_concurrency or DEFAULT_STAGE_CONCURRENCY, run_cap)


@dataclass
class WorkflowSpec:
    """A validated workflow, plus its canonical API JSON (the Run's ``spec``)."""

    name: str
    description: str
    stages: list[StageSpec]
    budget: Budget
    default_retry: RetrySpec | None
    max_concurrency: int
    canonical: dict[str, Any]

    def stage(self, name: str) -> StageSpec | None:
        return next((s for s in self.stages if s.name == name), None)


def duration_json(seconds: float) -> str:
    """Seconds as a proto3 JSON Duration ("1.5s")."""
    text = f"{seconds:.9f}".rstrip("0").rstrip(".")
    return f"{text}s"


def budget_json(budget: Budget) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if budget.max_cost is not None:
        out["max_cost"] = budget.max_cost
    if budget.max_time is not None:
        out["max_time"] = duration_json(budget.max_time)
    if budget.max_iterations is not None:
        out["max_iterations"] = budget.max_iterations
    if budget.max_tasks is not None:
        out["max_tasks"] = budget.max_tasks
    return out


def _retry(check: Checker, value: Any, path: str) -> RetrySpec | None:
    if value is None:
        return None
    raw = check.mapping(
        value,
        path,
        ("max_attempts", "initial_backoff", "max_backoff", "multiplier", "retryable_only"),
    )
    retry = RetrySpec(
        max_attempts=check.integer(raw.get("max_attempts"), join(path, "max_attempts"), 0, 10) or 1,
        retryable_only=check.boolean(raw.get("retryable_only"), join(path, "retryable_only")),
    )
    initial = check.duration(raw.get("initial_backoff"), join(path, "initial_backoff"))
    maximum = check.duration(raw.get("max_backoff"), join(path, "max_backoff"))
    retry.initial_backoff = 1.0 if initial is None else initial
    retry.max_backoff = 60.0 if maximum is None else maximum
    multiplier = check.number(raw.get("multiplier"), join(path, "multiplier"))
    if multiplier is not None and 0 < multiplier < 1:
        check.bad(
            join(path, "multiplier"),
            f"must be at least 1 (or 0 for the default 2), got {multiplier:g}",
        )
    retry.multiplier = multiplier or 2.0
    return retry


STAGE_FIELDS = (
    "name",
    "description",
    "agent",
    "action",
    "params",
    "inputs",
    "input_from",
    "input_param",
    "parallel",
    "max_concurrency",
    "map",
    "reduce",
    "when",
    "on_failure",
    "retry",
    "budget",
    "task_timeout",
    "follow_next_actions",
)
SPEC_FIELDS = ("name", "description", "stages", "budget", "default_retry", "max_concurrency")


def parse_spec(source: Source, catalog: Catalog) -> WorkflowSpec:
    """Validate a whole spec; INVALID_ARGUMENT listing every problem found."""
    if not source.bounded:  # given as data: text was bounded while it was read
        check_shape(source.data)
    check = Checker(source)
    raw = source.data
    if not isinstance(raw, dict):
        check.bad("spec", f"expected a mapping with keys {', '.join(SPEC_FIELDS)}, got {kind(raw)}")
        raise _invalid(check.violations)
    raw = check.mapping(raw, "", SPEC_FIELDS)
    name = check.text(raw.get("name"), "name", 128)
    description = check.text(raw.get("description"), "description")
    budget = check.budget(raw.get("budget"), "budget")
    default_retry = _retry(check, raw.get("default_retry"), "default_retry")
    run_cap = check.integer(raw.get("max_concurrency"), "max_concurrency", 0, MAX_CONCURRENCY)
    stages_raw = raw.get("stages")
    if not isinstance(stages_raw, list) or not stages_raw:
        check.bad("stages", "a workflow needs at least one stage (a list of mappings)")
        stages_raw = []
    layout = StageLayout(
        [s.get("name") if isinstance(s, dict) else None for s in stages_raw],
        stage_edges(stages_raw),
    )
    for position, stage_name in enumerate(layout.names):
        if isinstance(stage_name, str):
            layout.first.setdefault(stage_name, position)
    stages = [
        _stage(check, catalog, item, f"stages[{i}]", i, layout) for i, item in enumerate(stages_raw)
    ]
    if check.violations:
        raise _invalid(check.violations, check.limit)
    spec = WorkflowSpec(
        name, description, stages, budget, default_retry, run_cap or DEFAULT_RUN_CONCURRENCY, {}
    )
    spec.canonical = spec_json(spec)
    return spec


def _stage(
    check: Checker, catalog: Catalog, value: Any, path: str, index: int, layout: StageLayout
) -> StageSpec:
    raw = check.mapping(value, path, STAGE_FIELDS)
    name = check.text(raw.get("name"), f"{path}.name", 64)
    if not STAGE_NAME.match(name):
        check.bad(f"{path}.name", f"stage name {name!r} must be 1-64 characters of a-z 0-9 _ -")
    elif layout.first[name] != index:
        check.bad(
            f"{path}.name", f"stage name {name!r} is already used by stages[{layout.first[name]}]"
        )
    stage = StageSpec(
        name=name,
        description=check.text(raw.get("description"), f"{path}.description"),
        agent=check.text(raw.get("agent"), f"{path}.agent", 64),
        action=check.text(raw.get("action"), f"{path}.action", 128),
        params=check.params(raw.get("params"), f"{path}.params"),
        parallel=check.boolean(raw.get("parallel"), f"{path}.parallel"),
        max_concurrency=check.integer(
            raw.get("max_concurrency"), f"{path}.max_concurrency", 0, MAX_CONCURRENCY
        ),
        retry=_retry(check, raw.get("retry"), f"{path}.retry"),
        budget=check.budget(raw.get("budget"), f"{path}.budget"),
        task_timeout=check.duration(raw.get("task_timeout"), f"{path}.task_timeout"),
    )
    input_param = check.text(raw.get("input_param"), f"{path}.input_param", 64)
    if input_param and not PARAM_NAME.match(input_param):
        check.bad(
            f"{path}.input_param",
            f"{input_param!r} is not a parameter name (letters, digits, _ and -)",
        )
    stage.input_param = input_param or "input"
    _inputs(check, stage, raw, path, index, layout)
    _actions(check, catalog, stage, raw, path)
    _policy(check, catalog, stage, raw, path)
    when = check.text(raw.get("when"), f"{path}.when", MAX_SPEC_BYTES)  # parse: MAX_WHEN_BYTES
    if when.strip():
        try:
            stage.when = parse_condition(when)
        except ExprError as error:
            check.bad(f"{path}.when", f"{error}")
            check.limit = check.limit or error.limit
        else:
            for ref in stage.when.refs:
                problem = refused_reference(ref.stage, name, index, layout)
                if problem:
                    check.bad(f"{path}.when", problem)
    return stage


def _inputs(
    check: Checker,
    stage: StageSpec,
    raw: dict[str, Any],
    path: str,
    index: int,
    layout: StageLayout,
) -> None:
    names = layout.names
    inputs = raw.get("inputs")
    if inputs is not None:
        if not isinstance(inputs, list):
            check.bad(
                f"{path}.inputs", f"expected a list (one task per element), got {kind(inputs)}"
            )
        elif not inputs and isinstance(raw.get("inputs"), list) and check.source.marks:
            check.bad(f"{path}.inputs", "is empty; leave it out to run one task without input")
        elif check.json(inputs, f"{path}.inputs"):
            stage.inputs = copy.deepcopy(inputs)
    input_from = check.text(raw.get("input_from"), f"{path}.input_from", 1024)
    if input_from:
        try:
            stage.input_from = parse_path(input_from)
        except PathError as error:
            check.bad(f"{path}.input_from", str(error))
        else:
            problem = refused_reference(stage.input_from.stage, stage.name, index, layout)
            if problem:
                check.bad(f"{path}.input_from", problem)
                stage.input_from = None
    if stage.inputs and input_from:
        check.bad(
            f"{path}.input_from",
            "inputs and input_from are exclusive: give literal inputs or a source",
        )
    reduce = raw.get("reduce")
    if reduce is not None and reduce is not False:
        if reduce is True or reduce == "all" or reduce == {}:
            stage.reduce = True
        elif isinstance(reduce, dict):
            body = check.mapping(reduce, f"{path}.reduce", ("include_failed", "outputs"))
            stage.reduce = True
            stage.reduce_include_failed = check.boolean(
                body.get("include_failed"), f"{path}.reduce.include_failed"
            )
            stage.reduce_outputs = check.boolean(body.get("outputs"), f"{path}.reduce.outputs")
        else:
            check.bad(
                f"{path}.reduce",
                f"expected true, 'all' or a mapping {{include_failed, outputs}}, got {kind(reduce)}",
            )
    if stage.reduce:
        if stage.inputs:
            check.bad(
                f"{path}.reduce", "reduce and inputs are exclusive: a reduce reads an earlier stage"
            )
        if raw.get("map"):
            check.bad(f"{path}.reduce", "reduce and map are exclusive")
        if not input_from and index == 0:
            check.bad(
                f"{path}.reduce", "the first stage cannot reduce: there is no earlier stage to read"
            )
        elif not input_from and isinstance(names[index - 1], str):
            stage.input_from = DataPath(names[index - 1], ())


def _actions(
    check: Checker, catalog: Catalog, stage: StageSpec, raw: dict[str, Any], path: str
) -> None:
    mapped = raw.get("map")
    if mapped is not None and not isinstance(mapped, list):
        check.bad(
            f"{path}.map", f"expected a list of {{agent, action, params}}, got {kind(mapped)}"
        )
        mapped = None
    if mapped:
        if stage.action:
            check.bad(f"{path}.action", "action and map are exclusive: put the actions in map")
        for position, item in enumerate(mapped):
            where = f"{path}.map[{position}]"
            body = check.mapping(item, where, ("agent", "action", "params"))
            ref = ActionRef(
                check.text(body.get("agent"), f"{where}.agent", 64) or stage.agent,
                check.text(body.get("action"), f"{where}.action", 128),
                check.params(body.get("params"), f"{where}.params"),
            )
            if not ref.agent:
                check.bad(f"{where}.agent", "no agent: name one here or on the stage")
            else:
                ref.action = _resolve_action(
                    check,
                    catalog,
                    ref.agent,
                    ref.action,
                    f"{where}.action",
                    f"{where}.agent" if body.get("agent") else f"{path}.agent",
                )
            stage.map.append(ref)
        return
    if not stage.agent:
        check.bad(f"{path}.agent", "required: name the agent that runs this stage (or use map)")
        return
    stage.action = _resolve_action(
        check, catalog, stage.agent, stage.action, f"{path}.action", f"{path}.agent"
    )


def _resolve_action(
    check: Checker, catalog: Catalog, agent: str, action: str, action_path: str, agent_path: str
) -> str:
    actions = catalog(agent)
    if actions is None:
        check.bad(
            agent_path, f"unknown agent {agent!r}: deploy it first (SupervisorService.DeployAgent)"
        )
        return action
    if not actions:  # deployed but not started yet: its actions are checked when tasks run
        return action
    if not action:
        if len(actions) == 1:
            return actions[0]
        check.bad(
            action_path, f"required: agent {agent!r} has several actions: {', '.join(actions)}"
        )
        return action
    if action not in actions:
        hint = suggest(action, tuple(actions))
        check.bad(
            action_path,
            f"agent {agent!r} has no action {action!r}{hint}; its actions: {', '.join(actions)}",
        )
    return action


def _policy(
    check: Checker, catalog: Catalog, stage: StageSpec, raw: dict[str, Any], path: str
) -> None:
    policy = raw.get("on_failure")
    if policy is not None:
        text = str(policy).upper().removeprefix("FAILURE_POLICY_")
        if text in ("STOP", "UNSPECIFIED"):
            stage.on_failure = STOP
        elif text == "CONTINUE":
            stage.on_failure = CONTINUE
        else:
            check.bad(f"{path}.on_failure", f"expected stop or continue, got {policy!r}")
    follow = raw.get("follow_next_actions")
    if follow is not None and follow is not False:
        where = f"{path}.follow_next_actions"
        body = check.mapping(
            {} if follow is True else follow, where, ("max_actions", "max_depth", "allowed_agents")
        )
        stage.follow = FollowSpec(
            max_actions=check.integer(body.get("max_actions"), f"{where}.max_actions", 0, 1000)
            or 10,
            max_depth=check.integer(body.get("max_depth"), f"{where}.max_depth", 0, 10) or 1,
        )
        allowed = body.get("allowed_agents") or []
        if not isinstance(allowed, list) or not all(isinstance(a, str) for a in allowed):
            check.bad(f"{where}.allowed_agents", "expected a list of agent names")
        else:
            for position, agent in enumerate(allowed):
                if catalog(agent) is None:
                    check.bad(f"{where}.allowed_agents[{position}]", f"unknown agent {agent!r}")
            stage.follow.allowed_agents = list(allowed)


def _invalid(
    violations: list[FieldViolation], limit: tuple[str, int] | None = None
) -> InvalidArgument:
    """The error for ``violations``, the first ones as fit in REPORT_CHARS: the details travel
    in the status trailers, which gRPC clients refuse past 8 KiB by default."""
    kept: list[FieldViolation] = []
    room = REPORT_CHARS
    for violation in violations:
        clipped = FieldViolation(
            _clip(violation.field, VIOLATION_CHARS // 4), _clip(violation.description)
        )
        room -= len(clipped.field) + len(clipped.description)
        if kept and room < 0:
            break
        kept.append(clipped)
    first = kept[0]
    more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
    if len(kept) < len(violations):
        kept.append(
            FieldViolation("spec", f"{len(violations) - len(kept)} more problems not listed")
        )
    return InvalidArgument(
        f"invalid workflow spec: {first.field}: {first.description}{more}",
        reason=Reason.INVALID_WORKFLOW,
        metadata={} if limit is None else {"limit": limit[0], "max": str(limit[1])},
        violations=kept,
    )


def _clip(text: str, limit: int = VIOLATION_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _retry_json(retry: RetrySpec) -> dict[str, Any]:
    return {
        "max_attempts": retry.max_attempts,
        "initial_backoff": duration_json(retry.initial_backoff),
        "max_backoff": duration_json(retry.max_backoff),
        "multiplier": retry.multiplier,
        "retryable_only": retry.retryable_only,
    }


def spec_json(spec: WorkflowSpec) -> dict[str, Any]:
    """The spec as proto3 JSON of ether.v1.WorkflowSpec (lower_snake names, defaults left out)."""
    stages = []
    for stage in spec.stages:
        out: dict[str, Any] = {"name": stage.name}
        for key in ("description", "agent", "action"):
            if getattr(stage, key):
                out[key] = getattr(stage, key)
        if stage.params:
            out["params"] = stage.params
        if stage.inputs:
            out["inputs"] = stage.inputs
        if stage.input_from is not None:
            out["input_from"] = str(stage.input_from)
        if stage.input_param != "input":
            out["input_param"] = stage.input_param
        if stage.parallel:
            out["parallel"] = True
        if stage.max_concurrency:
            out["max_concurrency"] = stage.max_concurrency
        if stage.map:
            out["map"] = [
                {"agent": a.agent, "action": a.action, **({"params": a.params} if a.params else {})}
                for a in stage.map
            ]
        if stage.reduce:
            out["reduce"] = {
                k: True
                for k, v in (
                    ("include_failed", stage.reduce_include_failed),
                    ("outputs", stage.reduce_outputs),
                )
                if v
            }
        if stage.when is not None:
            out["when"] = stage.when.text
        out["on_failure"] = f"FAILURE_POLICY_{stage.on_failure}"
        if stage.retry is not None:
            out["retry"] = _retry_json(stage.retry)
        if budget_json(stage.budget):
            out["budget"] = budget_json(stage.budget)
        if stage.task_timeout is not None:
            out["task_timeout"] = duration_json(stage.task_timeout)
        if stage.follow is not None:
            out["follow_next_actions"] = {
                "max_actions": stage.follow.max_actions,
                "max_depth": stage.follow.max_depth,
                "allowed_agents": stage.follow.allowed_agents,
            }
        stages.append(out)
    result: dict[str, Any] = {"name": spec.name, "stages": stages}
    if spec.description:
        result["description"] = spec.description
    if budget_json(spec.budget):
        result["budget"] = budget_json(spec.budget)
    if spec.default_retry is not None:
        result["default_retry"] = _retry_json(spec.default_retry)
    result["max_concurrency"] = spec.max_concurrency
    return result
