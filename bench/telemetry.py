"""Suite "telemetry": what traces and metrics cost an Execute, in one run
(``make bench ARGS='--only telemetry'``; issue 25).

Six hosts run side by side, each with the Go echo agent (``bench/echo/go``: the agent's own
CPU is the least of the three languages', so the host's share shows best):

- before: the host as it was before telemetry existed (``BASELINE_REV``, checked out into a
  throwaway git worktree and run with ``python -m ether_host.cli`` from it), so "off costs
  nothing" is a ratio measured in this run, not against a figure from another day;
- off: this tree's host with the defaults (no ``[telemetry]``);
- metrics: ``[telemetry] metrics = true``, ``/metrics`` scraped once a second while it runs (a
  Prometheus scraping far more often than the usual 15 s);
- full: metrics as above, and every call traced and exported over OTLP/gRPC to a local
  receiver (``bench/echo/otlp_sink.py``, a process of its own; its span count is printed);
- unsampled: as full, with ``sample_ratio = 0``: tracing on, no call sampled (what a traced
  host pays for the calls it does not keep; shown, not a target);
- off-again: a second host like "off", compared with it: what the run's noise alone makes of a
  comparison (an A/A row; shown, not a target), so a verdict inside it reads as what it is.

Every figure comes from a fresh client process (``bench.echo.client``) in rounds whose order
reverses each time; ratios are medians of per-round ratios. Targets (issue 25): off within 2 %
of before; metrics cost at most 5 %; full tracing at most 15 % -- on Execute calls/s at 64 in
flight and on sequential p50.

    python -m bench.telemetry [--rounds N] [--quick]   (or make bench ARGS='--only telemetry')
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common import (
    LOCAL,
    PYTHON,
    REPO,
    EtherHost,
    median,
    percentile,
    read_json_line,
    spawn,
    stop_process,
)
from bench.mcp import rounds_of
from bench.report import fmt, machine_markdown, markdown_table, write_section

# The last commit before the telemetry hooks (issue 25) went into the host.
BASELINE_REV = "f2152e2"
AGENT = REPO / "bench" / "echo" / "go"
IN_FLIGHT = 64
# (host, compared with, largest cost allowed): calls/s may fall and p50 rise by at most this.
# (host, compared with, largest cost allowed; None: shown, no target).
TARGETS = (
    ("off", "before", 0.02),
    ("metrics", "off", 0.05),
    ("full", "off", 0.15),
    ("unsampled", "metrics", None),  # both with metrics: the difference is tracing alone
    # Two hosts alike: what this run's noise alone makes of a comparison (A/A). A cost within
    # it is not told apart from none by this run.
    ("off-again", "off", None),
)
LABELS = {
    "before": f"before telemetry ({BASELINE_REV})",
    "off": "telemetry off (the default)",
    "metrics": "metrics on, /metrics scraped every 1 s",
    "full": "metrics + tracing every call to an OTLP receiver",
    "unsampled": "metrics + tracing on, sample_ratio 0 (no call sampled)",
    "off-again": "telemetry off, a second host (A/A)",
}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOCAL, 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def _worktree(scratch: Path) -> Iterator[Path]:
    """The baseline host's sources, checked out beside this tree (generated code included)."""
    folder = scratch / "before"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(folder), BASELINE_REV],
        check=True,
    )
    try:
        where = subprocess.run(
            [PYTHON, "-c", "import ether_host; print(ether_host.__file__)"],
            env=os.environ | _code_of(folder),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        if not where.startswith(str(folder)):
            raise RuntimeError(f"the baseline host would import {where.strip()}, not {folder}")
        yield folder
    finally:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(folder)], check=False
        )


def _code_of(checkout: Path) -> dict[str, str]:
    """The environment that makes ``python -m ether_host.cli`` run ``checkout``'s host."""
    return {"PYTHONPATH": f"{checkout / 'server'}:{checkout / 'clients' / 'python'}"}


def _relay_pid(host: EtherHost) -> int:
    """The pid of a tracing host's relay child (its ``trace relay started`` log line)."""
    for record in host.records():
        if record.get("event") == "trace relay started":
            return int(record["pid"])
    raise RuntimeError(f"no trace relay in {host.log_path}")


def _config(scratch: Path, name: str, lines: list[str]) -> Path:
    path = scratch / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


