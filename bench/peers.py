"""Suite "peers": Ether against the runtimes a user would pick instead, in one run
(``make bench ARGS='--only peers'``; issue 27 item 3).

- AutoGen's gRPC worker runtime (``autogen-ext[grpc]``, pinned in
  ``bench/peers_autogen/requirements.txt``), installed by this suite into a throwaway venv under
  ``.ether/bench-peers/`` (reinstalled when the pins change; never the project's venv): a
  ``GrpcWorkerAgentRuntimeHost``, a worker runtime with one echo agent, and a caller runtime that
  ``send_message``-s the params and awaits the reply (``bench/peers_autogen/echo.py``), each its
  own process;
- the MCP Python SDK: its client calling the echo tool of its low-level server over stdio
  (``bench/echo/mcp/server.py``, as bench/agents.py and bench/mcp.py measure it);
- Ether: Execute and Pipe to the Python echo agent (``bench/echo/python``) in a real host.

Every call carries the same ~1 KB params (``bench.echo.client.PARAMS``). Every figure comes from a
fresh client process, started when the rest of the machine is quiet (``wait_quiet``), in rounds
whose order reverses each time; a verdict reads the median of the per-round ratios, and the
tables show the range.

Targets: Execute at 64 in flight >= 1.5 x AutoGen's calls/s; Pipe at 64 in flight >= 2.5 x;
sequential Execute p50 <= 0.8 x AutoGen's; sequential Execute calls/s >= 1.6 x the MCP SDK's.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import (
    PYTHON,
    REPO,
    EtherHost,
    median,
    percentile,
    read_json_line,
    spawn,
    spread,
    stop_process,
    wait_quiet,
)
from bench.report import fmt, machine_markdown, markdown_table, write_section

AUTOGEN = REPO / "bench" / "peers_autogen"
REQUIREMENTS = AUTOGEN / "requirements.txt"
VENV = REPO / ".ether" / "bench-peers" / "autogen-venv"
ECHO_AGENT = REPO / "bench" / "echo" / "python"
IN_FLIGHT = 64
CLIENT_TIMEOUT = 300.0


@dataclass(frozen=True)
class Target:
    """What an Ether-side ratio compares against: ``measure`` over ``peer``, and the bound."""

    label: str
    measure: str  # "rate" (higher is better) or "p50"
    ours: str
    peer: str
    bound: float

    def passes(self, ratio: float) -> bool:
        return ratio >= self.bound if self.measure == "rate" else ratio <= self.bound


TARGETS = (
    Target("Execute calls/s / AutoGen calls/s, 64 in flight", "rate", "execute", "autogen", 1.5),
    Target("Pipe msgs/s / AutoGen calls/s, 64 in flight", "rate", "pipe", "autogen", 2.5),
    Target("sequential Execute p50 / AutoGen p50", "p50", "execute", "autogen", 0.8),
    Target("sequential Execute calls/s / MCP SDK calls/s", "rate", "execute", "mcp", 1.6),
)

LABELS = {
    "execute": "Ether Execute -> Python echo agent",
    "pipe": "Ether Pipe -> Python echo agent",
    "autogen": "AutoGen gRPC runtime: caller -> host -> worker's echo agent",
    "mcp": "MCP Python SDK client -> low-level server, stdio",
}


# --- the throwaway AutoGen environment -----------------------------------------------------------


def autogen_python() -> Path:
    """The python of the AutoGen venv, (re)installed from the pins when they changed."""
    python = VENV / "bin" / "python"
    pins = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    stamp = VENV / "installed-from.sha256"
    if python.exists() and stamp.exists() and stamp.read_text().strip() == pins:
        return python
    print(f"peers: installing AutoGen into {VENV.relative_to(REPO)}", file=sys.stderr, flush=True)
    if VENV.exists():
        shutil.rmtree(VENV)  # ours alone: a venv whose pins changed is rebuilt from scratch
    VENV.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([PYTHON, "-m", "venv", str(VENV)], check=True, timeout=300)
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "-r", str(REQUIREMENTS)], check=True, timeout=900)
    stamp.write_text(pins + "\n")
    return python


def autogen_versions(python: Path) -> str:
    script = (
        "from importlib.metadata import version as v; "
        "print(', '.join(f'{n} {v(n)}' for n in ('autogen-core', 'autogen-ext', 'grpcio')))"
    )
    return subprocess.run(
        [str(python), "-c", script], capture_output=True, text=True, timeout=60, check=True
    ).stdout.strip()


# --- measuring -----------------------------------------------------------------------------------


def _client(argv: Sequence[str], spec: dict[str, Any]) -> dict[str, Any]:
    """One measurement in a fresh client process: its JSON line, or an error naming what failed."""
    env = os.environ | {"PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    client = subprocess.Popen(
        [*argv, json.dumps(spec)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        stdout, stderr = client.communicate(timeout=CLIENT_TIMEOUT)
    finally:
        if client.poll() is None:
            stop_process(client)
    lines = stdout.strip().splitlines()
    if client.returncode != 0 or not lines:
        raise RuntimeError(f"{argv[-1]} client exit {client.returncode}: {stderr.strip()[-800:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    if result["errors"]:
        raise RuntimeError(f"{result['errors']} calls failed; first: {result['first_error']}")
    return result


def _rounds(
    runs: dict[str, tuple[Sequence[str], dict[str, Any]]],
    rounds: int,
    phase: str,
    ours: list[int],
) -> dict[str, list[dict[str, Any]]]:
    """``rounds`` fresh client runs of every target, in an order that reverses each round, each
    started once the rest of the machine is quiet."""
    results: dict[str, list[dict[str, Any]]] = {key: [] for key in runs}
    keys = list(runs)
    for number in range(rounds):
        for key in keys if number % 2 == 0 else keys[::-1]:
            argv, spec = runs[key]
            wait_quiet(ours, max_wait=20)
            began = time.perf_counter()
            result = _client(argv, spec | {"ours": ours})
            results[key].append(result)
            print(
                f"  {phase} round {number + 1}/{rounds} {key:<8} {result['rate']:,.0f} calls/s, "
                f"p50 {percentile(result['latencies_us'], 50):,.0f} µs, "
                f"foreign {result['cpu'].get('foreign_cores', 0):.2f} cores "
                f"({time.perf_counter() - began:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
    return results


def main(quick: bool = False) -> int:
    rounds = 1 if quick else 4
    count, warmup = (200, 30) if quick else (1000, 200)
    duration = 1.5 if quick else 3.0
    python = autogen_python()
    versions = autogen_versions(python)
    env = {"PYTHONPATH": str(REPO)}
    role = [str(python), "-m", "bench.peers_autogen.echo"]
    host = spawn([*role, "host"], env=env, stdin=subprocess.DEVNULL)
    worker = None
    try:
        address = read_json_line(host, timeout=60)["address"]
        worker = spawn([*role, "worker", address], env=env, stdin=subprocess.DEVNULL)
        read_json_line(worker, timeout=60)
        autogen = {"address": address, "pids": {"server": host.pid, "child": worker.pid}}
        # A fresh state directory: deployments persist in it, and the Python agent needs no cache.
        with tempfile.TemporaryDirectory(prefix="ether-bench-peers-") as scratch:
            state = Path(scratch)
            with EtherHost(state / "state", state / "host.log") as ether:
                agent = ether.deploy(ECHO_AGENT, name="echo-py")
                child = ether.pids(agent)[0]
                ours = [host.pid, worker.pid, ether.pid, child]
                pids = {"server": ether.pid, "child": child}
                mine = {"address": ether.address, "agent": agent, "pids": pids}
                results = _measure(role, autogen, mine, ours, rounds, count, warmup, duration)
    finally:
        if worker is not None:
            stop_process(worker)
        stop_process(host)
    return _report(*results, versions, quick)


def _measure(
    role: list[str],
    autogen: dict[str, Any],
    ether: dict[str, Any],
    ours: list[int],
    rounds: int,
    count: int,
    warmup: int,
    duration: float,
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    client = [PYTHON, "-m", "bench.echo.client"]
    caller = [*role, "caller"]
    seq = {"mode": "seq", "count": count, "warmup": warmup, "time_limit": 60.0}
    latency = _rounds(
        {
            "execute": (client, seq | {"kind": "unary", **ether}),
            "autogen": (caller, seq | autogen),
            "mcp": (client, seq | {"kind": "mcp", "pids": {}}),
        },
        rounds,
        "c=1",
        ours,
    )
    conc = {"mode": "conc", "concurrency": IN_FLIGHT, "warmup": 0.5, "duration": duration}
    throughput = _rounds(
        {
            "execute": (client, conc | {"kind": "unary", **ether}),
            "pipe": (client, conc | {"kind": "stream", **ether}),
            "autogen": (caller, conc | autogen),
        },
        rounds,
        f"c={IN_FLIGHT}",
        ours,
    )
    return latency, throughput


# --- ratios and the report -----------------------------------------------------------------------


def _figure(result: dict[str, Any], measure: str) -> float:
    return float(result["rate"]) if measure == "rate" else percentile(result["latencies_us"], 50)


def _ratios(
    latency: dict[str, list[dict[str, Any]]], throughput: dict[str, list[dict[str, Any]]]
) -> list[tuple[Target, list[float]]]:
    """Each target's per-round ratios: a sequential target reads the c=1 phase (calls/s or p50),
    the 64-in-flight ones the throughput phase."""
    found = []
    for target in TARGETS:
        phase = throughput if "64 in flight" in target.label else latency
        pairs = zip(phase[target.ours], phase[target.peer], strict=True)
        per_round = [
            _figure(ours, target.measure) / _figure(peer, target.measure) for ours, peer in pairs
        ]
        found.append((target, per_round))
    return found


def _cpu_per_call(result: dict[str, Any]) -> float:
    """CPU µs per call of every process of the path (server, child, client) in the window."""
    calls = result["calls"]
    return sum(result["cpu"].get("cpu_s", {}).values()) / calls * 1e6 if calls else float("nan")


def _rows(results: dict[str, list[dict[str, Any]]], with_p50: bool) -> list[list[str]]:
    rows = []
    for key, runs in results.items():
        rates = [r["rate"] for r in runs]
        low, high = spread(rates)
        row = [LABELS[key], fmt(median(rates)), f"{fmt(low)}-{fmt(high)}"]
        if with_p50:
            p50 = [percentile(r["latencies_us"], 50) for r in runs]
            p99 = [percentile(r["latencies_us"], 99) for r in runs]
            p50_low, p50_high = spread(p50)
            row += [fmt(median(p50)), f"{fmt(p50_low)}-{fmt(p50_high)}", fmt(median(p99))]
        row += [
            fmt(median(_cpu_per_call(r) for r in runs)),
            f"{median(r['cpu'].get('foreign_cores', 0.0) for r in runs):.2f}",
        ]
        rows.append(row)
    return rows


def _report(
    latency: dict[str, list[dict[str, Any]]],
    throughput: dict[str, list[dict[str, Any]]],
    versions: str,
    quick: bool,
) -> int:
    ratios = _ratios(latency, throughput)
    verdict_rows = []
    passed = True
    for target, per_round in ratios:
        ratio = median(per_round)
        low, high = spread(per_round)
        ok = target.passes(ratio)
        passed = passed and ok
        bound = f"{'>=' if target.measure == 'rate' else '<='} {target.bound}"
        verdict = "PASS" if ok else "MISS"
        print(
            f"peers: {target.label} {ratio:.2f} (range {low:.2f}-{high:.2f}; target {bound}) "
            f"{verdict}",
            file=sys.stderr,
        )
        verdict_rows.append([target.label, bound, f"{ratio:.2f}", f"{low:.2f}-{high:.2f}", verdict])
    rounds = len(next(iter(latency.values())))
    calls = latency["execute"][0]["calls"]
    seconds = throughput["execute"][0]["elapsed_s"]
    seq_headers = ["path", "calls/s", "range", "p50 µs", "p50 range", "p99 µs"]
    conc_headers = ["path", "calls/s", "range"]
    tail = ["CPU µs/call, all its processes", "foreign cores"]
    body = f"""\
{time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}{" (--quick: a smoke check, not a measurement)" if quick else ""}.
`make bench ARGS='--only peers'` (bench/peers.py, issue 27 item 3): Ether against the AutoGen
gRPC worker runtime ({versions}; installed by the suite into a throwaway venv from
bench/peers_autogen/requirements.txt) and the MCP Python SDK, every call carrying the same ~1 KB
params. AutoGen runs as its own processes (bench/peers_autogen/echo.py): a
`GrpcWorkerAgentRuntimeHost`, a worker runtime with one echo `RoutedAgent`, and a caller runtime
that `send_message`-s and awaits each reply (caller -> host -> worker -> host -> caller). Ether
runs the Python echo agent (bench/echo/python) in a real host. AutoGen is measured as shipped:
its host and worker runtimes build an f-string of every message they pass for an info log
(`logger.info(f"... {{message}}")` in autogen_ext/runtimes/grpc), whether logging is on or not.
Fresh client processes, each
started once other processes used under 0.3 cores (waiting at most 20 s), in {rounds} rounds of
alternating order; a verdict reads the median of the per-round ratios.

| target | bound | median | range over rounds | verdict |
|---|---|---|---|---|
{chr(10).join("| " + " | ".join(row) + " |" for row in verdict_rows)}

Sequential ({rounds} rounds x {calls} calls after a warm-up), medians over rounds:

{markdown_table(seq_headers + tail, _rows(latency, with_p50=True))}

At {IN_FLIGHT} in flight ({rounds} rounds x {seconds:.1f} s after 0.5 s of warm-up; Pipe keeps
{IN_FLIGHT} messages in flight on one stream), medians over rounds:

{markdown_table(conc_headers + tail, _rows(throughput, with_p50=False))}

"CPU µs/call" adds up the measured window's CPU of the path's processes (Ether: host, agent,
client; AutoGen: host, worker, caller; MCP: client and server) over its calls; "foreign cores"
is what the rest of the machine used meanwhile.

Machine:

{machine_markdown()}
"""
    write_section("Peers", body)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main(quick="--quick" in sys.argv[1:]))
