"""Suite "cluster": what reaching an agent through another host costs, in one run
(``make bench ARGS='--only cluster'``; issue 24, docs/cluster.md).

One redis-server of the bench's own (a free loopback port, no persistence) and these hosts,
all on this machine, each with the Go echo agent where it runs one (``bench/echo/go``: the
agent's own CPU is the least of the three languages', so the hosts' share shows best):

- plain: a host without ``[cluster]``, the echo agent on it: the embedded host as it always was;
- a: a host of the cluster, the echo agent on it (``echo``), called on a: a local call in a cluster;
- b: a host of the cluster without the agent: its calls to ``echo`` go to a over Redis Streams;
- for replicas on several hosts, agents ``echo-1``, ``echo-2``, ``echo-3`` run on one, two and
  three hosts of the cluster (a; a and c; a, c and e) and are called through d, which runs none
  of them, so every call goes over Redis to whichever host takes it.

Targets (issue 24): through another host, sequential p50 at most 2 x a local call's, and calls/s at
64 in flight at least 0.5 x; a local call on a host of a cluster within 5 % of the same call on
a host without one (calls/s and p50). All the hosts share this machine's two cores, so replicas
on more hosts cannot add throughput here: for them the bench reports calls/s and the CPU every
process of the run spends per task (hosts, agents and redis-server), not a scaling target.

Every figure comes from a fresh client process (``bench.echo.client``) in rounds whose order
reverses each time; ratios are medians of per-round ratios.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common import LOCAL, EtherHost, children_of, median, percentile, spawn, stop_process
from bench.mcp import rounds_of
from bench.report import fmt, machine_markdown, markdown_table, write_section

AGENT = Path(__file__).resolve().parent / "echo" / "go"
IN_FLIGHT = 64
P50_LIMIT = 2.0  # remote p50 at most this many times the local p50
RATE_FLOOR = 0.5  # remote calls/s at least this share of the local
LOCAL_COST = 0.05  # a local call in a cluster costs at most this much more than without one
HEARTBEAT, DROPOUT = "1", "10"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOCAL, 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def _redis(folder: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A redis-server of the bench's own, ready once a PING answers."""
    program = shutil.which("redis-server")
    if program is None:
        raise SystemExit("bench cluster: redis-server is not installed (`make setup` as root)")
    port = _free_port()
    argv = [program, "--port", str(port), "--bind", LOCAL, "--dir", str(folder)]
    argv += ["--save", "", "--appendonly", "no", "--logfile", "", "--daemonize", "no"]
    server = spawn(argv, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection((LOCAL, port), timeout=1) as connection:
                    connection.sendall(b"PING\r\n")
                    if connection.recv(64).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError(f"redis-server on port {port} did not answer a PING")
            time.sleep(0.05)
        yield f"redis://{LOCAL}:{port}/0", server
    finally:
        stop_process(server)


def _listed(host: EtherHost, agent: str, hosts: int, timeout: float = 60.0) -> None:
    """Wait until ``host`` lists ``agent`` as run by ``hosts`` hosts of the cluster."""
    from ether.v1 import agent_io_pb2, agent_io_pb2_grpc

    stub = agent_io_pb2_grpc.AgentIOServiceStub(host.channel)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = stub.GetAgent(agent_io_pb2.GetAgentRequest(name=agent), timeout=10).agent
        ready = [h for h in info.hosts if h.ready_replicas > 0]
        if len(ready) >= hosts:
            return
        time.sleep(0.1)
    raise RuntimeError(f"{agent} not listed on {hosts} hosts within {timeout:g} s")


def main(quick: bool = False) -> int:
    rounds = 2 if quick else 5
    with tempfile.TemporaryDirectory(prefix="ether-bench-cluster-") as name:
        scratch = Path(name)
        with _redis(scratch) as (url, redis):
            return _run(scratch, url, redis, rounds, quick)


def _host(stack: contextlib.ExitStack, scratch: Path, name: str, url: str) -> EtherHost:
    env = {}
    if url:
        env = {
            "ETHER_CLUSTER_REDIS_URL": url,
            "ETHER_CLUSTER_HOST_NAME": name,
            "ETHER_CLUSTER_HEARTBEAT": HEARTBEAT,
            "ETHER_CLUSTER_DROPOUT": DROPOUT,
        }
    return stack.enter_context(
        EtherHost(scratch / name / "state", scratch / name / "host.log", env=env)
    )


def _run(scratch: Path, url: str, redis: subprocess.Popen[bytes], rounds: int, quick: bool) -> int:
    with contextlib.ExitStack() as stack:
        plain = _host(stack, scratch, "plain", "")
        hosts = {name: _host(stack, scratch, name, url) for name in ("a", "b", "c", "d", "e")}
        plain.deploy(AGENT, name="echo")
        hosts["a"].deploy(AGENT, name="echo")
        for count, names in ((1, "a"), (2, "ac"), (3, "ace")):
            for host in names:
                hosts[host].deploy(AGENT, name=f"echo-{count}")
        _listed(hosts["b"], "echo", 1)
        for count in (1, 2, 3):
            _listed(hosts["d"], f"echo-{count}", count)
        every = [plain.pid, redis.pid] + [h.pid for h in hosts.values()]
        ours = _descendants(every)
        targets = {
            "plain": _target(plain, "echo", ours),
            "local": _target(hosts["a"], "echo", ours),
            "remote": _target(hosts["b"], "echo", ours),
        }
        spread = {f"{n} host{'s' if n > 1 else ''}": _target(hosts["d"], f"echo-{n}", ours)
                  for n in (1, 2, 3)}  # fmt: skip
        conc = {"mode": "conc", "concurrency": IN_FLIGHT, "warmup": 0.5, "duration": 3.0}
        seq = {"mode": "seq", "count": 1000, "warmup": 200, "time_limit": 60.0}
        throughput = rounds_of(targets, conc, rounds, f"c={IN_FLIGHT}", ours)
        latency = rounds_of(targets, seq, rounds, "c=1", ours)
        scaling = rounds_of(spread, conc, max(2, rounds - 2), f"spread c={IN_FLIGHT}", ours)
    return _report(throughput, latency, scaling, rounds, quick)


def _descendants(roots: list[int]) -> list[int]:
    """``roots`` and every process under them (agents run under bwrap: grandchildren)."""
    found, queue = list(roots), list(roots)
    while queue:
        children = children_of(queue.pop())
        found += children
        queue += children
    return found


def _target(host: EtherHost, agent: str, ours: list[int]) -> dict[str, Any]:
    # Every process of the run counts as "ours" (never foreign load) and as the run's CPU.
    return {
        "kind": "unary",
        "address": host.address,
        "agent": agent,
        "pids": {str(pid): pid for pid in ours},
    }


def _ratio(a: list[float], b: list[float]) -> float:
    return median(x / y for x, y in zip(a, b, strict=True))


def _report(
    throughput: dict[str, list[dict[str, Any]]],
    latency: dict[str, list[dict[str, Any]]],
    scaling: dict[str, list[dict[str, Any]]],
    rounds: int,
    quick: bool,
) -> int:
    rate = {k: [r["rate"] for r in v] for k, v in throughput.items()}
    p50 = {k: [percentile(r["latencies_us"], 50) for r in v] for k, v in latency.items()}
    checks = [
        ("remote p50 / local p50", _ratio(p50["remote"], p50["local"]), f"<= {P50_LIMIT:g}",
         _ratio(p50["remote"], p50["local"]) <= P50_LIMIT),
        ("remote calls/s / local calls/s", _ratio(rate["remote"], rate["local"]),
         f">= {RATE_FLOOR:g}", _ratio(rate["remote"], rate["local"]) >= RATE_FLOOR),
        ("local in a cluster / no cluster, calls/s", _ratio(rate["local"], rate["plain"]),
         f">= {1 - LOCAL_COST:g}", _ratio(rate["local"], rate["plain"]) >= 1 - LOCAL_COST),
        ("local in a cluster / no cluster, p50", _ratio(p50["local"], p50["plain"]),
         f"<= {1 + LOCAL_COST:g}", _ratio(p50["local"], p50["plain"]) <= 1 + LOCAL_COST),
    ]  # fmt: skip
    rows, passed = [], True
    for label, value, target, ok in checks:
        passed &= ok
        rows.append([label, f"{value:.2f}", target, "PASS" if ok else "FAIL"])
        print(
            f"cluster: {label} {value:.2f} (target {target}): {'PASS' if ok else 'FAIL'}",
            file=sys.stderr,
        )
    labels = {"plain": "no cluster", "local": "a: agent on this host", "remote": "b -> a"}
    figures = [
        [
            labels[k],
            fmt(median(rate[k])),
            f"{fmt(min(rate[k]))} - {fmt(max(rate[k]))}",
            fmt(median(p50[k])),
            f"{fmt(min(p50[k]))} - {fmt(max(p50[k]))}",
        ]
        for k in rate
    ]
    spread_rows = []
    for key, runs in scaling.items():
        per_task = [sum(r["cpu"]["cpu_s"].values()) / r["calls"] * 1e6 for r in runs if r["calls"]]
        rates = [r["rate"] for r in runs]
        spread_rows.append([key, fmt(median(rates)), fmt(median(per_task)) if per_task else "-"])
        print(f"cluster: replicas on {key}: {median(rates):,.0f} calls/s", file=sys.stderr)
    body = f"""\
{time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}{" (--quick: a smoke check, not a measurement)" if quick else ""}.
`make bench ARGS='--only cluster'` (bench/cluster.py): Execute of ~1 KB params to the Go echo
agent, six hosts and one redis-server on this machine. "no cluster" is a host without `[cluster]`;
"a" runs the agent in a cluster and is called directly; "b -> a" is the same agent called through
host b, which does not run it (the task over a Redis Stream to a, the answer back on b's stream).
{rounds} rounds of fresh client processes in alternating order; ratios are medians of per-round ratios.

{markdown_table(["compared", "ratio", "target", "verdict"], rows)}

{markdown_table(["path", f"calls/s at {IN_FLIGHT} in flight", "range", "sequential p50 µs", "range"], figures)}

One agent with replicas on one, two and three hosts, called at {IN_FLIGHT} in flight through a host
that runs none of them (every call crosses Redis). All hosts share this machine's two cores, so
more hosts add no throughput here; CPU per task is every process of the run (six hosts, their
agents, redis-server, the client):

{markdown_table(["replicas on", "calls/s", "CPU µs per task"], spread_rows)}

Machine:

{machine_markdown()}
"""
    write_section("Cluster", body)
    return 0 if passed else 1