class _Scraper:
    """GETs /metrics once a second from a thread until stopped; counts answers and failures."""

    def __init__(self, urls: list[str]) -> None:
        self.urls, self.scrapes, self.failures = urls, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import httpx

        with httpx.Client(timeout=10) as client:
            while not self._stop.wait(1.0):
                for url in self.urls:
                    try:
                        answer = client.get(url)
                        answer.raise_for_status()
                        self.scrapes += 1
                    except httpx.HTTPError:
                        self.failures += 1

    def __enter__(self) -> _Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=15)


def main(quick: bool = False, rounds: int | None = None) -> int:
    # Ten: the targets are a few per cent, and a round on this shared machine varies by ten.
    rounds = rounds or (2 if quick else 10)
    with tempfile.TemporaryDirectory(prefix="ether-bench-telemetry-") as name:
        scratch = Path(name)
        sink = spawn([PYTHON, "-m", "bench.echo.otlp_sink"], env={"PYTHONPATH": str(REPO)})
        try:
            otlp_port = read_json_line(sink, timeout=30)["port"]
            with _worktree(scratch) as before:
                return _run(scratch, before, sink, otlp_port, rounds, quick)
        finally:
            stop_process(sink)


def _run(
    scratch: Path,
    before: Path,
    sink: subprocess.Popen[bytes],
    otlp_port: int,
    rounds: int,
    quick: bool,
) -> int:
    ports = {"metrics": _free_port(), "full": _free_port(), "unsampled": _free_port()}
    configs = {
        "before": None,
        "off": None,
        "metrics": _config(
            scratch,
            "metrics",
            [f'http_listen = "{LOCAL}:{ports["metrics"]}"', "[telemetry]", "metrics = true"],
        ),
        "full": _config(
            scratch,
            "full",
            [
                f'http_listen = "{LOCAL}:{ports["full"]}"',
                "[telemetry]",
                "metrics = true",
                f'otlp_endpoint = "http://{LOCAL}:{otlp_port}"',
            ],
        ),
        "unsampled": _config(
            scratch,
            "unsampled",
            [
                f'http_listen = "{LOCAL}:{ports["unsampled"]}"',
                "[telemetry]",
                "metrics = true",
                f'otlp_endpoint = "http://{LOCAL}:{otlp_port}"',
                "sample_ratio = 0",
            ],
        ),
        # Last: the farthest from "off" in the rounds' order, as far as any compared pair.
        "off-again": None,
    }
    with contextlib.ExitStack() as stack:
        hosts: dict[str, dict[str, Any]] = {}
        for key, config in configs.items():
            args = ["--config", str(config)] if config else []
            host = stack.enter_context(
                EtherHost(
                    scratch / key / "state",
                    scratch / key / "host.log",
                    *args,
                    command=[PYTHON, "-m", "ether_host.cli"] if key == "before" else (),
                    env=_code_of(before) if key == "before" else None,
                )
            )
            agent = host.deploy(AGENT, name="echo-go")
            pids = {"server": host.pid, "child": host.pids(agent)[0]}
            if key in ("full", "unsampled"):  # the trace relay's CPU is measured too
                pids["relay"] = _relay_pid(host)
            hosts[key] = {"kind": "unary", "address": host.address, "agent": agent, "pids": pids}
        urls = [f"http://{LOCAL}:{port}/metrics" for port in ports.values()]
        conc = {"mode": "conc", "concurrency": IN_FLIGHT, "warmup": 0.5, "duration": 3.0}
        seq = {"mode": "seq", "count": 1000, "warmup": 200, "time_limit": 60.0}
        with _Scraper(urls) as scraper:
            ours = [sink.pid] + [pid for h in hosts.values() for pid in h["pids"].values()]
            throughput = rounds_of(hosts, conc, rounds, f"c={IN_FLIGHT}", ours)
            latency = rounds_of(hosts, seq, rounds, "c=1", ours)
    assert sink.stdin is not None
    sink.stdin.write(b"count\n")
    sink.stdin.flush()
    spans = int(read_json_line(sink, timeout=30)["spans"])
    rate = {k: [r["rate"] for r in v] for k, v in throughput.items()}
    p50 = {k: [percentile(r["latencies_us"], 50) for r in v] for k, v in latency.items()}
    # Host CPU per call at 64 in flight: steadier than calls/s on a shared machine, and what a
    # cost is made of (the trace relay's process is counted apart, below).
    cpu = {
        k: [r["cpu"]["cpu_s"]["server"] / r["calls"] * 1e6 for r in v if r["calls"]]
        for k, v in throughput.items()
    }
    # The relay's CPU per call, beside the host's: another process, but the same machine.
    relay = {
        k: [r["cpu"]["cpu_s"]["relay"] / r["calls"] * 1e6 for r in v if r["calls"]]
        for k, v in throughput.items()
        if "relay" in hosts[k]["pids"]
    }
    rows, passed = [], True
    for key, base, allowed in TARGETS:
        rate_cost = 1 - median(a / b for a, b in zip(rate[key], rate[base], strict=True))
        p50_cost = median(a / b for a, b in zip(p50[key], p50[base], strict=True)) - 1
        ok = allowed is None or (rate_cost <= allowed and p50_cost <= allowed)
        passed &= ok
        target = "-" if allowed is None else f"<= {allowed:.0%}"
        verdict = "-" if allowed is None else ("PASS" if ok else "FAIL")
        cpu_cost = median(cpu[key]) / median(cpu[base]) - 1
        rows.append(
            [
                f"{key} vs {base}",
                f"{rate_cost:+.1%}",
                f"{p50_cost:+.1%}",
                f"{cpu_cost:+.1%}",
                target,
                verdict,
            ]
        )
        print(
            f"telemetry: {key} vs {base}: calls/s {-rate_cost:+.1%}, p50 {p50_cost:+.1%}, "
            f"host CPU per call {cpu_cost:+.1%} (cost allowed {target}): {verdict}",
            file=sys.stderr,
        )
    print(
        f"telemetry: {spans:,} spans reached the OTLP receiver; /metrics scraped "
        f"{scraper.scrapes} times ({scraper.failures} failures)",
        file=sys.stderr,
    )
    _write(rate, p50, cpu, relay, rows, spans, scraper, quick)
    return 0 if passed and spans > 0 and scraper.failures == 0 else 1


