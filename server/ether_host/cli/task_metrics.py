"""Tasks per second and p50/p99 task durations for ``ether top`` and ``ether status``, read from
the host's Prometheus endpoint (GET /metrics on its HTTP listener, docs/telemetry.md "Metrics")
as any scraper reads it: over HTTP with the command's bearer token, parsed with
prometheus_client's own parser. No RPC gives these figures: the host counts and times finished
tasks only in its metrics.

Two series matter, both summed over an agent's actions (and statuses): ``ether_tasks_total``
(tasks that ended) and ``ether_task_duration_seconds_bucket`` (their durations, queue wait
included). Between two scrapes the counter's growth over the seconds between them is the rate,
and the buckets' growth gives the percentiles of the tasks that ended in between, interpolated
linearly within a bucket as Prometheus's ``histogram_quantile`` does. One scrape alone gives
the same since the host started.

When the figures cannot be had (no HTTP listener, metrics off, a refused token, a host out of
reach) ``MetricsUnavailable`` says why in one line, and the commands show "-" with that line.
"""

from __future__ import annotations

import argparse
import math
import ssl
import time
from dataclasses import dataclass

TASKS = "ether_tasks_total"
DURATION_BUCKETS = "ether_task_duration_seconds_bucket"
WILDCARDS = {"0.0.0.0", "[::]", "::", ""}


class MetricsUnavailable(Exception):
    """Why the task figures are not shown: one line for the user."""


@dataclass(frozen=True)
class AgentTasks:
    """One agent's counters in one scrape, summed over its actions."""

    ended: float
    # (upper bound in seconds, tasks that took at most that long), ascending, +Inf last.
    buckets: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Scrape:
    url: str
    at: float  # time.monotonic() when the answer came
    agents: dict[str, AgentTasks]


@dataclass(frozen=True)
class TaskFigures:
    """What a row shows: tasks ended (since start) or per second (over an interval), and the
    50th and 99th percentile durations in seconds; None when no task ended."""

    ended: float
    per_second: float | None
    p50: float | None
    p99: float | None


def metrics_url(listeners: list[str], grpc_address: str) -> str | None:
    """``/metrics`` on the host's HTTP listener (the ``http://`` or ``https://`` entry of
    GetHostInfo's listeners); None when it has none. A listener on every address (0.0.0.0,
    [::]) is reached on the host the command connects to."""
    for listener in listeners:
        scheme, sep, rest = listener.partition("://")
        if not sep or scheme not in ("http", "https"):
            continue
        host, _, port = rest.rpartition(":")
        if host in WILDCARDS:
            host = _host_of(grpc_address)
        return f"{scheme}://{host}:{port}/metrics"
    return None


def _host_of(address: str) -> str:
    """The host part of a gRPC target (``HOST:PORT``, ``[v6]:PORT``, ``dns:///HOST:PORT``);
    loopback for a Unix socket."""
    if address.startswith("unix"):
        return "127.0.0.1"
    host = address.removeprefix("dns:///").rpartition(":")[0]
    return host or "127.0.0.1"


class MetricsReader:
    """GET /metrics with the token and TLS files the command's gRPC calls use."""

    def __init__(self, args: argparse.Namespace) -> None:
        token = getattr(args, "token", "")
        self._headers = {"authorization": f"Bearer {token}"} if token else {}
        self._args = args

    def _verify(self) -> ssl.SSLContext | bool:
        ca = getattr(self._args, "tls_ca", "")
        cert = getattr(self._args, "tls_cert", "")
        if not ca and not cert:
            return True
        context = ssl.create_default_context(cafile=ca or None)
        if cert:
            context.load_cert_chain(cert, getattr(self._args, "tls_key", "") or None)
        return context

    def read(self, url: str) -> Scrape:
        import httpx  # imported late: `ether --help` should not load it
        from prometheus_client.parser import text_string_to_metric_families

        try:
            answer = httpx.get(url, headers=self._headers, timeout=10, verify=self._verify())
        except (httpx.HTTPError, OSError) as error:
            raise MetricsUnavailable(f"cannot reach {url}: {error}") from None
        if answer.status_code == 404:
            raise MetricsUnavailable(
                f"{url} answered 404: the host's metrics are off ([telemetry] metrics = true)"
            )
        if answer.status_code == 401:  # the HTTP listener knows callers by token only
            raise MetricsUnavailable(f"{url} answered 401: it needs a token with agent.read")
        if answer.status_code == 403:
            raise MetricsUnavailable(f"{url} answered 403: the token lacks agent.read")
        if answer.status_code != 200:
            raise MetricsUnavailable(f"{url} answered {answer.status_code}")
        at = time.monotonic()
        ended: dict[str, float] = {}
        buckets: dict[str, dict[float, float]] = {}
        try:
            for family in text_string_to_metric_families(answer.text):
                for sample in family.samples:
                    agent = sample.labels.get("agent")
                    if agent is None:
                        continue
                    if sample.name == TASKS:
                        ended[agent] = ended.get(agent, 0.0) + sample.value
                    elif sample.name == DURATION_BUCKETS:
                        bound = float(sample.labels["le"])
                        counts = buckets.setdefault(agent, {})
                        counts[bound] = counts.get(bound, 0.0) + sample.value
        except (ValueError, KeyError) as error:
            raise MetricsUnavailable(f"{url}: not Prometheus text ({error})") from None
        agents = {
            name: AgentTasks(
                ended=ended.get(name, 0.0),
                buckets=tuple(sorted(buckets.get(name, {}).items())),
            )
            for name in set(ended) | set(buckets)
        }
        return Scrape(url=url, at=at, agents=agents)


