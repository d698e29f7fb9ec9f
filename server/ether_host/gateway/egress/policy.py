"""Who may fetch what: per-agent egress policies, address classes and rate limits.

Deny by default: an agent with no policy, or a host not on its list, is
refused. A policy is assembled from three tables, later ones winning key by
key: the host's ``[gateway.egress]`` (defaults for every agent), the agent's
deployment config ``egress`` table (agent.toml ``[config.egress]`` or
DeployAgent's ``config``), and the host's ``[gateway.egress.agents.<name>]``.

Addresses are classified after resolution, on every address a name
resolves to: loopback, private (RFC 1918, ULA, CGNAT, reserved, ...),
link-local and cloud metadata addresses are refused unless a network in
``allow_addresses`` contains them. IPv4 inside IPv6 (``::ffff:127.0.0.1``,
``::127.0.0.1``, ``64:ff9b::7f00:1``) is judged as the IPv4 address.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ether_host.config import ConfigError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA = {
    ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack...
    ipaddress.ip_address("169.254.170.2"),  # AWS ECS task metadata
    ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
    ipaddress.ip_address("fd00:ec2::254"),  # AWS over IPv6
}
NAT64 = ipaddress.ip_network("64:ff9b::/96")
V4_COMPATIBLE = ipaddress.ip_network("::/96")
KEYS = (
    "allow_hosts",
    "allow_methods",
    "allow_ports",
    "allow_addresses",
    "rate",
    "burst",
    "max_response_bytes",
    "max_request_bytes",
    "timeout",
    "max_redirects",
    "resolve",
)


@dataclass(frozen=True)
class Policy:
    """The egress rules of one agent."""

    agent: str
    allow_hosts: tuple[str, ...] = ()  # exact names, "*.example.com" (subdomains), "*" (any)
    allow_methods: frozenset[str] = frozenset({"GET", "HEAD"})
    allow_ports: frozenset[int] = frozenset()  # empty: any port
    allow_addresses: tuple[IPNetwork, ...] = ()  # networks exempt from the address-class rules
    rate: float = 1.0  # requests per second, refilled continuously
    burst: int = 5  # bucket size
    max_response_bytes: int = 1024 * 1024
    max_request_bytes: int = 1024 * 1024
    timeout: float = 10.0  # seconds for the whole fetch, redirects included
    max_redirects: int = 5
    resolve: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # fixed name -> addresses
    sources: tuple[str, ...] = ()  # where the rules came from, for audit records

    def host_rule(self, host: str) -> str | None:
        """The allow_hosts entry that admits ``host``, or None."""
        name = _normal_host(host)
        for pattern in self.allow_hosts:
            if pattern == "*" or pattern == name:
                return pattern
            if (
                pattern.startswith("*.")
                and name.endswith(pattern[1:])
                and len(name) > len(pattern) - 1
            ):
                return pattern
        return None

    def address_exempt(self, address: IPAddress) -> IPNetwork | None:
        for network in self.allow_addresses:
            if address.version == network.version and address in network:
                return network
        return None

    @property
    def origin(self) -> str:
        return " + ".join(self.sources) if self.sources else "deny by default (no egress policy)"


def _normal_host(host: str) -> str:
    return host.strip().lower().rstrip(".").removeprefix("[").removesuffix("]")


def classify(address: IPAddress) -> str | None:
    """The reason an address is refused by default ("loopback_address", ...), or None if public."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped
        if embedded is None and (
            address in NAT64 or (address in V4_COMPATIBLE and int(address) > 1)
        ):
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            return classify(embedded)
    if address in METADATA:
        return "metadata_address"
    if address.is_loopback:
        return "loopback_address"
    if address.is_link_local:
        return "link_local_address"
    if (
        address.is_private
        or address.is_reserved
        or address.is_multicast
        or address.is_unspecified
        or not address.is_global
    ):
        return "private_address"
    return None


def build_policy(agent: str, host_table: Mapping[str, Any], deployment: Any) -> Policy:
    """The policy of ``agent`` from the host's [gateway.egress] table and its deployment's ``egress``."""
    layers: list[tuple[str, Mapping[str, Any]]] = []
    defaults = {k: v for k, v in host_table.items() if k != "agents"}
    if defaults:
        layers.append(("host [gateway.egress]", defaults))
    if isinstance(deployment, Mapping) and deployment:
        layers.append((f"deployment config of {agent}", deployment))
    per_agent = (host_table.get("agents") or {}).get(agent)
    if isinstance(per_agent, Mapping) and per_agent:
        layers.append((f"host [gateway.egress.agents.{agent}]", per_agent))
    merged: dict[str, Any] = {}
    for origin, layer in layers:
        for key, value in layer.items():
            if key not in KEYS:
                raise ConfigError(
                    f"{origin}: unknown egress key {key!r}; allowed keys are {', '.join(KEYS)}"
                )
            merged[key] = value
    try:
        return _policy(agent, merged, tuple(origin for origin, _ in layers))
    except (TypeError, ValueError) as error:
        raise ConfigError(f"egress policy of {agent}: {error}") from None


def _policy(agent: str, values: Mapping[str, Any], sources: tuple[str, ...]) -> Policy:
    base = Policy(agent)
    hosts = tuple(_normal_host(str(h)) for h in _list(values, "allow_hosts"))
    methods = (
        frozenset(str(m).upper() for m in _list(values, "allow_methods"))
        if "allow_methods" in values
        else base.allow_methods
    )
    ports = frozenset(int(p) for p in _list(values, "allow_ports"))
    networks = tuple(
        ipaddress.ip_network(str(n).removeprefix("[").replace("]", ""), strict=False)
        for n in _list(values, "allow_addresses")
    )
    resolve = {
        _normal_host(str(name)): tuple(
            str(ipaddress.ip_address(str(a)))
            for a in (addrs if isinstance(addrs, list) else [addrs])
        )
        for name, addrs in dict(values.get("resolve") or {}).items()
    }
    return Policy(
        agent=agent,
        allow_hosts=hosts,
        allow_methods=methods,
        allow_ports=ports,
        allow_addresses=networks,
        rate=_positive(values, "rate", base.rate),
        burst=int(_positive(values, "burst", base.burst)),
        max_response_bytes=int(_positive(values, "max_response_bytes", base.max_response_bytes)),
        max_request_bytes=int(_positive(values, "max_request_bytes", base.max_request_bytes)),
        timeout=_positive(values, "timeout", base.timeout),
        max_redirects=_count(values, "max_redirects", base.max_redirects),
        resolve=resolve,
        sources=sources,
    )


def _list(values: Mapping[str, Any], key: str) -> list[Any]:
    value = values.get(key) or []
    if not isinstance(value, list | tuple):
        raise ValueError(f"{key} must be a list, got {value!r}")
    return list(value)


def _positive(values: Mapping[str, Any], key: str, default: float) -> float:
    value = values.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"{key} must be a positive number, got {value!r}")
    return float(value)


def _count(values: Mapping[str, Any], key: str, default: int) -> int:
    value = values.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key} must be a whole number, 0 or more, got {value!r}")
    return value


class TokenBucket:
    """``burst`` tokens, refilled at ``rate`` per second; one request takes one."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = float(burst)
        self.updated = time.monotonic()

    def take(self) -> float:
        """0 when a token was taken, else the seconds until one will be there."""
        now = time.monotonic()
        self.tokens = min(float(self.burst), self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate
