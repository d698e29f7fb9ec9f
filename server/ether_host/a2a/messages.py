"""A2A messages and tasks <-> Ether's task contract (docs/interop.md, "A2A", maps each field).

In: the message's parts are the action's params -- one data part holding a JSON object is the
params as they are; text parts (joined by newlines) become ``{"text": ...}`` for an action that
takes a ``text`` parameter (or any params at all). The action is the skill named by the
``skill`` key of the message's metadata (or of the request's), else the agent's only action:
the dispatcher's rule, applied by the dispatcher. Out: the task's output is one artifact
(a text part for a string, else a data part), its failure a status message, and what Ether
measured sits under the ``ether`` key of the task's metadata.
"""

from __future__ import annotations

import uuid
from typing import Any

from a2a.types import a2a_pb2
from a2a.utils.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InvalidParamsError,
)

from ether_host.a2a.tasks import now
from ether_host.agents import ERROR, PARTIAL, TaskResult
from ether_host.errors import EtherError, InvalidArgument, NotFound
from ether_host.supervisor import ActionInfo
from ether_host.transport.convert import to_value, value_to_python
from ether_host.transport.struct_values import NOT_SHOWN, ValueTooDeep, not_shown_note
from ether_host.value_levels import LIST_LEVELS, OBJECT_LEVELS, nests_too_deep

SKILL_KEY = "skill"  # in Message.metadata or SendMessageRequest.metadata: the action to run
TEXT_PARAM = "text"  # the parameter text parts fill
JSON_MODE = "application/json"
TEXT_MODE = "text/plain"
ETHER_KEY = "ether"  # Task.metadata[ETHER_KEY]: what Ether knows of the task


def skill_of(request: a2a_pb2.SendMessageRequest) -> str:
    """The action the message names ('' for none: the agent's only action runs)."""
    for metadata in (request.message.metadata, request.metadata):
        if SKILL_KEY in metadata.fields:
            value = metadata.fields[SKILL_KEY]
            if value.WhichOneof("kind") != "string_value" or not value.string_value:
                raise InvalidParamsError(
                    message=f"metadata {SKILL_KEY!r} must be a string: the name of a skill "
                    "of the agent card (an Ether action)"
                )
            return value.string_value
    return ""


def takes_text(action: ActionInfo) -> bool:
    """Whether text parts suit ``action``: its params take ``text``, or are not described."""
    properties = action.params_schema.get("properties")
    return not properties or TEXT_PARAM in properties


def params_of(message: a2a_pb2.Message, action: ActionInfo | None) -> dict[str, Any]:
    """The params a message's parts carry for ``action`` (None: not known yet)."""
    parts = list(message.parts)
    if not parts:
        raise InvalidParamsError(
            message="message.parts is empty: send one data part (the action's params as a JSON "
            "object) or text parts"
        )
    kinds = [part.WhichOneof("content") for part in parts]
    for part, kind in zip(parts, kinds, strict=True):
        if kind in ("raw", "url"):
            what = part.media_type or ("a file" if kind == "raw" else "a URL")
            raise ContentTypeNotSupportedError(
                message=f"a {kind} part ({what}) cannot be an Ether action's params: send one "
                f"data part ({JSON_MODE}) or text parts ({TEXT_MODE})"
            )
        if kind is None:
            raise InvalidParamsError(message="a part holds no content: set text, data, raw or url")
    if "data" in kinds:
        if len(parts) != 1:
            raise InvalidParamsError(
                message="a message with a data part must hold only that part: the data part is "
                "the action's params; put text in it as a field"
            )
        params = value_to_python(parts[0].data)
        if not isinstance(params, dict):
            raise InvalidParamsError(
                message="the data part must hold a JSON object (the action's params), not "
                f"{type(params).__name__}"
            )
        return params
    if action is not None and not takes_text(action):
        raise ContentTypeNotSupportedError(
            message=f"skill {action.name!r} takes no text: its params are "
            f"{sorted(action.params_schema.get('properties', {}))}; send them as one data part "
            f"({JSON_MODE})"
        )
    return {TEXT_PARAM: "\n".join(part.text for part in parts)}


