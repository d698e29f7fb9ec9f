"""Which host of a cluster owns a terminal, and what a call on another host's terminal gets.

A terminal's PTY cannot move, so in a cluster its id names the host that owns it:
``term-<16 hex>@<host>`` (docs/cluster.md, "Terminals across hosts"). ``@`` is not allowed in a
host name (config.py), so the host part is the text after the last ``@`` and any host can tell
where a terminal lives without asking Redis; only the owner's address comes from the cluster
directory. A host without a cluster makes ids without ``@`` (as it always did) and treats an id
with one as a terminal it cannot have.

This module decides, for an id, whether the call is served here, forwarded (by the transport,
which holds the gRPC client: the core never imports grpc) or refused, with the error a person
can act on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ether_host.errors import FailedPrecondition, NotFound, Unavailable
from ether_host.reasons import Reason

SEPARATOR = "@"


def terminal_host(terminal_id: str) -> str:
    """The host an id names ('' for an id made without a cluster)."""
    _, separator, host = terminal_id.rpartition(SEPARATOR)
    return host if separator else ""


def new_terminal_id(token: str, host: str) -> str:
    """The id of a new terminal: ``term-<token>``, with ``@<host>`` on a host in a cluster."""
    return f"term-{token}{SEPARATOR}{host}" if host else f"term-{token}"


@dataclass(frozen=True)
class HostWhereabouts:
    """Where another host of the cluster is: its advertised gRPC address, and whether it is in
    the directory now (False: this host saw it leave)."""

    address: str
    live: bool


class HostDirectory(Protocol):
    """What placement needs of the cluster directory (``cluster.Cluster`` implements it)."""

    @property
    def degraded(self) -> str:
        """Why the directory cannot be read now; '' when it can."""
        ...

    def whereabouts(self, host: str) -> HostWhereabouts | None:
        """The host as last read, or None when this host never saw it."""
        ...

    async def peer_addresses(self) -> dict[str, str]:
        """The other live hosts by name with their addresses, read afresh."""
        ...


@dataclass(frozen=True)
class OwnerHost:
    """The other host a terminal call goes to."""

    name: str
    address: str


class TerminalPlacement:
    """Where terminals live; one per host, given the cluster directory by the composition root.

    Without a cluster (``directory`` None) every id names this host or none.
    """

    def __init__(
        self,
        host_name: Callable[[], str] = lambda: "",
        directory: HostDirectory | None = None,
        *,
        forward: bool = True,
    ) -> None:
        # A callable: the cluster resolves its host name only once the host has bound its port.
        self._host_name = host_name
        self.directory = directory
        self.forward = forward

    @property
    def host_name(self) -> str:
        """This host's name in its cluster ('' without one): the host part of its ids."""
        return self._host_name() if self.directory is not None else ""

    def is_elsewhere(self, terminal_id: str) -> bool:
        host = terminal_host(terminal_id)
        return bool(host) and host != self.host_name

    async def owner_of(self, terminal_id: str, *, forwarded: bool = False) -> OwnerHost | None:
        """None when the terminal is this host's to serve (or to say it has no such terminal);
        the owner to forward the call to otherwise. Raises when the call cannot go there: no
        such host (NOT_FOUND), the host gone (UNAVAILABLE), forwarding off or the call already
        forwarded once (FAILED_PRECONDITION, the owner's name and address in the metadata)."""
        if not self.is_elsewhere(terminal_id):
            return None
        owner = await self._locate(terminal_id)
        if forwarded:
            raise on_other_host(terminal_id, owner, _FORWARDED_TWICE)
        if not self.forward:
            raise on_other_host(terminal_id, owner, _NOT_FORWARDING)
        return owner

    async def refuse_elsewhere(self, terminal_id: str) -> None:
        """For callers that are never forwarded (agents' ``term.*`` host calls): the error that
        names the owner when the id is another host's."""
        if self.is_elsewhere(terminal_id):
            raise on_other_host(terminal_id, await self._locate(terminal_id), _AGENT_CALL)

    async def peers(self) -> dict[str, str]:
        """The other live hosts and their addresses (empty without a cluster)."""
        return await self.directory.peer_addresses() if self.directory is not None else {}

    async def _locate(self, terminal_id: str) -> OwnerHost:
        host = terminal_host(terminal_id)
        if self.directory is None:
            raise NotFound(
                f"terminal {terminal_id!r} names host {host!r}, and this host is in no cluster "
                f"(its own terminal ids name no host); call the host that made it",
                reason=Reason.TERMINAL_HOST_NOT_FOUND,
                metadata={"host": host},
                resource=("terminal", terminal_id),
            )
        found = self.directory.whereabouts(host)
        if found is None or not found.live:  # the directory as last read may be behind: read it
            await self.directory.peer_addresses()
            found = self.directory.whereabouts(host)
        if found is None and self.directory.degraded:  # not "no such host": we cannot tell
            raise Unavailable(
                f"terminal {terminal_id!r} names host {host!r}, and this host cannot look it "
                f"up in the cluster directory ({self.directory.degraded}); retry once Redis "
                f"answers again",
                reason=Reason.TERMINAL_HOST_UNAVAILABLE,
                metadata={"host": host},
                resource=("terminal", terminal_id),
            )
        if found is None:
            raise NotFound(
                f"terminal {terminal_id!r} names host {host!r}, which is not in this cluster "
                f"(it may have left before this host joined); ListTerminals with cluster=true "
                f"shows the terminals of the hosts there are",
                reason=Reason.TERMINAL_HOST_NOT_FOUND,
                metadata={"host": host},
                resource=("terminal", terminal_id),
            )
        if not found.live:
            raise host_unavailable(
                terminal_id,
                OwnerHost(host, found.address),
                "left the cluster; a terminal ends with the host that owns its PTY",
            )
        return OwnerHost(host, found.address)


_NOT_FORWARDING = "this host does not forward terminal calls ([cluster] forward_terminals = false)"
_AGENT_CALL = "an agent's term.* calls reach only the terminals of the host it runs on"
_FORWARDED_TWICE = (
    "a call forwarded from another host is not forwarded again (the hosts disagree on where "
    "it lives)"
)


def on_other_host(terminal_id: str, owner: OwnerHost, why: str) -> FailedPrecondition:
    return FailedPrecondition(
        f"terminal {terminal_id} lives on host {owner.name} at {owner.address}, and {why}; "
        f"make the call at {owner.address}",
        reason=Reason.TERMINAL_ON_OTHER_HOST,
        metadata={"host": owner.name, "address": owner.address},
        resource=("terminal", terminal_id),
    )


def host_unavailable(terminal_id: str, owner: OwnerHost, why: str) -> Unavailable:
    return Unavailable(
        f"terminal {terminal_id} lives on host {owner.name} ({owner.address}), which {why}",
        reason=Reason.TERMINAL_HOST_UNAVAILABLE,
        metadata={"host": owner.name, "address": owner.address},
        resource=("terminal", terminal_id),
    )
