"""The per-call series (metrics/tallies.py) write what prometheus_client's own Counter and
Histogram write for the same observations: names, HELP and TYPE, labels, every bucket with its
``le`` as the library formats it, counts and sums. A scrape of a real host is tested in
test_metrics.py; this holds the exposition itself to the library's, edge by edge."""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.exposition import generate_latest

from ether_host.metrics.registry import LATENCY_BUCKETS
from ether_host.metrics.tallies import Tallies

# (method, code, seconds): values on bucket bounds (a bound is inclusive), between them, zero,
# past the last bound (+Inf only), one method under two codes (its histogram sums both).
OBSERVATIONS = [
    ("/ether.v1.AgentIOService/Execute", "OK", 0.0),
    ("/ether.v1.AgentIOService/Execute", "OK", 0.0005),
    ("/ether.v1.AgentIOService/Execute", "OK", 0.00051),
    ("/ether.v1.AgentIOService/Execute", "OK", 0.0042),
    ("/ether.v1.AgentIOService/Execute", "INVALID_ARGUMENT", 0.001),
    ("/ether.v1.AgentIOService/Execute", "INVALID_ARGUMENT", 300.0),
    ("/ether.v1.WorkflowService/CreateRun", "OK", 300.5),
    ("/ether.v1.WorkflowService/CreateRun", "OK", 2.5),
    ("/ether.v1.AgentIOService/Pipe", "CANCELLED", 61.25),
]


def _library(observations: list[tuple[str, str, float]]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    counter = Counter("ether_rpcs", "calls", ["method", "code"], registry=registry)
    histogram = Histogram(
        "ether_rpc_duration_seconds",
        "seconds",
        ["method"],
        buckets=LATENCY_BUCKETS,
        registry=registry,
    )
    for method, code, seconds in observations:
        counter.labels(method, code).inc()
        histogram.labels(method).observe(seconds)
    return generate_latest(registry)


def _tallied(observations: list[tuple[str, str, float]]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    tallies = Tallies(
        ("ether_rpcs", "calls"),
        ("ether_rpc_duration_seconds", "seconds"),
        ["method", "code"],
        LATENCY_BUCKETS,
    )
    registry.register(tallies)
    for method, code, seconds in observations:
        tallies.record((method, code), seconds)
    return generate_latest(registry)


def _split(text: bytes) -> tuple[list[str], dict[str, float]]:
    """The lines but the sums (exact), and the sums by series: a sum adds the same floats in
    another order (by method and code, then by method), so it may differ in its last digit."""
    lines, sums = [], {}
    for line in text.decode().splitlines():
        if line.startswith("ether_rpc_duration_seconds_sum"):
            series, value = line.rsplit(" ", 1)
            sums[series] = float(value)
        else:
            lines.append(line)
    return sorted(lines), sums


def test_the_exposition_is_the_librarys() -> None:
    disable_created_metrics()  # type: ignore[no-untyped-call] # as the host does
    ours, our_sums = _split(_tallied(OBSERVATIONS))
    theirs, their_sums = _split(_library(OBSERVATIONS))
    assert ours == theirs
    assert our_sums.keys() == their_sums.keys()
    for series, value in their_sums.items():
        assert math.isclose(our_sums[series], value, rel_tol=1e-12), series
    assert (
        'ether_rpc_duration_seconds_bucket{le="0.0005",method="/ether.v1.AgentIOService/Execute"} 2.0'
        in ours
    )


def test_nothing_recorded_writes_the_families_only() -> None:
    disable_created_metrics()  # type: ignore[no-untyped-call]
    assert sorted(_tallied([]).decode().splitlines()) == sorted(_library([]).decode().splitlines())
