"""Small helpers to build requests and read outputs in tests."""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf import json_format, struct_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from ether.v1 import agent_io_pb2, common_pb2
from tests.support.host import HostProcess


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(value)
    return message


def nested(levels: int) -> Any:
    """A list holding a list ... ``levels`` lists in all: data as deep as a test needs it
    (each list takes 2 of the 90 protobuf levels a Value may nest, docs/limits.md)."""
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


def agent_input(
    agent: str, action: str = "", params: dict[str, Any] | None = None, **fields: Any
) -> agent_io_pb2.AgentInput:
    return agent_io_pb2.AgentInput(
        agent=agent, action=action, params=struct(params or {}), **fields
    )


def execute(
    host: HostProcess,
    agent: str,
    action: str = "",
    params: dict[str, Any] | None = None,
    timeout: float | None = 30,
    **fields: Any,
) -> agent_io_pb2.AgentOutput:
    request = agent_io_pb2.ExecuteRequest(input=agent_input(agent, action, params, **fields))
    return host.agents.Execute(request, timeout=timeout).output  # type: ignore[no-any-return]


def data(output: agent_io_pb2.AgentOutput) -> Any:
    return json_format.MessageToDict(output.data)


def budget(**limits: Any) -> common_pb2.Budget:
    message = common_pb2.Budget()
    for key, value in limits.items():
        if key == "max_time":
            message.max_time.FromNanoseconds(int(value * 1e9))
        else:
            setattr(message, key, value)
    return message


def details(error: grpc.RpcError) -> dict[str, Any]:
    """The google.rpc details of a failed call, by type name."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    found: dict[str, Any] = {}
    if status is None:
        return found
    for detail in status.details:
        for kind in (
            error_details_pb2.ErrorInfo,
            error_details_pb2.BadRequest,
            error_details_pb2.ResourceInfo,
            error_details_pb2.RetryInfo,
            error_details_pb2.QuotaFailure,
        ):
            if detail.Is(kind.DESCRIPTOR):
                message = kind()
                detail.Unpack(message)
                found[kind.DESCRIPTOR.name] = message
    return found