def refusal(error: EtherError) -> A2AError | None:
    """The A2A error for a message the dispatcher refused before running it (an unknown agent,
    skill or params); None for a refusal that is the task's outcome (a full queue)."""
    if isinstance(error, InvalidArgument | NotFound):
        data = None
        if error.violations:
            data = {
                "errors": [{"field": v.field, "message": v.description} for v in error.violations]
            }
        return InvalidParamsError(message=error.message, data=data)
    return None


def new_task(message: a2a_pb2.Message, task_id: str) -> a2a_pb2.Task:
    """A SUBMITTED task for ``message``, which opens its history."""
    context_id = message.context_id or str(uuid.uuid4())
    task = a2a_pb2.Task(id=task_id, context_id=context_id)
    task.status.state = a2a_pb2.TASK_STATE_SUBMITTED
    task.status.timestamp.CopyFrom(now())
    history = task.history.add()
    history.CopyFrom(message)
    history.task_id = task_id
    history.context_id = context_id
    if not history.message_id:
        history.message_id = str(uuid.uuid4())
    return task


def agent_message(task: a2a_pb2.Task, text: str, data: Any = None) -> a2a_pb2.Message:
    """A message from the agent about ``task`` (a status update's message)."""
    message = a2a_pb2.Message(
        message_id=str(uuid.uuid4()),
        context_id=task.context_id,
        task_id=task.id,
        role=a2a_pb2.ROLE_AGENT,
    )
    if text:
        message.parts.add(text=text)
    if data is not None:
        message.parts.append(_part(data))
    return message


def output_artifact(result: TaskResult) -> a2a_pb2.Artifact | None:
    """The task's output as one artifact; None for a failed task without data."""
    if result.status == ERROR and result.data is None:
        return None
    artifact = a2a_pb2.Artifact(
        artifact_id=f"{result.task_id}-output",
        name="output",
        description=f"the output of {result.agent}.{result.action}",
    )
    artifact.parts.append(_part(result.data))
    return artifact


def result_metadata(result: TaskResult) -> dict[str, Any]:
    """What Ether reports about a finished task, under Task.metadata["ether"]."""
    meta = result.metadata
    found: dict[str, Any] = {
        "task_id": result.task_id,
        "agent": result.agent,
        "action": result.action,
        "status": result.status,
        "duration_ms": round(meta.duration * 1000, 3),
        "cost": meta.cost,
        "pid": meta.pid,
        "attempt": meta.attempt,
    }
    if meta.model:
        found["model"] = meta.model
    if result.next_actions:
        found["next_actions"] = [_shown(proposal) for proposal in result.next_actions]
    if result.status == PARTIAL:
        found["partial"] = True
    return found


# Protobuf levels above a proposal's params in Task.metadata: the metadata (an object), its
# "ether" object, the "next_actions" list, the proposal (an object).
_PARAMS_UNDER = 3 * OBJECT_LEVELS + LIST_LEVELS


def _shown(proposal: dict[str, Any]) -> dict[str, Any]:
    """A proposal as Task.metadata shows it: params too deep for a Struct replaced by a note
    (docs/limits.md), as every reply does; they would make the whole Task undecodable."""
    params = proposal.get("params")
    if nests_too_deep(params, _PARAMS_UNDER):
        note = not_shown_note("the params of this next action", ValueTooDeep())
        return {**proposal, "params": {NOT_SHOWN: note}}
    return proposal


def error_data(result: TaskResult) -> dict[str, Any]:
    error = result.error
    if error is None:
        return {"code": "error", "message": "the task failed"}
    return {
        "code": error.code,
        "message": error.message,
        "details": error.details,
        "retryable": error.retryable,
    }


def set_metadata(task: a2a_pb2.Task, values: dict[str, Any]) -> None:
    task.metadata.update({ETHER_KEY: values})


def _part(data: Any) -> a2a_pb2.Part:
    if isinstance(data, str):
        return a2a_pb2.Part(text=data, media_type=TEXT_MODE)
    return a2a_pb2.Part(data=to_value(data), media_type=JSON_MODE)