def _write(
    rate: dict[str, list[float]],
    p50: dict[str, list[float]],
    cpu: dict[str, list[float]],
    relay: dict[str, list[float]],
    rows: list[list[str]],
    spans: int,
    scraper: _Scraper,
    quick: bool,
) -> None:
    rate_rows = [[LABELS[k], fmt(median(v)), fmt(min(v)), fmt(max(v))] for k, v in rate.items()]
    p50_rows = [[LABELS[k], fmt(median(v)), fmt(min(v)), fmt(max(v))] for k, v in p50.items()]
    cpu_rows = [
        [
            LABELS[k],
            *(fmt(median(v)), fmt(min(v)), fmt(max(v))),
            fmt(median(relay[k])) if k in relay else "-",
        ]
        for k, v in cpu.items()
    ]
    body = f"""\
{time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}{" (--quick: a smoke check, not a measurement)" if quick else ""}.
`make bench ARGS='--only telemetry'` (bench/telemetry.py): Execute of ~1 KB params to the Go echo
agent on six hosts run side by side: the host before telemetry existed ({BASELINE_REV}, from a git
worktree), this host with telemetry off, with metrics on, with metrics and tracing of every call
to a local OTLP receiver ({spans:,} spans received; /metrics scraped {scraper.scrapes} times,
{scraper.failures} failures), with tracing on but no call sampled (sample_ratio 0), and a second
host with telemetry off, compared with the first: two hosts alike, so its row is what this run's
noise alone makes of a comparison (a cost inside it is not told apart from none). Fresh
client processes, {len(next(iter(rate.values())))} rounds in alternating order; a cost is the
median of per-round ratios (calls/s lost, p50 added); host CPU per call is not a target, shown
because it is steadier than calls/s on a shared machine (the trace relay's, a process of its own
on the same machine, beside it).

{markdown_table(["compared", "calls/s lost at 64 in flight", "sequential p50 added", "host CPU per call added", "allowed", "verdict"], rows)}

Calls per second at {IN_FLIGHT} in flight, median over rounds (min, max):

{markdown_table(["host", "calls/s", "min", "max"], rate_rows)}

Sequential p50 (µs):

{markdown_table(["host", "p50 µs", "min", "max"], p50_rows)}

Host CPU per call at {IN_FLIGHT} in flight (µs):

{markdown_table(["host", "µs per call", "min", "max", "trace relay µs per call"], cpu_rows)}

Machine:

{machine_markdown()}
"""
    write_section("Telemetry", body)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m bench.telemetry", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--rounds", type=int, help="client rounds per host (default 10)")
    parser.add_argument("--quick", action="store_true", help="a smoke check, not a measurement")
    arguments = parser.parse_args()
    sys.exit(main(arguments.quick, arguments.rounds))
