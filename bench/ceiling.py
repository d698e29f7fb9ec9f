"""Suite "ceiling": how far one host process goes on one core, and what more processes give.

Issue 27 item 5 ("How it grows"). A Python host runs its gRPC handlers, dispatcher and stdio
links on one thread (the event loop's); grpc's own threads and the agents take the other cores.
So the host's per-core ceiling is 1e6 / (main-thread CPU µs per task): the tasks/s one host
process serves once its main thread is busy all the time, whatever the machine's core count.

Measured here, each in a fresh client process (``bench/echo/batch_client.py``) against a real
host with the Python SDK echo agent (``echo/python``), the small echo task of the batching suite
(``{"n": 1, "text": "hello"}``, params_json in, data_json out):

- Execute, 64 calls in flight;
- Pipe, one ``input`` per message, 64 in flight;
- batched Pipe, ``inputs`` of 64 tasks, 128 tasks in flight.

The host's main-thread CPU is read from ``/proc/<pid>/task/<pid>/stat`` (utime + stime) at the
start and end of the client's measured window. Then "several host processes": two hosts, each with
its own echo agent and its own batched client, run at once, against one host alone, in the same
round. What more hosts (the cluster) would give is read from the "Cluster" section of
RESULTS.md, measured by bench/cluster.py.

    python -m bench --only ceiling [--quick]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.batching import ECHO, run_client
from bench.common import NOISY_CORES, EtherHost, median, spread, wait_quiet
from bench.report import RESULTS, fmt, machine_facts, markdown_table, write_section

IN_FLIGHT = 64
BATCH = 64
WINDOW = 128
SECTION = "How it grows"

KINDS = {
    "execute": ("Execute, 64 in flight", {"kind": "execute", "concurrency": IN_FLIGHT}),
    "pipe": (
        "Pipe, one input per message, 64 in flight",
        {"kind": "pipe", "concurrency": IN_FLIGHT},
    ),
    "batched": (
        f"batched Pipe, {BATCH} inputs per message, {WINDOW} in flight",
        {"kind": "batch", "batch": BATCH, "window": WINDOW},
    ),
}


def _spec(host: EtherHost, agent: str, agent_pid: int, kind: str) -> dict[str, Any]:
    return KINDS[kind][1] | {
        "address": host.address,
        "agent": agent,
        "pids": {"server": host.pid, "child": agent_pid},
        "main_threads": {"server": host.pid},
    }


def _figures(result: dict[str, Any]) -> dict[str, float]:
    """tasks/s, the host's main-thread and whole-process CPU µs per task, other load."""
    if "failed" in result or not result.get("calls"):
        nan = float("nan")
        return {"rate": nan, "main_us": nan, "host_us": nan, "foreign": nan}
    calls, cpu = result["calls"], result["cpu"]
    return {
        "rate": result["rate"],
        "main_us": cpu["main_cpu_s"]["server"] / calls * 1e6,
        "host_us": cpu["cpu_s"]["server"] / calls * 1e6,
        "foreign": cpu["foreign_cores"],
    }


def _together(specs: list[dict[str, Any]], timeout: float) -> list[dict[str, Any]]:
    """Run the clients at the same time (one thread each waits on its own process)."""
    results: list[dict[str, Any]] = [{} for _ in specs]

    def one(index: int) -> None:
        results[index] = run_client(specs[index], timeout)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(specs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def main(quick: bool = False) -> int:
    rounds, warmup, duration = (1, 0.5, 1.5) if quick else (4, 1.0, 4.0)
    began = time.perf_counter()
    facts = machine_facts()
    out = Path(tempfile.mkdtemp(prefix="ether-bench-ceiling-"))
    print(f"ceiling: starting two hosts (logs in {out})", file=sys.stderr)
    hosts: list[EtherHost] = []
    single: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
    pairs: list[dict[str, Any]] = []
    try:
        for name in ("a", "b"):
            hosts.append(EtherHost(out / f"state-{name}", out / f"host-{name}.log"))
        agents = [(h.deploy(ECHO / "python", name="echo-py"), h) for h in hosts]
        agent_pids = [h.pids(a)[0] for a, h in agents]
        ours = [h.pid for h in hosts] + agent_pids
        timing = {"warmup": warmup, "duration": duration, "ours": ours}
        limit = warmup + duration + 60
        first, second = hosts
        for number in range(rounds):
            order = list(KINDS) if number % 2 == 0 else list(KINDS)[::-1]
            for kind in order:
                wait_quiet(ours, max_wait=10.0)
                spec = timing | _spec(first, "echo-py", agent_pids[0], kind)
                figures = _figures(run_client(spec, limit))
                single[kind].append(figures)
                print(
                    f"  round {number + 1}/{rounds} {kind:<8} {fmt(figures['rate'])} tasks/s, "
                    f"{fmt(figures['main_us'], 1)} µs main thread per task",
                    file=sys.stderr,
                    flush=True,
                )
            # Several host processes: one host alone, then two at once, batched Pipe each.
            wait_quiet(ours, max_wait=10.0)
            alone = _figures(
                run_client(timing | _spec(first, "echo-py", agent_pids[0], "batched"), limit)
            )
            wait_quiet(ours, max_wait=10.0)
            both = [
                _figures(r)
                for r in _together(
                    [
                        timing | _spec(first, "echo-py", agent_pids[0], "batched"),
                        timing | _spec(second, "echo-py", agent_pids[1], "batched"),
                    ],
                    limit,
                )
            ]
            pairs.append({"alone": alone, "both": both})
            print(
                f"  round {number + 1}/{rounds} one host {fmt(alone['rate'])} tasks/s, two hosts "
                f"{fmt(sum(b['rate'] for b in both))} tasks/s",
                file=sys.stderr,
                flush=True,
            )
    finally:
        for host in hosts:
            host.stop()
    body = _report(single, pairs, facts, quick, time.perf_counter() - began, rounds, duration)
    write_section(SECTION, body)
    print(body, file=sys.stderr)
    return 0


def _quiet(rows: list[dict[str, float]]) -> list[dict[str, float]]:
    kept = [r for r in rows if r["foreign"] <= NOISY_CORES]
    return kept if len(kept) >= 2 else rows


def _cluster_rows() -> list[list[str]]:
    """The "replicas on 1, 2, 3 hosts" rows of RESULTS.md's Cluster section, as written there."""
    text = RESULTS.read_text() if RESULTS.exists() else ""
    section = (
        text.split("\n## Cluster\n", 1)[-1].split("\n## ", 1)[0] if "\n## Cluster\n" in text else ""
    )
    return [
        list(m) for m in re.findall(r"^\| (\d) hosts? \| ([\d,]+) \| ([\d,]+) \|$", section, re.M)
    ]


def _report(
    single: dict[str, list[dict[str, float]]],
    pairs: list[dict[str, Any]],
    facts: dict[str, str],
    quick: bool,
    wall: float,
    rounds: int,
    duration: float,
) -> str:
    rows = []
    ceilings: dict[str, float] = {}
    for kind, (label, _) in KINDS.items():
        used = _quiet(single[kind])
        main_us = median(r["main_us"] for r in used)
        ceilings[kind] = 1e6 / main_us if main_us == main_us and main_us else float("nan")
        low, high = spread(r["main_us"] for r in single[kind])
        rows.append(
            [
                label,
                fmt(median(r["rate"] for r in used)),
                fmt(main_us, 1),
                f"{fmt(low, 1)}-{fmt(high, 1)}",
                fmt(median(r["host_us"] for r in used), 1),
                fmt(ceilings[kind]),
            ]
        )
    gains = [
        sum(b["rate"] for b in p["both"]) / p["alone"]["rate"] for p in pairs if p["alone"]["rate"]
    ]
    pair_rows = [
        [
            number,
            fmt(p["alone"]["rate"]),
            fmt(p["alone"]["main_us"], 1),
            " + ".join(fmt(b["rate"]) for b in p["both"]),
            " / ".join(fmt(b["main_us"], 1) for b in p["both"]),
            fmt(sum(b["rate"] for b in p["both"]) / p["alone"]["rate"], 2)
            if p["alone"]["rate"]
            else "-",
            fmt(max([p["alone"]["foreign"], *(b["foreign"] for b in p["both"])]), 2),
        ]
        for number, p in enumerate(pairs, start=1)
    ]
    loads = [r["foreign"] for v in single.values() for r in v if r["foreign"] == r["foreign"]]
    cluster = _cluster_rows()
    cluster_text = (
        "; ".join(
            f"{h} host(s): {rate} calls/s at {cpu} µs of CPU per task" for h, rate, cpu in cluster
        )
        if cluster
        else "(no replicas table in the Cluster section yet)"
    )
    batched = ceilings["batched"]
    lines = [
        f"Run on {facts['date']} at commit {facts['commit']}; {wall:.0f} s"
        + (" (`--quick`: a smoke check, not a measurement)" if quick else "")
        + ". `make bench ARGS='--only ceiling'` (bench/ceiling.py) reruns only this section.",
        "",
        "### One host process: the per-core ceiling",
        "",
        "The host serves gRPC, dispatches and reads its agents' stdout on one thread, the event "
        "loop's; grpc's threads and the agents run beside it. Its per-core ceiling is "
        "1e6 / (main-thread CPU µs per task): the tasks/s at which that thread is busy all the time. "
        f'The small echo task (`{{"n": 1, "text": "hello"}}`) to the Python SDK echo agent, '
        f"{rounds} rounds x {duration:g} s, order reversed every other round; medians over rounds where "
        f"other processes used at most {NOISY_CORES} cores (all rounds when fewer than two were).",
        "",
        markdown_table(
            [
                "path",
                "tasks/s here",
                "host main-thread CPU µs/task",
                "range",
                "host CPU µs/task, all threads",
                "per-core ceiling, tasks/s",
            ],
            rows,
        ),
        "",
        "No target is set for these (issue 27 item 5 asks for the figures): "
        + ", ".join(f"{k} {fmt(v)} tasks/s per core" for k, v in ceilings.items())
        + " (reported).",
        "",
        "### Several host processes on this machine",
        "",
        "Two hosts, each with its own echo agent and batched client, at once, against one host "
        "alone in the same round. Each host has a main thread of its own, but on this 2-vCPU "
        "machine the two hosts, their agents and clients share two cores with each other and with "
        "other processes (the last column): a gain here is partly a larger share of a shared "
        "machine, and says little of what a second process gives on a machine with cores to spare:",
        "",
        markdown_table(
            [
                "round",
                "one host tasks/s",
                "its main µs/task",
                "two hosts tasks/s",
                "their main µs/task",
                "two / one",
                "other load (cores)",
            ],
            pair_rows,
        ),
        "",
        f"Two hosts / one host, median: {fmt(median(gains), 2)} (range "
        f"{'-'.join(fmt(v, 2) for v in spread(gains))}; no target: reported).",
        "",
        "### What more hosts or host processes would give",
        "",
        f"- One host process is bounded by one core: about {fmt(batched)} small tasks/s in "
        f"batched Pipe, {fmt(ceilings['pipe'])} in Pipe and {fmt(ceilings['execute'])} in "
        "Execute, if the agents and grpc's threads have cores of their own (on this machine they do "
        "not: the rates measured here are below the ceilings).",
        "- Host processes scale by adding cores, not threads: each runs its own agents, so on a "
        "machine with N spare cores, N hosts (behind a load balancer, or in one cluster) serve up "
        "to N ceilings for tasks that stay on the host that receives them. That is not measured "
        "here: the table above is two processes on two shared cores.",
        "- A task that crosses hosts costs far more than a local one: the Cluster section "
        "(bench/cluster.py, Execute of ~1 KB to the Go echo agent through a host that runs none of "
        f"its replicas, CPU of every process of that run, all on this machine) measured "
        f"{cluster_text}. Every task there goes through Redis (a Lua script on each side and two "
        "blocking reads), several times the CPU of a local Execute above, and adding hosts to the "
        "same two cores only divides them; more hosts on more machines are not measured here. On "
        "separate machines each remote task still costs the calling host its share (the Cluster "
        "section's 'where a remote call's time goes' splits it), so a cluster grows throughput "
        "when clients call each host's own agents, and routes to other hosts for reach and "
        "failover, not for rate.",
        "",
        f"- Machine: {facts['nproc']} vCPUs ({facts['cpu']}), {facts['kernel']}, {facts['memory']}; "
        f"Python {facts['python']}; {facts['packages']}.",
        f"- Load from other processes during the measured windows: median {fmt(median(loads), 2)} "
        f"cores, max {fmt(max(loads, default=None), 2)}.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.ceiling")
    parser.add_argument("--quick", action="store_true", help="short runs: a smoke check")
    sys.exit(main(parser.parse_args().quick))
