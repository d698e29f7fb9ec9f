"""Protobuf <-> domain conversions of GatewayService."""

from __future__ import annotations

from typing import Any

from google.protobuf import timestamp_pb2

from ether.v1 import agent_io_pb2, common_pb2, gateway_pb2
from ether_host.gateway import (
    ALLOWED,
    OPEN,
    AuditRecord,
    Change,
    Message,
    Session,
    SessionEvent,
    SessionNotify,
    describe_pipeline,
)
from ether_host.gateway import events as ev
from ether_host.transport import convert

_TASK_STATUS = {
    "SUCCESS": agent_io_pb2.TASK_STATUS_SUCCESS,
    "ERROR": agent_io_pb2.TASK_STATUS_ERROR,
    "PARTIAL": agent_io_pb2.TASK_STATUS_PARTIAL,
}


def epoch(stamp: timestamp_pb2.Timestamp) -> float:
    return stamp.seconds + stamp.nanos / 1e9


def _value(message: Any, field: str, value: Any) -> None:
    if value is not None:
        getattr(message, field).CopyFrom(convert.to_value(value))


# -- pipelines -------------------------------------------------------------------------------


def pipeline_from(spec: gateway_pb2.PipelineSpec) -> dict[str, Any]:
    """A PipelineSpec as the plain values the gateway checks."""
    steps = []
    for step in spec.steps:
        trigger = None
        if step.HasField("trigger"):
            trigger = {
                "every": step.trigger.every,
                "at_turns": list(step.trigger.at_turns),
                "when": step.trigger.when,
            }
        steps.append(
            {
                "name": step.name,
                "agent": step.agent,
                "action": step.action,
                "params": convert.struct_to_dict(step.params),
                "parallel_group": step.parallel_group,
                "trigger": trigger,
                "reply": step.reply,
                "output_key": step.output_key,
                "timeout": convert.seconds(step.timeout) if step.HasField("timeout") else None,
            }
        )
    return {
        "steps": steps,
        "turn_timeout": convert.seconds(spec.turn_timeout)
        if spec.HasField("turn_timeout")
        else None,
    }


def pipeline_to(values: dict[str, Any]) -> gateway_pb2.PipelineSpec:
    spec = gateway_pb2.PipelineSpec()
    for item in values["steps"]:
        step = spec.steps.add(
            name=item["name"],
            agent=item["agent"],
            action=item["action"],
            params=convert.dict_to_struct(item["params"]),
            parallel_group=item["parallel_group"],
            reply=item["reply"],
            output_key=item["output_key"],
        )
        if item["trigger"]:
            step.trigger.CopyFrom(gateway_pb2.PipelineTrigger(**item["trigger"]))
        if item["timeout"] is not None:
            step.timeout.CopyFrom(convert.duration(item["timeout"]))
    if values["turn_timeout"] is not None:
        spec.turn_timeout.CopyFrom(convert.duration(values["turn_timeout"]))
    return spec


# -- sessions --------------------------------------------------------------------------------


def session(value: Session) -> gateway_pb2.Session:
    message = gateway_pb2.Session(
        id=value.id,
        owner=value.owner,
        agent=value.agent,
        capability=value.capability,
        state=gateway_pb2.SESSION_STATE_OPEN
        if value.state == OPEN
        else gateway_pb2.SESSION_STATE_CLOSED,
        metadata=convert.dict_to_struct(value.metadata),
        turns=value.turns,
        context_version=value.context.version,
        last_sequence=value.events.last_sequence,
        created_at=convert.timestamp(value.created_at),
        last_activity_at=convert.timestamp(value.last_activity_at),
        idle_timeout=convert.duration(value.idle_timeout),
    )
    if value.pipeline.steps or value.pipeline.turn_timeout is not None:
        message.pipeline.CopyFrom(pipeline_to(describe_pipeline(value.pipeline)))
    if value.closed_at is not None:
        message.closed_at.CopyFrom(convert.timestamp(value.closed_at))
    if value.notify:
        message.notify.CopyFrom(
            common_pb2.Notify(
                webhook_url=value.notify.webhook_url, reply_topic=value.notify.reply_topic
            )
        )
    return message


def session_notify(message: common_pb2.Notify) -> SessionNotify:
    """Where OpenSession asks for the session's turns and closing to go (empty: nowhere)."""
    return SessionNotify(webhook_url=message.webhook_url, reply_topic=message.reply_topic)


