"""The host's Prometheus metrics (docs/telemetry.md, "Metrics"): ``registry.py`` records what
happens on the hot path (RPCs, tasks) and ``scrape.py`` reads the rest of the core when
Prometheus asks. A package of its own above the core, beside telemetry/ (traces): it reads
every core package, while the core's parts import telemetry/ to open spans.
"""

from ether_host.metrics.registry import Metrics

__all__ = ["Metrics"]
