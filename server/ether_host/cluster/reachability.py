"""Whether this host reaches the other hosts at the gRPC addresses they advertise.

Tasks between hosts travel over Redis, so a host whose ``advertise`` is wrong (a wildcard
resolved to the wrong interface, a port behind NAT, a typo) still takes tasks; what breaks is
everything that goes host to host over gRPC (a terminal's calls forwarded to the host of its
PTY). Nothing would say so until such a call failed. So every host tries a TCP connection to
each other host's advertised address once a heartbeat, publishes the names it could not reach in
its own entry, and both sides say it: the host that cannot reach a peer names the peer and the
error; the host that others cannot reach names itself and who could not (docs/cluster.md,
"When an advertised address is wrong").

A TCP connection rather than a gRPC health check: the core does not import grpc, and what is in
question is the address (something must accept connections there), not the host's health,
which its heartbeat already shows.
"""

from __future__ import annotations

import anyio
import structlog

from ether_host.cluster.records import HostEntry

log = structlog.get_logger("ether.cluster")


def _said(error: BaseException) -> str:
    return str(error) or type(error).__name__


def _split(address: str) -> tuple[str, int] | None:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


class Reachability:
    """The peers this host could not reach at its last probe, by name, with why."""

    def __init__(self, timeout: float) -> None:
        self._timeout = timeout
        self.failed: dict[str, str] = {}  # peer name -> "ADDRESS: error"

    async def probe(self, peers: list[HostEntry]) -> None:
        """Try every peer's advertised address at once; log the ones that change."""
        found: dict[str, str] = {}

        async def one(peer: HostEntry) -> None:
            error = await self._connect(peer.address)
            if error:
                found[peer.name] = f"{peer.address}: {error}"

        async with anyio.create_task_group() as tg:
            for peer in peers:
                tg.start_soon(one, peer)
        for name in found.keys() - self.failed.keys():
            log.warning(
                "cluster host unreachable at its advertised address",
                host=name,
                reason=found[name],
            )
        for name in self.failed.keys() - found.keys():
            if any(p.name == name for p in peers):
                log.info("cluster host reachable again", host=name)
        self.failed = found

    async def _connect(self, address: str) -> str:
        """'' when something accepts a TCP connection at ``address``; else why not."""
        where = _split(address)
        if where is None:
            return "not a HOST:PORT address"
        try:
            with anyio.fail_after(self._timeout):
                stream = await anyio.connect_tcp(*where)
            await stream.aclose()
        except TimeoutError:
            return f"no answer within {self._timeout:g} s"
        except OSError as error:
            return _said(error)
        return ""


def unreachable_notes(
    me: str, advertise: str, failed: dict[str, str], peers: list[HostEntry]
) -> tuple[str, ...]:
    """What health says: each peer this host cannot reach, and the peers that cannot reach
    this host at its advertised address."""
    notes = [f"{name} at {why} (from this host)" for name, why in sorted(failed.items())]
    blind = sorted(p.name for p in peers if me in p.unreachable)
    if blind:
        notes.append(
            f"this host's advertised address {advertise} is not reachable from "
            f"{', '.join(blind)}: check cluster_advertise"
        )
    return tuple(notes)
