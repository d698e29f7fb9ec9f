"""Domain errors -> gRPC status with google.rpc details (AIP-193)."""

from __future__ import annotations

import grpc
from google.protobuf import duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from ether_host.errors import EtherError
from ether_host.reasons import Reason

DOMAIN = "ether"


def status_of(error: EtherError) -> grpc.Status:
    """Build the status a client sees for ``error``: code, message, details."""
    code = getattr(code_pb2, error.code.value)
    details = []
    info = error_details_pb2.ErrorInfo(
        reason=str(error.reason), domain=DOMAIN, metadata=error.metadata
    )
    details.append(info)
    if error.violations:
        details.append(
            error_details_pb2.BadRequest(
                field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(
                        field=v.field, description=v.description
                    )
                    for v in error.violations
                ]
            )
        )
    if error.resource is not None:
        kind, name = error.resource
        details.append(error_details_pb2.ResourceInfo(resource_type=kind, resource_name=name))
    if error.retry_after is not None:
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(int(error.retry_after * 1e9))
        details.append(error_details_pb2.RetryInfo(retry_delay=delay))
    if error.quota_violations:
        details.append(
            error_details_pb2.QuotaFailure(
                violations=[
                    error_details_pb2.QuotaFailure.Violation(
                        subject=v.subject, description=v.description
                    )
                    for v in error.quota_violations
                ]
            )
        )
    details.extend(error.details)
    status = status_pb2.Status(code=code, message=error.message)
    for detail in details:
        status.details.add().Pack(detail)
    result: grpc.Status = rpc_status.to_status(status)
    return result


def internal_status(correlation_id: str) -> grpc.Status:
    """INTERNAL for an uncaught exception: a correlation id, never its text."""
    status = status_pb2.Status(
        code=code_pb2.INTERNAL,
        message=f"internal error; the host log has the details under correlation id {correlation_id}",
    )
    status.details.add().Pack(
        error_details_pb2.ErrorInfo(
            reason=Reason.INTERNAL.value, domain=DOMAIN, metadata={"correlation_id": correlation_id}
        )
    )
    result: grpc.Status = rpc_status.to_status(status)
    return result
