"""What the agent sandbox costs: spawn-to-hello, Execute latency and Execute at 64 in flight, with
and without it (``make bench ARGS='--only sandbox'``).

Two hosts run the Python echo agent (bench/echo/python): one with the default sandbox
(``[sandbox] mode = "auto"``: bubblewrap with new namespaces and binds), one with
``[sandbox] mode = "off"`` (the PID namespace only, as before the sandbox). Rounds alternate
between them so a change of the machine's load hits both alike.

- spawn-to-hello: ScaleAgent 1 -> 2, then the time until replica 1 is RUNNING (its hello
  received), seen by the client through WatchEvents; then back to 1.
- Execute p50: sequential ~1 KB Execute calls (bench/echo/client.py, a fresh process).
- Execute at 64 in flight: calls per second with 64 in flight.

Targets (issue 21): Execute within 5 % of unsandboxed, spawn-to-hello at most 50 ms more.
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

from bench.common import PYTHON, REPO, EtherHost, median, percentile, stop_process
from bench.report import write_section

ECHO = REPO / "bench" / "echo" / "python"
IN_FLIGHT = 64


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
    return result


def _spawn_to_hello(host: EtherHost, agent: str) -> float:
    """Seconds from ScaleAgent(2) to replica 1 RUNNING; scaled back to 1 afterwards."""
    from ether.v1 import agent_io_pb2, supervisor_pb2, supervisor_pb2_grpc

    supervisor = supervisor_pb2_grpc.SupervisorServiceStub(host.channel)
    events = supervisor.WatchEvents(
        supervisor_pb2.WatchEventsRequest(agent=agent, after_sequence=-1), timeout=120
    )
    try:
        began = time.perf_counter()
        supervisor.ScaleAgent(supervisor_pb2.ScaleAgentRequest(name=agent, replicas=2), timeout=60)
        for event in events:
            state = agent_io_pb2.AgentState.Name(event.state)
            if event.replica == 1 and state == "AGENT_STATE_RUNNING":
                took = time.perf_counter() - began
                break
            if event.replica == 1 and state == "AGENT_STATE_FATAL":
                raise RuntimeError(f"replica 1 FATAL: {event.reason}")
        else:
            raise RuntimeError("the event stream ended before replica 1 ran")
    finally:
        events.cancel()
    supervisor.ScaleAgent(supervisor_pb2.ScaleAgentRequest(name=agent, replicas=1), timeout=60)
    return took


def main(quick: bool = False) -> int:
    rounds = 2 if quick else 5
    spawns = 3 if quick else 10
    seq_count, seconds = (300, 2.0) if quick else (2000, 6.0)
    results: dict[str, dict[str, list[float]]] = {
        mode: {"spawn": [], "p50": [], "rate": []} for mode in ("sandbox", "off")
    }
    with tempfile.TemporaryDirectory(prefix="ether-bench-sandbox-") as tmp:
        root = Path(tmp)
        hosts: dict[str, EtherHost] = {}
        try:
            for mode in results:
                config = root / f"{mode}.toml"
                config.write_text(f'[sandbox]\nmode = "{"auto" if mode == "sandbox" else "off"}"\n')
                hosts[mode] = EtherHost(
                    root / f"state-{mode}", root / f"{mode}.log", "--config", str(config)
                )
                hosts[mode].deploy(ECHO, name="echo")
            for index in range(rounds):
                for mode, host in hosts.items():
                    pid = host.pids("echo")[0]
                    found = results[mode]
                    for _ in range(max(1, spawns // rounds)):
                        found["spawn"].append(_spawn_to_hello(host, "echo"))
                    base: dict[str, Any] = {"kind": "unary", "address": host.address}
                    base |= {"agent": "echo"}
                    base |= {"pids": {"server": host.pid, "child": pid}}
                    sequential = _client(
                        base | {"mode": "seq", "count": seq_count, "warmup": 100, "time_limit": 60},
                        timeout=300,
                    )
                    found["p50"].append(percentile(sequential["latencies_us"], 50))
                    concurrent = _client(
                        base
                        | {
                            "mode": "conc",
                            "concurrency": IN_FLIGHT,
                            "warmup": 1.0,
                            "duration": seconds,
                            "count": 1_000_000,
                        },
                        timeout=300,
                    )
                    found["rate"].append(concurrent["rate"])
                print(f"  round {index + 1}/{rounds} done", file=sys.stderr, flush=True)
        finally:
            for host in hosts.values():
                host.stop()
    on, off = results["sandbox"], results["off"]
    spawn_on, spawn_off = median(on["spawn"]) * 1000, median(off["spawn"]) * 1000
    p50_on, p50_off = median(on["p50"]), median(off["p50"])
    rate_on, rate_off = median(on["rate"]), median(off["rate"])
    rows = [
        ("spawn-to-hello (ScaleAgent to RUNNING), ms", spawn_off, spawn_on, "+≤ 50 ms"),
        ("Execute p50 at 1 in flight, µs", p50_off, p50_on, "≤ +5 %"),
        (f"Execute at {IN_FLIGHT} in flight, calls/s", rate_off, rate_on, "≥ -5 %"),
    ]
    verdicts = [
        spawn_on - spawn_off <= 50,
        p50_on <= p50_off * 1.05,
        rate_on >= rate_off * 0.95,
    ]
    table = [
        "| measure | without sandbox | with sandbox | change | target | met |",
        "|---|---|---|---|---|---|",
    ]
    for (name, without, with_, target), met in zip(rows, verdicts, strict=True):
        change = (with_ - without) / without * 100 if without else 0.0
        table.append(
            f"| {name} | {without:,.1f} | {with_:,.1f} | {change:+.1f} % | {target} | "
            f"{'yes' if met else 'no'} |"
        )
    body = "\n".join(
        [
            f"`python -m bench --only sandbox{' --quick' if quick else ''}` (bench/sandbox.py), "
            f"{time.strftime('%Y-%m-%d')}: the Python echo agent on two hosts, one with the "
            "default sandbox (bubblewrap: pid, net, ipc, uts, mount and user namespaces, "
            'read-only binds, scratch and /tmp) and one with `[sandbox] mode = "off"` (PID '
            f"namespace only); {rounds} alternating rounds, medians. Spawn-to-hello: "
            f"{len(on['spawn'])} ScaleAgent 1 -> 2 per host, from the call to replica 1's "
            f"RUNNING event. Execute: {seq_count} sequential ~1 KB calls, then {seconds:g} s at "
            f"{IN_FLIGHT} in flight, from a fresh client process. Load average at the end "
            f"(2 cores, shared with other work): {os.getloadavg()[0]:.1f}.",
            "",
            *table,
            "",
            "The sandbox is set up once per process start (bwrap's binds, namespaces); a call "
            "afterwards crosses the same pipes as without it, so Execute differs by noise.",
        ]
    )
    write_section("Sandbox", body)
    print(body)
    return 0


if __name__ == "__main__":
    sys.exit(main("--quick" in sys.argv))
