"""The agents suite's arithmetic: runs pooled over rounds, per-round ratios and verdicts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.common import NOISY_CORES, median, percentile, spread
from bench.report import fmt

Run = dict[str, Any]  # one client process's result (bench/echo/client.py), plus its "round"
Runs = dict[str, list[Run]]  # target key -> its runs, one per round


def succeeded(runs: list[Run]) -> list[Run]:
    return [r for r in runs if "failed" not in r]


def pooled_percentile(runs: list[Run], q: float) -> float:
    """A latency percentile (µs) pooled over the rounds."""
    return percentile([v for r in succeeded(runs) for v in r["latencies_us"]], q)


def cpu_per_call(runs: list[Run], role: str | None = None) -> float:
    """CPU µs per call of one role (server, child, client), or of all together, pooled over rounds."""
    counted = [r for r in succeeded(runs) if role is None or role in r["cpu"]["cpu_s"]]
    calls = sum(r["calls"] for r in counted)
    used = sum(v for r in counted for k, v in r["cpu"]["cpu_s"].items() if role in (None, k))
    return used / calls * 1e6 if calls else float("nan")


class _Seen(dict[str, Run]):
    """A dict that remembers which keys were read."""

    def __init__(self, items: dict[str, Run]) -> None:
        super().__init__(items)
        self.used: set[str] = set()

    def __getitem__(self, key: str) -> Run:
        self.used.add(key)
        return super().__getitem__(key)


def per_round(runs: Runs, fn: Callable[[dict[str, Run]], float]) -> list[tuple[float, float]]:
    """Per round: ``fn`` of that round's runs (NaN where one is missing), and the highest load
    from other processes during the runs it read."""
    values = []
    for number in range(max((len(v) for v in runs.values()), default=0)):
        picked = _Seen(
            {k: r for k, v in runs.items() for r in succeeded(v) if r["round"] == number}
        )
        try:
            value = fn(picked)
        except (KeyError, ZeroDivisionError):
            value = float("nan")
        loads = [
            dict.__getitem__(picked, k)["cpu"].get("foreign_cores", 0.0)
            for k in picked.used
            if k in picked
        ]
        values.append((value, max(loads, default=0.0)))
    return values


@dataclass
class Ratio:
    """A target ratio: its per-round values with each round's load from other processes."""

    name: str
    rounds: list[tuple[float, float]]
    op: str
    target: float
    issue: str
    cpu: float = float("nan")  # the same ratio as CPU per call predicts it (throughput ratios)

    @property
    def used(self) -> list[float]:
        """The rounds behind the verdict: the quiet ones when at least two are (else all)."""
        valid = [(v, load) for v, load in self.rounds if v == v]
        quiet = [v for v, load in valid if load <= NOISY_CORES]
        return quiet if len(quiet) >= min(2, len(valid)) else [v for v, _ in valid]

    @property
    def value(self) -> float:
        return median(self.used)

    @property
    def verdict(self) -> str:
        v = self.value
        if v != v:
            return "n/a"
        return "PASS" if (v <= self.target if self.op == "<=" else v >= self.target) else "MISS"

    @property
    def range(self) -> str:
        return "{}-{}".format(*(fmt(v, 2) for v in spread(v for v, _ in self.rounds)))