def change(value: Change) -> gateway_pb2.ContextChange:
    return gateway_pb2.ContextChange(
        version=value.version,
        keys=list(value.keys),
        values=convert.dict_to_struct(value.values),
        author=value.author,
    )


def converse_event(sequence: int, event: SessionEvent) -> gateway_pb2.ConverseResponse:
    out = gateway_pb2.ConverseResponse(
        sequence=sequence, time=convert.timestamp(event.time), turn=event.turn
    )
    data = event.data
    if event.kind == ev.ACCEPTED:
        out.accepted.CopyFrom(gateway_pb2.TurnAccepted(**data))
    elif event.kind == ev.REPLY:
        out.reply.CopyFrom(
            gateway_pb2.AgentReply(agent=data["agent"], text=data["text"], partial=data["partial"])
        )
        _value(out.reply, "data", data["data"])
    elif event.kind == ev.CONTEXT_CHANGED:
        out.context_changed.CopyFrom(change(data))
    elif event.kind == ev.PROGRESS:
        out.progress.CopyFrom(gateway_pb2.TurnProgress(**data))
    elif event.kind == ev.ERROR:
        out.error.CopyFrom(
            gateway_pb2.TurnError(
                step=data["step"],
                error=agent_io_pb2.TaskError(
                    code=data["code"],
                    message=data["message"],
                    details=convert.dict_to_struct(data["details"]),
                    retryable=data["retryable"],
                ),
            )
        )
    elif event.kind == ev.FAILOVER:
        out.agent_failover.CopyFrom(gateway_pb2.AgentFailover(**data))
    elif event.kind == ev.CUSTOM:
        out.custom.CopyFrom(gateway_pb2.CustomEvent(type=data["type"], agent=data["agent"]))
        _value(out.custom, "data", data["data"])
    elif event.kind == ev.STEP_COMPLETED:
        out.step_completed.CopyFrom(
            gateway_pb2.PipelineStepCompleted(
                step=data["step"],
                agent=data["agent"],
                action=data["action"],
                task_id=data["task_id"],
                status=_TASK_STATUS[data["status"]],
                latency=convert.duration(data["latency"]),
            )
        )
    elif event.kind == ev.TURN_COMPLETED:
        out.turn_completed.CopyFrom(
            gateway_pb2.TurnCompleted(
                latency=convert.duration(data["latency"]), steps_run=data["steps_run"]
            )
        )
    elif event.kind == ev.SESSION_CLOSED:
        out.session_closed.CopyFrom(gateway_pb2.SessionClosed(reason=data["reason"]))
    return out


def context_event(kind: str, item: Any) -> gateway_pb2.WatchContextResponse:
    out = gateway_pb2.WatchContextResponse()
    if kind == "snapshot":
        document, version = item
        out.time.GetCurrentTime()
        out.snapshot.CopyFrom(
            gateway_pb2.ContextSnapshot(context=convert.dict_to_struct(document), version=version)
        )
    elif kind == "change":
        out.time.CopyFrom(convert.timestamp(item.time))
        out.change.CopyFrom(change(item))
    else:
        out.time.GetCurrentTime()
        out.session_closed.CopyFrom(gateway_pb2.SessionClosed(reason=item))
    return out


# -- messaging and audit ---------------------------------------------------------------------


def message(value: Message) -> gateway_pb2.AgentMessage:
    out = gateway_pb2.AgentMessage(
        id=value.id,
        sequence=value.sequence,
        sender=value.sender,
        agent=value.agent,
        topic=value.topic,
        type=value.type,
        correlation_id=value.correlation_id,
        session_id=value.session_id,
        sent_at=convert.timestamp(value.sent_at),
    )
    _value(out, "data", value.data)
    return out


def audit_record(record: AuditRecord) -> gateway_pb2.AuditRecord:
    return gateway_pb2.AuditRecord(
        id=record.id,
        time=convert.timestamp(record.time),
        agent=record.agent,
        task_id=record.task_id,
        session_id=record.session_id,
        method=record.method,
        url=record.url,
        host=record.host,
        port=record.port,
        resolved_address=record.resolved_address,
        decision=gateway_pb2.AUDIT_DECISION_ALLOWED
        if record.decision == ALLOWED
        else gateway_pb2.AUDIT_DECISION_DENIED,
        reason=record.reason,
        rule=record.rule,
        status_code=record.status_code,
        request_bytes=record.request_bytes,
        response_bytes=record.response_bytes,
        duration=convert.duration(record.duration),
        redirect_depth=record.redirect_depth,
        error=record.error,
    )
