"""grpc.health.v1 for the host: the services' statuses, one per agent, and the AgentIO service
served only while some agent can take a task (``ether_host.health`` decides; this says it).

Our own servicer rather than grpc_health's reference one: that one cannot forget a service, and
an agent removed must read NOT_FOUND to Check and SERVICE_UNKNOWN to Watch, as for a name never
deployed (the health protocol's words for "no such service").
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import grpc
from grpc_health.v1 import health_pb2

from ether.v1 import agent_io_pb2

Status = int  # a health_pb2.HealthCheckResponse.ServingStatus value
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
AGENT_IO = agent_io_pb2.DESCRIPTOR.services_by_name["AgentIOService"].full_name
AGENT_PREFIX = "ether.agent."


def agent_service(name: str) -> str:
    """The health service name of agent ``name`` (``ether.agent.NAME``)."""
    return AGENT_PREFIX + name


class HealthServicer:
    """grpc.health.v1.Health (``health_pb2_grpc.add_HealthServicer_to_server``): Check, List
    and Watch over a table of statuses that ``set`` and ``forget`` change.

    Watch sends the current status, then each change; it ends once the host shuts down (after
    sending NOT_SERVING), so an open watch does not hold the server's drain for its grace."""

    def __init__(self) -> None:
        self._statuses: dict[str, Status] = {"": SERVING}
        self._changed = anyio.Event()
        self._shutting_down = False

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def set(self, service: str, status: Status) -> None:
        if self._shutting_down or self._statuses.get(service) == status:
            return
        self._statuses[service] = status
        self._wake()

    def forget(self, service: str) -> None:
        """``service`` no longer exists: Check answers NOT_FOUND, Watch SERVICE_UNKNOWN."""
        if self._shutting_down or self._statuses.pop(service, None) is None:
            return
        self._wake()

    def enter_graceful_shutdown(self) -> None:
        """Every service NOT_SERVING from now on, and watches end."""
        if self._shutting_down:
            return
        self._shutting_down = True
        self._statuses = dict.fromkeys(self._statuses, NOT_SERVING)
        self._wake()

    async def Check(
        self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        status = self._statuses.get(request.service)
        if status is None:
            # The name cut short: the message travels in trailers, whose size gRPC bounds.
            named = request.service[:200]
            await context.abort(grpc.StatusCode.NOT_FOUND, f"unknown service {named!r}")
        return health_pb2.HealthCheckResponse(status=status)

    async def List(
        self, request: health_pb2.HealthListRequest, context: grpc.aio.ServicerContext
    ) -> health_pb2.HealthListResponse:
        """Every service's status: the host's, its services' and one per deployed agent."""
        return health_pb2.HealthListResponse(
            statuses={
                service: health_pb2.HealthCheckResponse(status=status)
                for service, status in self._statuses.items()
            }
        )

    async def Watch(
        self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[health_pb2.HealthCheckResponse]:
        sent: Status | None = None
        while True:
            changed = self._changed
            status = self._statuses.get(request.service, SERVICE_UNKNOWN)
            if status != sent:
                sent = status
                yield health_pb2.HealthCheckResponse(status=status)
            if self._shutting_down:
                return
            await changed.wait()


class GrpcHealthSink:
    """``ether_host.health.HealthSink`` onto the servicer: ``ether.agent.NAME`` per agent, and
    the AgentIO service SERVING while any agent is."""

    def __init__(self, servicer: HealthServicer) -> None:
        self._servicer = servicer

    async def agent_changed(self, name: str, serving: bool | None) -> None:
        if serving is None:
            self._servicer.forget(agent_service(name))
        else:
            self._servicer.set(agent_service(name), SERVING if serving else NOT_SERVING)

    async def any_changed(self, serving: bool) -> None:
        self._servicer.set(AGENT_IO, SERVING if serving else NOT_SERVING)