def ratios_of(lat: Runs, tput: Runs) -> list[Ratio]:
    def limit(key: str) -> Callable[[dict[str, Run]], float]:
        def p50(run: Run) -> float:
            return percentile(run["latencies_us"], 50)

        return lambda r: p50(r[key]) / (p50(r["grpc"]) + p50(r["stdio"]))

    def rate(key: str, base: str) -> Callable[[dict[str, Run]], float]:
        return lambda r: float(r[key]["rate"] / r[base]["rate"])

    def cpu(key: str, base: str) -> float:
        """The throughput ratio that CPU per call predicts when both sides are CPU-bound on the same
        cores: steadier than calls/s when other processes take a varying share of them."""
        return cpu_per_call(tput.get(base, [])) / cpu_per_call(tput.get(key, []))

    p50_name = "Execute p50 / (bare gRPC p50 + bare stdio p50), c=1"
    pipe_name = "Pipe msgs/s / bare bidi-stream echo msgs/s, 64 in flight"
    # Issue 27: Ether against the floor of its own design (bench/echo/lean_host.py) measured in
    # the same rounds, and the Struct path (what grpcurl sends) against the JSON fast path.
    ratios = [
        Ratio(
            "Execute calls/s / floor's calls/s, 64 in flight",
            per_round(tput, rate("execute-py", "lean")),
            ">=",
            0.85,
            "27",
            cpu("execute-py", "lean"),
        ),
        Ratio(
            "Execute sequential calls/s / floor's sequential calls/s",
            per_round(lat, rate("execute-py", "lean")),
            ">=",
            0.9,
            "27",
        ),
        Ratio(
            "Pipe msgs/s / floor's Pipe msgs/s, 64 in flight",
            per_round(tput, rate("pipe-py", "lean-pipe")),
            ">=",
            0.9,
            "27",
            cpu("pipe-py", "lean-pipe"),
        ),
        Ratio(
            "Struct params and data: Execute calls/s / JSON fast path's, 64 in flight",
            per_round(tput, rate("execute-py-struct", "execute-py")),
            ">=",
            0.85,
            "27",
            cpu("execute-py-struct", "execute-py"),
        ),
    ]
    ratios += [
        Ratio(p50_name, per_round(lat, limit("execute-py")), "<=", 1.2, "3"),
        Ratio(
            "Execute calls/s / bare gRPC unary calls/s, 64 in flight",
            per_round(tput, rate("execute-py", "grpc")),
            ">=",
            0.7,
            "3",
            cpu("execute-py", "grpc"),
        ),
        Ratio(
            pipe_name,
            per_round(tput, rate("pipe-py", "bidi")),
            ">=",
            0.6,
            "3",
            cpu("pipe-py", "bidi"),
        ),
        Ratio(
            "Execute sequential calls/s / MCP SDK sequential calls/s",
            per_round(lat, rate("execute-py", "mcp")),
            ">=",
            2.5,
            "3",
        ),
    ]
    ratios += [
        Ratio(f"floor, lean host: {p50_name}", per_round(lat, limit("lean")), "<=", 1.2, "-"),
        Ratio(
            "floor, lean host: calls/s / bare gRPC unary calls/s, 64 in flight",
            per_round(tput, rate("lean", "grpc")),
            ">=",
            0.7,
            "-",
            cpu("lean", "grpc"),
        ),
        Ratio(
            f"floor, lean host: {pipe_name}",
            per_round(tput, rate("lean-pipe", "bidi")),
            ">=",
            0.6,
            "-",
            cpu("lean-pipe", "bidi"),
        ),
        Ratio(
            "floor, lean host: sequential calls/s / MCP SDK sequential calls/s",
            per_round(lat, rate("lean", "mcp")),
            ">=",
            2.5,
            "-",
        ),
        # Execute is a gRPC call plus a stdio round trip, so no host calls faster than bare gRPC
        # echo: this row is the most any host could show against the sequential target.
        Ratio(
            "ceiling, bare gRPC echo (no host, no agent): sequential calls/s / MCP SDK sequential calls/s",
            per_round(lat, rate("grpc", "mcp")),
            ">=",
            2.5,
            "-",
        ),
        Ratio(
            f"Struct params: {p50_name}",
            per_round(lat, limit("execute-py-struct")),
            "<=",
            1.2,
            "3",
        ),
        Ratio(
            "Struct params: Execute calls/s / bare gRPC unary calls/s, 64 in flight",
            per_round(tput, rate("execute-py-struct", "grpc")),
            ">=",
            0.7,
            "3",
            cpu("execute-py-struct", "grpc"),
        ),
    ]
    for key, word in (("go", "Go"), ("ts", "TypeScript")):
        ratios += [
            Ratio(f"{word}: {p50_name}", per_round(lat, limit(f"execute-{key}")), "<=", 1.2, "4"),
            Ratio(
                f"{word}: {pipe_name}",
                per_round(tput, rate(f"pipe-{key}", "bidi")),
                ">=",
                0.6,
                "4",
                cpu(f"pipe-{key}", "bidi"),
            ),
        ]
    return ratios
