"""The gateway's way to the other hosts of a cluster (docs/cluster.md, "The gateway across
hosts").

The gateway holds one of these when the host is in a cluster (``cluster/`` implements it) and
None otherwise: a message goes there only for an agent this host does not run, a published
message goes there before it is kept here, and a session this host does not hold is read or
brought here from there, so a single host pays one ``None`` check. A Protocol here rather than
an import of ``cluster/``, which imports the gateway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # only annotations: messaging imports the agent choice, which imports this
    from ether_host.gateway.messaging import Message
    from ether_host.gateway.store import SavedSession


@dataclass(frozen=True)
class GatewayAgentElsewhere:
    """A gateway agent other hosts run, as the cluster's directory says."""

    name: str
    capabilities: tuple[str, ...]
    healthy: bool  # RUNNING with a ready replica on at least one host
    in_flight: int  # tasks in flight and queued, over its hosts


class OtherGateways(Protocol):
    async def send_message(
        self,
        sender: str,
        agent: str,
        kind: str,
        data: Any,
        *,
        correlation_id: str,
        session_id: str,
        request_id: str,
    ) -> tuple[Message, int]:
        """Put a message in the mailbox of ``agent`` on a host that runs it: the message as
        that host kept it and the mailbox's depth after it, once that host has it on disk; or
        the EtherError it answered (NotFound when no host of the cluster runs the agent,
        ResourceExhausted for a full mailbox, Unavailable when it could not be asked)."""
        ...

    async def publish(self, message: Message) -> None:
        """Hand a message published on this host to every other host, which keeps it in its
        own copy of the topic and copies it to the mailboxes of its subscribed agents;
        Unavailable when that cannot be done (then nothing is published, here either)."""
        ...

    async def gateway_agents(self) -> list[GatewayAgentElsewhere]:
        """The gateway agents other hosts run (read afresh; as last read while Redis is out of
        reach)."""
        ...

    async def saved_session(self, session_id: str) -> SavedSession | None:
        """A session as the cluster's store holds it, for reading (None when there is none)."""
        ...

    async def owned_sessions(self, owner: str) -> list[SavedSession]:
        """Every session of ``owner`` the cluster's store holds."""
        ...

    async def bring_session(self, session_id: str, owner: str) -> SavedSession | None:
        """Make this host the holder of ``owner``'s session: the host that held it lets it go
        (its running turn ends, its streams end UNAVAILABLE) and writes its last state; then
        the session as stored, for this host to serve (None when ``owner`` has no such
        session: nothing moves)."""
        ...

    async def session_call(
        self, session_id: str, root_task: str, agent: str, method: str, params: dict[str, Any]
    ) -> Any:
        """Run an agent's ``ctx.*`` host call on the host that holds the session (a turn of a
        session held there runs on an agent of this host): its answer, or the TaskFailure it
        raised."""
        ...

    async def actions_elsewhere(self) -> dict[str, list[str]]:
        """The agents only other hosts run, each with its actions' names (what a pipeline's
        steps are checked against, besides this host's agents)."""
        ...

    async def actions_of(self, agent: str) -> dict[str, dict[str, Any]]:
        """The actions of an agent only other hosts run, each with its params schema (what a
        turn's step offers it); empty when no host answers for it."""
        ...
