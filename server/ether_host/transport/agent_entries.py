"""This host's agents as the AgentInfo entries of ListAgents, GetAgent and the supervisor's
answers: each encoded once per change of the agent, a page joined from them on every call.

Building each agent's message on every ListAgents (a template copied into the response, its
live fields set on it, every entry serialized again by gRPC) was most of the call's host CPU
with 500 agents (bench/RESULTS.md, "Scale on one host"). An agent's entry is kept as bytes in
two parts: what moves only with its ``revision`` (hello, replicas wanted, state: everything
but the load), encoded when the revision moves, and the live part (ready replicas, in flight,
queued), read on every call and encoded again only when it differs from the last call's.
Protobuf's wire format merges concatenated encodings of a message, so an entry is the two
parts joined under the response's ``agents`` tag, and a page is its entries joined and parsed
once, in C, into the response.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from ether.v1 import agent_io_pb2
from ether_host.supervisor import ManagedAgent
from ether_host.transport.convert import KINDS, action_specs, agent_state, language


def _varint(value: int) -> bytes:
    """``value`` (not negative) as a protobuf base-128 varint."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_AGENTS_FIELD = agent_io_pb2.ListAgentsResponse.DESCRIPTOR.fields_by_name["agents"].number
_AGENTS_TAG = _varint(_AGENTS_FIELD << 3 | 2)  # wire type 2: length-delimited
_LIVE_CACHE_MAX = 4096  # distinct (ready, in flight, queued) encodings kept; then started over
_live_parts: dict[tuple[int, int, int], bytes] = {}


@dataclass(slots=True)
class _Entry:
    agent: weakref.ref[ManagedAgent]
    revision: int
    actions: Any  # the agent's actions list its encoding came from (identity: a hello replaces it)
    actions_part: bytes
    fixed: bytes  # everything but the live fields, as of ``revision``
    live: tuple[int, int, int]  # ready replicas, in flight, queued
    encoded: bytes  # tag, length, fixed part, live part: the entry as a page holds it
    payload_at: int  # where the AgentInfo itself starts in ``encoded``


# By agent name; an entry also names its agent, so a redeployed agent of the same name (a new
# ManagedAgent, revision from 0) never reads its predecessor's entry.
_entries: dict[str, _Entry] = {}


def _forget(name: str, dead: weakref.ref[ManagedAgent]) -> None:
    entry = _entries.get(name)
    if entry is not None and entry.agent is dead:
        del _entries[name]


def _live_part(live: tuple[int, int, int]) -> bytes:
    part = _live_parts.get(live)
    if part is None:
        if len(_live_parts) >= _LIVE_CACHE_MAX:
            _live_parts.clear()
        ready, in_flight, queued = live
        part = _live_parts[live] = agent_io_pb2.AgentInfo(
            ready_replicas=ready, in_flight=in_flight, queued=queued
        ).SerializeToString()
    return part


def _fixed(agent: ManagedAgent, actions_part: bytes) -> bytes:
    spec = agent.spec
    head = agent_io_pb2.AgentInfo(
        name=agent.name,
        type=KINDS[spec.kind],
        language=language(spec.language),
        version=agent.version,
        description=agent.description,
        capabilities=agent.capability_tags,
        state=agent_state(agent.state),  # type: ignore[arg-type]
        replicas=spec.replicas,
        max_concurrency=agent.max_concurrency,
    )
    return head.SerializeToString() + actions_part


def _entry(agent: ManagedAgent) -> _Entry:
    """The agent's entry as of now: its kept one when neither its revision nor its load moved."""
    ready, in_flight = agent.load()
    live = (ready, in_flight, agent.queued)
    name = agent.name
    entry = _entries.get(name)
    if entry is not None and entry.agent() is agent:
        if entry.revision == agent.revision:
            if entry.live != live:
                _encode(entry, live)
            return entry
        if entry.actions is not agent.actions:
            entry.actions = agent.actions
            entry.actions_part = _actions_part(agent)
        entry.revision = agent.revision
        entry.fixed = _fixed(agent, entry.actions_part)
        _encode(entry, live)
        return entry
    actions_part = _actions_part(agent)
    entry = _Entry(
        agent=weakref.ref(agent, lambda dead: _forget(name, dead)),
        revision=agent.revision,
        actions=agent.actions,
        actions_part=actions_part,
        fixed=_fixed(agent, actions_part),
        live=live,
        encoded=b"",
        payload_at=0,
    )
    _encode(entry, live)
    _entries[name] = entry
    return entry


def _actions_part(agent: ManagedAgent) -> bytes:
    return agent_io_pb2.AgentInfo(actions=action_specs(agent)).SerializeToString()


def _encode(entry: _Entry, live: tuple[int, int, int]) -> None:
    payload = entry.fixed + _live_part(live)
    header = _AGENTS_TAG + _varint(len(payload))
    entry.live = live
    entry.encoded = header + payload
    entry.payload_at = len(header)


def list_response(
    agents: list[ManagedAgent], next_page_token: str
) -> agent_io_pb2.ListAgentsResponse:
    """One page of ListAgents: ``agents`` in their order, as of now."""
    response = agent_io_pb2.ListAgentsResponse.FromString(
        b"".join([_entry(agent).encoded for agent in agents])
    )
    response.next_page_token = next_page_token
    return response


def agent_info(agent: ManagedAgent) -> agent_io_pb2.AgentInfo:
    """The agent as ListAgents shows it (GetAgent, the supervisor's answers)."""
    entry = _entry(agent)
    return agent_io_pb2.AgentInfo.FromString(entry.encoded[entry.payload_at :])
