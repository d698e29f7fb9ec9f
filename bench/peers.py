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
whose order reverses each time; a verdict reads the median of the per-round ratios over the
rounds other processes left quiet (bench/agents_stats.py's rule), and the tables show the range.

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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.agents_stats import Ratio, Runs, cpu_per_call, per_round
from bench.common import (
    NOISY_CORES,
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
            result = _client(argv, spec | {"ours": ours}) | {"round": number}
            results[key].append(result)
            print(
                f"  {phase} round {number + 1}/{rounds} {key:<8} {result['rate']:,.0f} calls/s, "
                f"p50 {fmt(percentile(result['latencies_us'], 50))} µs, "
                f"foreign {result['cpu'].get('foreign_cores', 0):.2f} cores "
                f"({time.perf_counter() - began:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
    return results


def main(quick: bool = False) -> int:
    rounds = 1 if quick else 6  # more rounds than agents: the quiet-round rule needs two quiet
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


def _ratios(latency: Runs, throughput: Runs) -> list[Ratio]:
    """The four targets, per round, with the load other processes put on each round."""

    def p50(run: dict[str, Any]) -> float:
        return percentile(run["latencies_us"], 50)

    def rate(key: str, base: str) -> Callable[[dict[str, Any]], float]:
        return lambda r: float(r[key]["rate"] / r[base]["rate"])

    def cpu(key: str, base: str) -> float:
        """The throughput ratio CPU per call predicts when both sides are CPU-bound on the same
        cores: steadier than calls/s while other processes take a varying share of them."""
        return cpu_per_call(throughput[base]) / cpu_per_call(throughput[key])

    return [
        Ratio(
            f"Execute calls/s / AutoGen calls/s, {IN_FLIGHT} in flight",
            per_round(throughput, rate("execute", "autogen")),
            ">=",
            1.5,
            "27",
            cpu("execute", "autogen"),
        ),
        Ratio(
            f"Pipe msgs/s / AutoGen calls/s, {IN_FLIGHT} in flight",
            per_round(throughput, rate("pipe", "autogen")),
            ">=",
            2.5,
            "27",
            cpu("pipe", "autogen"),
        ),
        Ratio(
            "sequential Execute p50 / AutoGen p50",
            per_round(latency, lambda r: p50(r["execute"]) / p50(r["autogen"])),
            "<=",
            0.8,
            "27",
        ),
        Ratio(
            "sequential Execute calls/s / MCP SDK calls/s",
            per_round(latency, rate("execute", "mcp")),
            ">=",
            1.6,
            "27",
        ),
    ]


def _rows(results: Runs, with_p50: bool) -> list[list[str]]:
    rows = []
    for key, runs in results.items():
        rates = [r["rate"] for r in runs]
        row = [LABELS[key], fmt(median(rates)), "{}-{}".format(*map(fmt, spread(rates)))]
        if with_p50:
            p50 = [percentile(r["latencies_us"], 50) for r in runs]
            p99 = [percentile(r["latencies_us"], 99) for r in runs]
            row += [fmt(median(p50)), "{}-{}".format(*map(fmt, spread(p50))), fmt(median(p99))]
        loads = [r["cpu"].get("foreign_cores", 0.0) for r in runs]
        row += [fmt(cpu_per_call(runs)), "{}-{}".format(*(fmt(v, 2) for v in spread(loads)))]
        rows.append(row)
    return rows


def _report(latency: Runs, throughput: Runs, versions: str, quick: bool) -> int:
    ratios = _ratios(latency, throughput)
    verdict_rows = []
    for ratio in ratios:
        predicted = fmt(ratio.cpu, 2)
        quiet = sum(1 for value, load in ratio.rounds if value == value and load <= NOISY_CORES)
        used = f"{len(ratio.used)}/{len(ratio.rounds)} ({quiet} quiet)"
        bound = f"{ratio.op} {ratio.target}"
        print(
            f"peers: {ratio.name} {ratio.value:.2f} (target {bound}; rounds used {used}, all "
            f"rounds {ratio.range}; from CPU µs/call {predicted}) {ratio.verdict}",
            file=sys.stderr,
        )
        row = [ratio.name, bound, f"{ratio.value:.2f}", used, ratio.range, ratio.verdict]
        verdict_rows.append([*row, predicted])
    rounds = len(latency["execute"])
    calls = latency["execute"][0]["calls"]
    seconds = throughput["execute"][0]["elapsed_s"]
    seq_headers = ["path", "calls/s", "range", "p50 µs", "p50 range", "p99 µs"]
    conc_headers = ["path", "calls/s", "range"]
    tail = ["CPU µs/call, all its processes", "foreign cores"]
    verdict_headers = ["target", "bound", "median", "rounds used", "range, all rounds", "verdict"]
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
Fresh client processes, each started once other processes used under 0.3 cores (waiting at most
20 s), in {rounds} rounds of alternating order. A verdict reads the median of the per-round ratios
over the rounds in which other processes used at most {NOISY_CORES} cores during the runs the
ratio reads (all rounds when fewer than two were that quiet: "rounds used" says how many were);
the last column is the throughput ratio CPU per call predicts (the peer's total CPU µs per call
over Ether's), a cross-check that holds still while other processes take a varying share of the
two cores.

{markdown_table([*verdict_headers, "from CPU µs/call"], verdict_rows)}

Sequential ({rounds} rounds x {calls} calls after a warm-up), medians over rounds:

{markdown_table(seq_headers + tail, _rows(latency, with_p50=True))}

At {IN_FLIGHT} in flight ({rounds} rounds x {seconds:.1f} s after 0.5 s of warm-up; Pipe keeps
{IN_FLIGHT} messages in flight on one stream), medians over rounds:

{markdown_table(conc_headers + tail, _rows(throughput, with_p50=False))}

"CPU µs/call" adds up the measured windows' CPU of the path's processes (Ether: host, agent,
client; AutoGen: host, worker, caller; MCP: client and server) over their calls, pooled over
the rounds; "foreign cores" is the range of what the rest of the machine used meanwhile.

Machine:

{machine_markdown()}
"""
    write_section("Peers", body)
    return 0 if all(r.verdict == "PASS" for r in ratios) else 1


if __name__ == "__main__":
    sys.exit(main(quick="--quick" in sys.argv[1:]))
