"""Checks done before a task is dispatched: action, params schema, budget."""

from __future__ import annotations

import json
import re
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from ether_host.agents.model import Budget, TaskInput
from ether_host.errors import FailedPrecondition, FieldViolation, InvalidArgument
from ether_host.reasons import Reason
from ether_host.supervisor import ActionInfo, ManagedAgent

TASK_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_validators: dict[str, Draft202012Validator | None] = {}


def check_task_id(task_id: str) -> None:
    if not TASK_ID.match(task_id):
        raise InvalidArgument(
            f"task_id {task_id[:40]!r} must be 1-128 characters of A-Z a-z 0-9 . _ : -",
            reason=Reason.INVALID_TASK_ID,
            violations=[FieldViolation("input.task_id", "1-128 characters of A-Z a-z 0-9 . _ : -")],
        )


def check_budget(budget: Budget) -> None:
    if (
        budget.max_cost is None
        and budget.max_time is None
        and budget.max_iterations is None
        and budget.max_tasks is None
    ):
        return  # no limits (most tasks): nothing to check, and no list built per task
    violations = [
        FieldViolation(f"input.context.budget.{name}", "must not be negative")
        for name in ("max_cost", "max_time", "max_iterations", "max_tasks")
        if (value := getattr(budget, name)) is not None and value < 0
    ]
    if violations:
        raise InvalidArgument(
            "budget limits must not be negative: "
            + ", ".join(v.field.rsplit(".", 1)[1] for v in violations),
            reason=Reason.INVALID_BUDGET,
            violations=violations,
        )


def resolve_action(agent: ManagedAgent, task: TaskInput) -> ActionInfo:
    """The action the task names (or the only one); INVALID_ARGUMENT listing the choices."""
    if not task.action and len(agent.actions) == 1:
        return agent.actions[0]
    for action in agent.actions:
        if action.name == task.action:
            return action
    names = [a.name for a in agent.actions]
    what = "names no action" if not task.action else f"has no action {task.action!r}"
    raise InvalidArgument(
        f"agent {agent.name} {what}; its actions are: {', '.join(names) or 'none'}",
        reason=Reason.UNKNOWN_ACTION,
        metadata={"agent": agent.name, "actions": ",".join(names)},
        violations=[FieldViolation("input.action", f"one of: {', '.join(names)}")],
    )


def action_for_retry(
    agent: ManagedAgent, task: TaskInput, action: ActionInfo | None
) -> ActionInfo | None:
    """The action a retry of ``task`` runs: the one first resolved while the agent still
    offers it; otherwise the task's action resolved again and its params checked (the agent's
    actions changed under the task: a hello after the seeds' fallback, a new version)."""
    if not agent.actions or (action is not None and action in agent.actions):
        return action
    again = resolve_action(agent, task)
    check_params(agent, again, task.params)
    return again


# Keys that do not constrain an object: a schema of only these accepts any params.
_NOT_CONSTRAINING = {"type", "title", "description", "$schema", "$id", "additionalProperties"}
# The validator of each schema object, found by identity first: the schema text as a cache key
# is a json.dumps per task, on the hot path. The object is kept to guard against id reuse.
_by_object: dict[int, tuple[dict[str, Any], Draft202012Validator | None]] = {}
_BY_OBJECT_LIMIT = 10_000


def _validator(schema: dict[str, Any]) -> Draft202012Validator | None:
    known = _by_object.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    if (
        schema.get("type") == "object"
        and schema.keys() <= _NOT_CONSTRAINING
        and schema.get("additionalProperties", True) in (True, {})
    ):
        validator = None  # params are always an object: nothing to check
    else:
        key = json.dumps(schema, sort_keys=True)
        if key not in _validators:
            try:
                Draft202012Validator.check_schema(schema)
                _validators[key] = Draft202012Validator(schema)
            except SchemaError:
                _validators[key] = None  # a broken schema: do not block its callers
        validator = _validators[key]
    if len(_by_object) >= _BY_OBJECT_LIMIT:
        _by_object.clear()
    _by_object[id(schema)] = (schema, validator)
    return validator


def check_params(agent: ManagedAgent, action: ActionInfo, params: dict[str, Any]) -> None:
    """INVALID_ARGUMENT with one field violation per schema error; FAILED_PRECONDITION for an
    action listed as unusable."""
    if action.unusable:
        raise FailedPrecondition(
            f"{agent.name}.{action.name} cannot be called: {action.unusable}",
            reason=Reason.ACTION_UNUSABLE,
            resource=("agent", agent.name),
            metadata={"agent": agent.name, "action": action.name},
        )
    if not action.params_schema:
        return
    validator = _validator(action.params_schema)
    if validator is None:
        return
    errors = sorted(validator.iter_errors(params), key=lambda e: list(e.absolute_path))
    if not errors:
        return
    violations = [
        FieldViolation(
            "input.params"
            + "".join(f".{p}" if isinstance(p, str) else f"[{p}]" for p in error.absolute_path),
            error.message,
        )
        for error in errors[:20]
    ]
    first = violations[0]
    raise InvalidArgument(
        f"params of {agent.name}.{action.name} do not match its schema: {first.field}: {first.description}"
        + (f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""),
        reason=Reason.INVALID_PARAMS,
        metadata={"agent": agent.name, "action": action.name},
        violations=violations,
    )
