"""The gateway's way to the other hosts of a cluster (docs/cluster.md, "The gateway across
hosts").

The gateway holds one of these when the host is in a cluster (``cluster/`` implements it) and
None otherwise: a message goes there only for an agent this host does not run, and a published
message is copied there after it is kept here, so a single host pays one ``None`` check. A
Protocol here rather than an import of ``cluster/``, which imports the gateway.
"""

from __future__ import annotations

from typing import Any, Protocol

from ether_host.gateway.messaging import Message


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
