"""Reading a host's /metrics in tests: one scrape parsed with prometheus_client's own parser,
as samples keyed by name and labels, and how far a series moved between two scrapes."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

METRICS_ON = {"ETHER_TELEMETRY_METRICS": "true"}  # a host's environment: metrics on

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(client: httpx.Client, **headers: str) -> Samples:
    answer = client.get("/metrics", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample's value; 0 when the series does not exist (yet)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)
