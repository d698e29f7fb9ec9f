"""Suite "mcp": an MCP tool call through Ether against the same call made directly, in one run
(``make bench ARGS='--only mcp'``; issue 23).

- direct: the MCP Python SDK's client (``mcp.Client``) spawns the SDK's low-level server
  (``bench/echo/mcp/server.py``, one ``echo`` tool) over stdio and calls the tool;
- through Ether: a gRPC client calls ``Execute`` (and ``Pipe``) on a host that runs the same
  server as an agent (``bench/echo/mcp``, ``kind = "mcp"``): client -> Ether -> MCP server over
  stdio. The host's ``ClientSession`` keeps the server warm and pipelines the calls.

Both send the same ~1 KB params (``bench/echo/client.py``), JSON-encoded into the tool's
``text``. Every figure comes from a fresh client process (``bench.echo.client``), in rounds whose
order reverses each time, so each ratio compares figures taken within a minute of each other.

Targets: sequential p50 through Ether <= 1.3 x direct; calls per second at 64 in flight through
Ether >= direct. A reference is measured in the same rounds: bare gRPC unary echo
(``bench/echo/grpc_server.py``), the hop Ether adds in front of the server, so (direct + bare
gRPC) / direct is the least sequential ratio any gRPC front can show.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
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
    wait_quiet,
)
from bench.report import fmt, machine_markdown, markdown_table, write_section

SERVER = REPO / "bench" / "echo" / "mcp"
IN_FLIGHT = 64
P50_TARGET = 1.3


def _client(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    argv = [PYTHON, "-m", "bench.echo.client", json.dumps(spec)]
    env = os.environ | {"PYTHONPATH": str(REPO)}
    client = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        stdout, stderr = client.communicate(timeout=timeout)
    finally:
        if client.poll() is None:
            stop_process(client)
    lines = stdout.strip().splitlines()
    if client.returncode != 0 or not lines:
        raise RuntimeError(f"client exit {client.returncode}: {stderr.strip()[-800:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    if result["errors"]:
        raise RuntimeError(f"{result['errors']} calls failed; first: {result['first_error']}")
    return result


def rounds_of(
    targets: dict[str, dict[str, Any]],
    base: dict[str, Any],
    rounds: int,
    phase: str,
    ours: list[int] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """``rounds`` fresh client runs of every target, in an order that reverses each round.
    ``ours``: the run's processes; each figure then starts in a moment the rest of the machine
    is quiet (bench/telemetry.py, whose targets are a few per cent)."""
    results: dict[str, list[dict[str, Any]]] = {key: [] for key in targets}
    keys = list(targets)
    for number in range(rounds):
        for key in keys if number % 2 == 0 else keys[::-1]:
            if ours is not None:
                wait_quiet(ours, max_wait=20)
            began = time.perf_counter()
            result = _client(base | targets[key], timeout=300)
            results[key].append(result)
            print(
                f"  {phase} round {number + 1}/{rounds} {key:<14} {result['rate']:,.0f} calls/s, "
                f"p50 {percentile(result['latencies_us'], 50):,.0f} µs "
                f"({time.perf_counter() - began:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
    return results


def main(quick: bool = False) -> int:
    rounds = 1 if quick else 4
    count, warmup = (200, 30) if quick else (1000, 200)
    duration = 1.5 if quick else 3.0
    # A fresh state directory: deployments persist in it, and this server needs no build cache.
    with tempfile.TemporaryDirectory(prefix="ether-bench-mcp-") as scratch:
        return _run(Path(scratch), rounds, count, warmup, duration, quick)


def _run(scratch: Path, rounds: int, count: int, warmup: int, duration: float, quick: bool) -> int:
    bare = spawn([PYTHON, str(REPO / "bench" / "echo" / "grpc_server.py"), "--loop", "uvloop"])
    try:
        port = read_json_line(bare, timeout=30)["port"]
        return _measure(scratch, rounds, count, warmup, duration, quick, bare.pid, port)
    finally:
        stop_process(bare)


def _measure(
    scratch: Path,
    rounds: int,
    count: int,
    warmup: int,
    duration: float,
    quick: bool,
    bare_pid: int,
    bare_port: int,
) -> int:
    bare = {"kind": "unary", "address": f"{LOCAL}:{bare_port}", "agent": "", "as_text": True}
    bare["pids"] = {"server": bare_pid}
    with EtherHost(scratch / "state", scratch / "host.log") as host:
        agent = host.deploy(SERVER, name="echo-mcp")
        pids = {"server": host.pid, "child": host.pids(agent)[0]}
        ether = {"address": host.address, "agent": agent, "as_text": True, "pids": pids}
        direct = {"kind": "mcp", "pids": {}}
        seq = {"mode": "seq", "count": count, "warmup": warmup, "time_limit": 60.0}
        latency = rounds_of(
            {"direct": direct, "ether-execute": {"kind": "unary", **ether}, "bare-grpc": bare},
            seq,
            rounds,
            "c=1",
        )
        conc = {"mode": "conc", "concurrency": IN_FLIGHT, "warmup": 0.5, "duration": duration}
        throughput = rounds_of(
            {
                "direct": direct,
                "ether-execute": {"kind": "unary", **ether},
                "ether-pipe": {"kind": "stream", **ether},
            },
            conc,
            rounds,
            f"c={IN_FLIGHT}",
        )
    p50 = {k: [percentile(r["latencies_us"], 50) for r in v] for k, v in latency.items()}
    rate = {k: [r["rate"] for r in v] for k, v in throughput.items()}
    p50_ratio = median(e / d for e, d in zip(p50["ether-execute"], p50["direct"], strict=True))
    floor = median((d + b) / d for d, b in zip(p50["direct"], p50["bare-grpc"], strict=True))
    execute_ratio = median(
        e / d for e, d in zip(rate["ether-execute"], rate["direct"], strict=True)
    )
    pipe_ratio = median(e / d for e, d in zip(rate["ether-pipe"], rate["direct"], strict=True))
    p50_pass = p50_ratio <= P50_TARGET
    rate_pass = execute_ratio >= 1.0
    print(
        f"mcp: sequential p50 Ether/direct {p50_ratio:.2f} (target <= {P50_TARGET}), "
        f"64 in flight Execute/direct {execute_ratio:.2f}, Pipe/direct {pipe_ratio:.2f} "
        f"(target >= 1); (direct + bare gRPC p50) / direct {floor:.2f}",
        file=sys.stderr,
    )
    _write(p50, rate, p50_ratio, floor, execute_ratio, pipe_ratio, quick)
    return 0 if p50_pass and rate_pass else 1


def _write(
    p50: dict[str, list[float]],
    rate: dict[str, list[float]],
    p50_ratio: float,
    floor: float,
    execute_ratio: float,
    pipe_ratio: float,
    quick: bool,
) -> None:
    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    labels = {
        "direct": "direct: MCP Python SDK client -> server over stdio",
        "ether-execute": "Ether: gRPC Execute -> host -> same server over stdio",
        "ether-pipe": "Ether: gRPC Pipe -> host -> same server over stdio",
        "bare-grpc": "reference: bare gRPC unary echo (grpc.aio), no host, no server",
    }
    latency_rows = [[labels[k], fmt(median(v)), fmt(min(v)), fmt(max(v))] for k, v in p50.items()]
    rate_rows = [[labels[k], fmt(median(v)), fmt(min(v)), fmt(max(v))] for k, v in rate.items()]
    body = f"""\
{time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}{" (--quick: a smoke check, not a measurement)" if quick else ""}.
`make bench ARGS='--only mcp'` (bench/mcp.py): one `echo` tool of the MCP Python SDK's low-level
server (bench/echo/mcp/server.py) called with ~1 KB of text, directly by the SDK's client over
stdio and through Ether (the same server deployed as an agent of kind "mcp"); fresh client
processes, rounds in alternating order, medians of the per-round figures.

| target | ratio | verdict |
|---|---|---|
| sequential p50, Ether Execute / direct (<= {P50_TARGET}) | {p50_ratio:.2f} | {verdict(p50_ratio <= P50_TARGET)} |
| reference: sequential p50, (direct + bare gRPC) / direct | {floor:.2f} | - |
| calls/s at {IN_FLIGHT} in flight, Ether Execute / direct (>= 1) | {execute_ratio:.2f} | {verdict(execute_ratio >= 1.0)} |
| calls/s at {IN_FLIGHT} in flight, Ether Pipe / direct (>= 1) | {pipe_ratio:.2f} | {verdict(pipe_ratio >= 1.0)} |

Sequential p50 (µs), median over rounds (min, max):

{markdown_table(["path", "p50 µs", "min", "max"], latency_rows)}

Calls per second at {IN_FLIGHT} in flight:

{markdown_table(["path", "calls/s", "min", "max"], rate_rows)}

Machine:

{machine_markdown()}
"""
    write_section("MCP", body)
