"""Suite "agents": Ether Execute and Pipe against their baselines, measured side by side in one run.

Issue 3 item 8, issue 4 item 6 and issue 27 item 1 (Ether against the floor). Every figure comes from a fresh client process
(``bench/echo/client.py``), so the harness stays idle while it measures:

- bare gRPC: a grpc.aio server with a generic handler (``echo/grpc_server.py``), unary and bidi
  echo of the very bytes of the ExecuteRequest that Ether gets;
- bare stdio: an asyncio parent and a long-running Python child (``echo/stdio_child.py``), NDJSON
  with stdlib json, replies matched by id;
- the MCP Python SDK: its low-level ``Server`` with one echo tool over stdio (``echo/mcp/server.py``);
- the floor: ``echo/lean_host.py``, the least a Python grpc.aio host can do for Execute and Pipe
  (parse, one stdio round trip to ``stdio_child.py`` per task, answer) - no dispatcher, checks,
  logging or supervision - so the rows show how much of a gap is Ether's and how much the design's;
- Ether: ``Execute`` and ``Pipe`` of the same ~1 KB params to echo agents in Python, Go and
  TypeScript (``echo/python``, ``echo/go``, ``echo/typescript``) deployed into a real host.

Latency (c=1) and throughput (64 in flight) are measured in rounds: each round runs every target
once, in an order that reverses from one round to the next, so each ratio compares figures taken
within a minute of each other. A verdict uses the median of a ratio's per-round values.

    python -m bench --only agents [--quick]
    python -m bench.agents [--quick] [--profile | --no-profile] [--baseline-loop asyncio]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.agents_fixture import (
    IN_FLIGHT,
    STATE_DIR,
    Fixture,
    Settings,
    Target,
    start,
    targets_of,
)
from bench.agents_profile import areas, profile_markdown
from bench.agents_stats import (
    Ratio,
    Run,
    Runs,
    cpu_per_call,
    pooled_percentile,
    ratios_of,
    succeeded,
)
from bench.common import (
    NOISY_CORES,
    PYTHON,
    REPO,
    median,
    percentile,
    spread,
    stop_process,
    wait_quiet,
)
from bench.echo.client import PARAMS, execute_request
from bench.profiling import py_spy_record
from bench.report import fmt, machine_facts, markdown_table, write_section

# --- running the clients -------------------------------------------------------------------------


def _run_client(
    spec: dict[str, Any], timeout: float, during: Callable[[], None] | None = None
) -> Run:
    """One measurement in a fresh client process, with ``during`` called while it runs. A client
    that fails to run is tried twice more after a pause: engineers who share this tree regenerate
    code (the ``ether`` stubs vanish for a moment) while it runs. A timeout is not retried."""
    for attempt in range(3):
        result = _run_client_once(spec, timeout, during)
        if "failed" not in result or attempt == 2 or "timed out" in result["failed"]:
            return result
        print(f"    failed, trying again in 3 s: {result['failed'][-300:]}", file=sys.stderr)
        time.sleep(3)
    raise AssertionError("unreachable")


def _run_client_once(
    spec: dict[str, Any], timeout: float, during: Callable[[], None] | None
) -> Run:
    argv = [PYTHON, "-m", "bench.echo.client", json.dumps(spec)]
    env = os.environ | {"PYTHONPATH": str(REPO)}
    client = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        if during:
            during()
        stdout, stderr = client.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"failed": f"client timed out after {timeout:.0f}s"}
    finally:
        if client.poll() is None:
            stop_process(client)
    lines = stdout.strip().splitlines()
    if client.returncode != 0 or not lines:
        return {"failed": f"client exit {client.returncode}: {stderr.strip()[-800:]}"}
    result: Run = json.loads(lines[-1])
    if result["errors"]:
        print(f"    {result['errors']} errors, first: {result['first_error']}", file=sys.stderr)
    return result


def _measure(
    fx: Fixture,
    targets: list[Target],
    rounds: int,
    base: dict[str, Any],
    timeout: float,
    phase: str,
    quiet: dict[str, float],
) -> Runs:
    """Every target once per round, the order reversed every other round. Before each run, wait a
    little (within ``quiet["left"]`` s in all) for other processes to leave the CPUs alone."""
    results: Runs = {t.key: [] for t in targets}
    for number in range(rounds):
        for target in targets if number % 2 == 0 else targets[::-1]:
            waited = wait_quiet(fx.ours(), max_wait=min(3.0, quiet["left"]))
            quiet["left"] = max(0.0, quiet["left"] - waited)
            quiet["waited"] += waited
            began = time.perf_counter()
            result = _run_client(base | target.spec | {"ours": fx.ours()}, timeout)
            results[target.key].append(result | {"round": number})
            summary = result.get("failed") or (
                f"{result['rate']:,.0f} calls/s, p50 {percentile(result['latencies_us'], 50):,.0f} µs, "
                f"other load {result['cpu'].get('foreign_cores', 0):.2f} cores"
            )
            print(
                f"  {phase} round {number + 1}/{rounds} {target.key:<11} {summary} "
                f"({time.perf_counter() - began:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
    return results


# --- profiling the host ---------------------------------------------------------------------------

PROFILES = (  # label, client kind, concurrency, bare baseline it compares with
    ("Execute at 64 in flight", "unary", IN_FLIGHT, "grpc"),
    ("Pipe at 64 in flight", "stream", IN_FLIGHT, "bidi"),
    ("Execute at concurrency 1", "unary", 1, "grpc"),
)


def _profile(
    fx: Fixture, settings: Settings, out_dir: Path, kind: str, concurrency: int
) -> dict[str, Any]:
    """py-spy on the host while Execute ("unary") or Pipe ("stream") runs, with the CPU per thread."""
    raw = out_dir / f"host-{'execute' if kind == 'unary' else 'pipe'}-c{concurrency}.txt"
    seconds = settings.profile_seconds
    spec = {
        "kind": kind,
        "mode": "conc" if concurrency > 1 else "seq",
        "concurrency": concurrency,
        "warmup": 1.0 if concurrency > 1 else 100,
        "duration": seconds + 1.5,
        "count": 1_000_000,
        "time_limit": seconds + 1.5,  # sequential: bounded by time
        "address": fx.host.address,
        "agent": fx.agents["py"],
        "pids": {"server": fx.host.pid, "child": fx.agent_pids["py"]},
        "ours": fx.ours(),
    }
    sampled: dict[str, Any] = {}

    def record() -> None:
        time.sleep(1.5)  # past the warm-up
        sampled["threads"] = py_spy_record(fx.host.pid, seconds, raw)

    load = _run_client(spec, seconds + 60, during=record)
    threads = sampled.get("threads")
    if "failed" in load or threads is None or threads.record.returncode != 0 or not raw.exists():
        why = load.get("failed") or (threads.record.stderr.strip()[-500:] if threads else "no run")
        return {"failed": why}
    return areas(raw) | {
        "path": str(raw),
        "rate": load["rate"],
        "threads": threads.cores,
        "host_cpu_us": load["cpu"]["cpu_s"].get("server", 0.0) / max(load["calls"], 1) * 1e6,
        # The client's window spans the sampled one; its rate stands for the sampled seconds.
        "main_us": threads.main_cores / load["rate"] * 1e6 if load["rate"] else float("nan"),
        "switches": [n / max(load["rate"] * seconds, 1) for n in threads.switches],
    }


# --- report --------------------------------------------------------------------------------------


def _latency_rows(targets: list[Target], lat: Runs) -> list[list[str]]:
    rows = []
    for t in targets:
        runs, ok = lat[t.key], succeeded(lat[t.key])
        rate = sum(r["calls"] for r in ok) / sum(r["elapsed_s"] for r in ok) if ok else float("nan")
        cpu = [fmt(cpu_per_call(runs, role)) for role in ("server", "child", "client")]
        rows.append(
            [
                t.label,
                fmt(pooled_percentile(runs, 50)),
                fmt(pooled_percentile(runs, 99)),
                fmt(rate),
                *cpu,
                fmt(sum(r["calls"] for r in ok)),
            ]
        )
    return rows


def _throughput_rows(targets: list[Target], tput: Runs) -> list[list[str]]:
    rows = []
    for t in targets:
        runs = tput[t.key]
        rates = [r["rate"] for r in succeeded(runs)]
        low, high = spread(rates)
        stream = t.spec["kind"] == "stream"
        latency = (
            "-"
            if stream
            else f"{fmt(pooled_percentile(runs, 50) / 1000, 1)} / {fmt(pooled_percentile(runs, 99) / 1000, 1)}"
        )
        cpu = [fmt(cpu_per_call(runs, role)) for role in ("server", "child", "client")]
        rows.append([t.label, fmt(median(rates)), f"{fmt(low)}-{fmt(high)}", latency, *cpu])
    return rows


LATENCY_HEADERS = [
    "target",
    "p50 µs",
    "p99 µs",
    "calls/s",
    "server CPU µs/call",
    "child CPU µs/call",
    "client CPU µs/call",
    "calls",
]
THROUGHPUT_HEADERS = [
    "target",
    "calls/s (median)",
    "range",
    "p50 / p99 ms",
    "server CPU µs/call",
    "child CPU µs/call",
    "client CPU µs/call",
]
RATIO_HEADERS = [
    "ratio",
    "issue",
    "target",
    "median",
    "rounds used",
    "range, all rounds",
    "verdict",
    "from CPU µs/call",
]


def _report(
    fx: Fixture,
    settings: Settings,
    quick: bool,
    targets: tuple[list[Target], list[Target]],
    lat: Runs,
    tput: Runs,
    ratios: list[Ratio],
    profiles: dict[str, dict[str, Any]],
    wall: float,
    waited: float,
) -> str:
    s, facts = settings, machine_facts()
    runs = [r for v in (*lat.values(), *tput.values()) for r in succeeded(v)]
    other = [r["cpu"].get("foreign_cores", 0.0) for r in runs]
    mcp_open = (
        median(r["cpu"].get("open_s", float("nan")) for r in succeeded(lat.get("mcp", []))) * 1000
    )
    ratio_rows = [
        [
            r.name,
            r.issue,
            f"{r.op} {r.target}",
            fmt(r.value, 2),
            f"{len(r.used)}/{len(r.rounds)}",
            r.range,
            r.verdict,
            fmt(r.cpu, 2),
        ]
        for r in ratios
    ]
    size = len(json.dumps(PARAMS, separators=(",", ":")))
    deploys = ", ".join(f"echo-{k} {v:.1f} s" for k, v in fx.deploy_s.items())
    lines = [
        f"Run on {facts['date']} at commit {facts['commit']}; {wall:.0f} s"
        + (" (`--quick`: short runs, a smoke check, not a measurement)" if quick else "")
        + ". `make bench ARGS='--only agents'` reruns only this section.",
        "",
        "### Ratios against the targets",
        "",
        "Each ratio is taken within each round, from figures measured side by side within about a "
        f"minute. The verdict uses the median over the rounds in which other processes used at most "
        f"{NOISY_CORES} cores during the runs the ratio reads (all rounds when fewer than two were that "
        "quiet). Issue 27's rows hold Ether to the floor measured in the same rounds, and the Struct "
        "path (params as a Struct, the result as a Value: what grpcurl sends) to the JSON fast path. "
        "Issue 4 sets no targets of its own for Go and TypeScript: their rows apply the Python "
        'ones. Rows of issue "-" are references, not Ether: the floor (bench/echo/lean_host.py) is the '
        "least a Python grpc.aio host can do for Execute and Pipe (parse, one stdio round trip per task, "
        "answer), held to the same targets; the ceiling is bare gRPC echo itself, the most any host "
        "could show against the sequential target, since Execute is a gRPC call plus a stdio round "
        "trip. The last column is the throughput ratio that CPU per call predicts when both sides are "
        "CPU-bound on the same two cores (the baseline's total CPU µs per call, server + child + client, over "
        "Ether's): a cross-check that holds still while other processes take a varying share.",
        "",
        markdown_table(RATIO_HEADERS, ratio_rows),
        "",
        f"### Latency at concurrency 1 ({s.latency_rounds} rounds x {s.latency_count} sequential calls "
        f"after {s.latency_warmup} warm-up calls)",
        "",
        markdown_table(LATENCY_HEADERS, _latency_rows(targets[0], lat)),
        "",
        f"### Throughput at {IN_FLIGHT} in flight ({s.throughput_rounds} rounds x "
        f"{s.throughput_duration:g} s after {s.throughput_warmup:g} s of warm-up, one channel)",
        "",
        markdown_table(THROUGHPUT_HEADERS, _throughput_rows(targets[1], tput)),
        "",
        '"server" is the bare server or the Ether host, "child" the stdio child or the agent, "client" '
        "the measuring process (for bare stdio, the asyncio parent, which is also the client). CPU is "
        "time on CPU (/proc/<pid>/task/*/schedstat) over the measured window divided by the calls "
        "completed in it: on this VM the steadiest figure.",
        "",
        "### How it was measured",
        "",
        f"- Machine: {facts['nproc']} vCPUs ({facts['cpu']}), {facts['kernel']}, {facts['memory']}; "
        f"Python {facts['python']}; {facts['packages']}; Go {facts['go']}; Node {facts['node']}.",
        f"- Payload: the same ~1 KB params ({size} bytes of JSON) everywhere. Ether clients send them "
        "as `params_json` and ask for `DATA_ENCODING_JSON` (the API's fast path, "
        f"{fmt(len(execute_request('echo-py').SerializeToString()))} bytes as an ExecuteRequest), except "
        "the rows marked Struct, which send a Struct and read the result as a Value (what grpcurl "
        "does). Bare gRPC echoes the Struct ExecuteRequest's bytes "
        f"({fmt(len(execute_request('echo-py', 'struct').SerializeToString()))}) with a generic "
        "handler; bare stdio sends `{id, type, action, params}` lines (stdlib json on both sides) "
        "to a long-running Python child; MCP gets the params JSON-encoded in the echo tool's `text`.",
        f"- Event loops: the host runs on uvloop, so the bare gRPC server and the bare stdio parent run on "
        f"{fx.loop} too (`--baseline-loop`); every gRPC client is plain asyncio, one channel. The host "
        "runs its helper threads (gRPC's event engine and timer, anyio's workers) under SCHED_BATCH "
        "and its agents too, and once serving freezes what exists out of the garbage collector's "
        "sight (gc.freeze), as the Python SDK does in its agents; the bare gRPC server and the floor "
        "do the same (bench/echo/serving.py): the thread policy made them 5-25 % faster at 64 in "
        "flight in an A/B. Agents' stdio are pipes the host makes; the bare stdio parent and the "
        "floor use the loop's own (socketpairs on uvloop), which made no difference measured for a "
        "Python child.",
        "- Every figure comes from a fresh client process; the harness idles meanwhile. The host runs with "
        "its defaults (log level info: one JSON line per RPC, here to a file).",
        f"- Echo agents: Python SDK, Go and TypeScript adapters, `max_concurrency` 128, one replica each; "
        f"deploy (install or build, cached in {STATE_DIR.relative_to(REPO)}/): {deploys}.",
        f"- MCP session open (spawn, imports, handshake): {fmt(mcp_open)} ms median.",
        f"- Load from other processes during the measured windows: median {fmt(median(other), 2)} cores, "
        f"max {fmt(max(other, default=None), 2)} (of {facts['nproc']}). Before each run the harness "
        f"looked for a quiet quarter second, waiting {waited:.0f} s in all (at most {s.quiet_budget:g} s).",
    ]
    lines += [f"- echo-{key} did not deploy: {why}" for key, why in fx.unavailable.items()]
    failed = [
        (k, r["failed"]) for v in (lat, tput) for k, rs in v.items() for r in rs if "failed" in r
    ]
    lines += [f"- A {key} run failed: {why[:200]}" for key, why in failed[:5]]
    for label, _, concurrency, base in PROFILES:
        if label in profiles:
            baseline = cpu_per_call((tput if concurrency > 1 else lat).get(base, []), "server")
            lines += ["", *profile_markdown(label, profiles[label], base, baseline)]
    return "\n".join(lines)


def _print_summary(
    ratios: list[Ratio],
    targets: tuple[list[Target], list[Target]],
    lat: Runs,
    tput: Runs,
    profiles: dict[str, dict[str, Any]],
) -> None:
    print("\nLatency at c=1" + " " * 31 + "p50 µs    p99 µs   calls/s  srv µs/call  child µs/call")
    for row in _latency_rows(targets[0], lat):
        print(f"  {row[0]:<42} {row[1]:>7} {row[2]:>9} {row[3]:>9} {row[4]:>12} {row[5]:>14}")
    print(
        f"\nThroughput at {IN_FLIGHT} in flight"
        + " " * 20
        + "calls/s           range  srv µs/call  child µs/call"
    )
    for row in _throughput_rows(targets[1], tput):
        print(f"  {row[0]:<42} {row[1]:>7} {row[2]:>15} {row[4]:>12} {row[5]:>14}")
    print(
        f"\nRatios (median over the rounds with other load <= {NOISY_CORES} cores, else all rounds)"
    )
    for r in ratios:
        from_cpu = f"; from CPU/call {fmt(r.cpu, 2)}" if r.cpu == r.cpu else ""
        print(
            f"  {r.verdict:<5} {r.name:<72} {fmt(r.value, 2):>6} (target {r.op} {r.target}; rounds "
            f"{len(r.used)}/{len(r.rounds)}: {r.range}{from_cpu})"
        )
    for label, found in profiles.items():
        print(f"\nHost profile, {label}: % of main-thread samples")
        for name, pct in found.get("areas", []):
            print(f"  {pct:5.1f}  {name}")


def main(quick: bool = False, profile: bool | None = None, baseline_loop: str = "uvloop") -> int:
    """Run the suite, print the tables and ratios, and write the "Agents" section of RESULTS.md.

    ``profile``: None profiles the host when an issue-3 or issue-27 target is missed (not in quick runs).
    """
    s = Settings.quick() if quick else Settings()
    began = time.perf_counter()
    out_dir = Path(tempfile.mkdtemp(prefix="ether-bench-agents-"))
    print(
        f"agents: starting the bare server and the host, deploying echo agents (logs in {out_dir})",
        file=sys.stderr,
        flush=True,
    )
    fx = start(baseline_loop, out_dir)
    quiet = {"left": s.quiet_budget, "waited": 0.0}
    profiles: dict[str, dict[str, Any]] = {}
    try:
        targets = targets_of(fx)
        sequential = {
            "mode": "seq",
            "count": s.latency_count,
            "warmup": s.latency_warmup,
            "time_limit": s.latency_time_limit,
        }
        lat = _measure(
            fx,
            targets[0],
            s.latency_rounds,
            sequential,
            s.latency_time_limit * 2 + 60,
            "c=1",
            quiet,
        )
        loaded = {
            "mode": "conc",
            "concurrency": IN_FLIGHT,
            "warmup": s.throughput_warmup,
            "duration": s.throughput_duration,
        }
        timeout = s.throughput_warmup + s.throughput_duration + 60
        tput = _measure(
            fx, targets[1], s.throughput_rounds, loaded, timeout, f"c={IN_FLIGHT}", quiet
        )
        ratios = ratios_of(lat, tput)
        missed = any(r.verdict == "MISS" for r in ratios if r.issue in ("3", "27"))
        if "py" in fx.agents and (profile or (profile is None and missed and not quick)):
            for label, kind, concurrency, _ in PROFILES:
                print(
                    f"agents: profiling the host with py-spy during {label}",
                    file=sys.stderr,
                    flush=True,
                )
                profiles[label] = _profile(fx, s, out_dir, kind, concurrency)
    finally:
        fx.stop()
    _print_summary(ratios, targets, lat, tput, profiles)
    wall = time.perf_counter() - began
    write_section(
        "Agents", _report(fx, s, quick, targets, lat, tput, ratios, profiles, wall, quiet["waited"])
    )
    print(f"\nagents: wrote the Agents section of bench/RESULTS.md ({wall:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description="The agents suite (usually run by `python -m bench`)."
    )
    parser.add_argument("--quick", action="store_true", help="short runs: a smoke check")
    parser.add_argument(
        "--profile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="profile the host with py-spy (default: when an issue-3 or 27 target is missed)",
    )
    parser.add_argument(
        "--baseline-loop",
        choices=("asyncio", "uvloop"),
        default="uvloop",
        help="event loop of the bare gRPC server and stdio parent (the host's is uvloop)",
    )
    args = parser.parse_args()
    sys.exit(main(args.quick, args.profile, args.baseline_loop))