def since_start(scrape: Scrape) -> dict[str, TaskFigures]:
    """Per agent: tasks ended since the host started and their p50/p99."""
    return {
        name: TaskFigures(
            ended=tasks.ended,
            per_second=None,
            p50=histogram_quantile(0.5, tasks.buckets),
            p99=histogram_quantile(0.99, tasks.buckets),
        )
        for name, tasks in scrape.agents.items()
    }


def over_interval(before: Scrape, after: Scrape) -> dict[str, TaskFigures]:
    """Per agent: tasks that ended between the two scrapes, per second, and their p50/p99.
    A counter that went down means the host restarted in between: as Prometheus's rate()
    does, the new count is taken as the growth."""
    seconds = max(after.at - before.at, 1e-9)
    empty = AgentTasks(ended=0.0, buckets=())
    figures = {}
    for name, now in after.agents.items():
        was = before.agents.get(name, empty)
        ended = now.ended - was.ended
        previous = dict(was.buckets)
        grown = tuple((bound, count - previous.get(bound, 0.0)) for bound, count in now.buckets)
        if ended < 0 or any(count < 0 for _, count in grown):
            ended, grown = now.ended, now.buckets
        figures[name] = TaskFigures(
            ended=ended,
            per_second=ended / seconds,
            p50=histogram_quantile(0.5, grown),
            p99=histogram_quantile(0.99, grown),
        )
    return figures


def histogram_quantile(q: float, buckets: tuple[tuple[float, float], ...]) -> float | None:
    """The q-quantile of a cumulative histogram as Prometheus's ``histogram_quantile``
    computes it: find the bucket holding the q-th observation and interpolate linearly
    between its bounds (the first bucket starts at 0); one falling in the +Inf bucket is the
    largest finite bound. None when the histogram holds no observation."""
    if len(buckets) < 2 or not math.isinf(buckets[-1][0]) or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    index = next(i for i, (_, count) in enumerate(buckets) if count >= rank)
    if index == len(buckets) - 1:
        return buckets[-2][0]
    end, count = buckets[index]
    start = 0.0
    if index > 0:
        start, below = buckets[index - 1]
        count -= below
        rank -= below
    if index == 0 and end <= 0:
        return end
    return start + (end - start) * (rank / count) if count > 0 else end


def format_seconds(seconds: float | None) -> str:
    """750us, 3.2ms, 41ms, 1.25s, 12.5s; "-" for no value."""
    if seconds is None:
        return "-"
    if seconds < 0.001:
        return f"{seconds * 1e6:.0f}us"
    if seconds < 0.01:
        return f"{seconds * 1e3:.1f}ms"
    if seconds < 1:
        return f"{seconds * 1e3:.0f}ms"
    if seconds < 10:
        return f"{seconds:.2f}s"
    return f"{seconds:.1f}s"


def format_rate(per_second: float | None) -> str:
    """Tasks per second: 0, 0.25, 3.5, 120; "-" for no value."""
    if per_second is None:
        return "-"
    if per_second == 0:
        return "0"
    if per_second < 1:
        return f"{per_second:.2f}"
    if per_second < 100:
        return f"{per_second:.1f}"
    return f"{per_second:.0f}"


def add_metrics_argument(parser: argparse.ArgumentParser) -> None:
    """--metrics-url, for a host whose HTTP listener is reached at another address than the
    one GetHostInfo names (a proxy, a port forward)."""
    parser.add_argument(
        "--metrics-url",
        default="",
        help="the host's Prometheus endpoint (default: /metrics on the HTTP listener the host names)",
    )


def scrape_host(args: argparse.Namespace, listeners: list[str]) -> Scrape:
    """One scrape of the host's /metrics: --metrics-url, else its HTTP listener's."""
    url = getattr(args, "metrics_url", "") or metrics_url(listeners, args.address)
    if url is None:
        raise MetricsUnavailable(
            "the host has no HTTP listener, where it serves /metrics (http_listen; or --metrics-url)"
        )
    return MetricsReader(args).read(url)
