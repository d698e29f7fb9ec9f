"""How far the cluster is behind on this host's agents: the tasks waiting on each agent's
stream in Redis (docs/telemetry.md, the ``ether_cluster_*`` metrics), read at a scrape."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ether_host.cluster.remote import GROUP
from ether_host.cluster.task_wire import tasks_stream

if TYPE_CHECKING:
    from redis.asyncio import Redis


@dataclass(frozen=True)
class StreamBacklog:
    """One agent's task stream, seen by the consumer group of the hosts that run it."""

    unread: int  # tasks sent to the agent that no host has read yet (the group's lag)
    pending: int  # tasks a host has read and not answered yet


async def read_backlog(redis: Redis, agents: Sequence[str]) -> dict[str, StreamBacklog]:
    """The backlog of each of ``agents`` whose stream has the hosts' group (one round trip);
    an agent no task was ever sent to through Redis has none."""
    async with redis.pipeline(transaction=False) as pipe:
        for agent in agents:
            pipe.xinfo_groups(tasks_stream(agent))
            pipe.xlen(tasks_stream(agent))
        answers: list[Any] = await pipe.execute(raise_on_error=False)
    found: dict[str, StreamBacklog] = {}
    for index, agent in enumerate(agents):
        groups, length = answers[2 * index], answers[2 * index + 1]
        if isinstance(groups, Exception) or isinstance(length, Exception):
            continue  # no stream yet
        group = next((g for g in groups if _text(g.get("name")) == GROUP), None)
        if group is None:
            continue
        pending = int(group.get("pending") or 0)
        lag = group.get("lag")
        # Redis leaves the lag unknown after some deletions; answered entries are deleted
        # (ledger.py), so what the stream holds is the pending tasks and the unread ones.
        unread = int(lag) if lag is not None else max(0, int(length) - pending)
        found[agent] = StreamBacklog(unread=unread, pending=pending)
    return found


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
