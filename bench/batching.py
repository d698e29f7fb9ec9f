"""Suite "batching": batched Pipe against bare unary gRPC, the batch floor, and a workflow map stage.

Issue 27 item 2. Every throughput figure comes from a fresh client process
(``bench/echo/batch_client.py``), so the harness idles while it measures:

- bare gRPC: ``echo/grpc_server.py``'s unary echo of the bytes of one small ExecuteRequest,
  64 calls in flight on one channel;
- the batch floor: ``echo/batch_floor.py``, the least a Python grpc.aio host can do for a batch
  (parse the PipeRequest, write its tasks to ``echo/batch_child.py`` in one write, read the
  replies, answer one PipeResponse): no dispatcher, checks, logging, supervision or completion
  order;
- Ether: Pipe with ``inputs`` batches to the Python SDK echo agent (``echo/python``) deployed
  into a real host, outputs read from ``outputs``.

Both Pipe rows send batches of ``BATCH`` small echo tasks (``{"n": 1, "text": "hello"}`` as
params_json, data_json back) with at most ``WINDOW`` tasks in flight (the agent's
max_concurrency, so no task waits in the host's queue). Rounds run every target once, the order
reversed every other round; a verdict uses the median of a ratio's per-round values.

Then the workflow comparison: a 10,000-task one-stage map (WorkflowService: the engine sends
the stage's tasks through the dispatcher's batch path, Dispatcher.execute_batch, and persists
them in batches) against the same 10,000 tasks through batched Pipe, both at 64 in flight,
per-task wall time side by side; a py-spy profile of the host during map stages
(bench/map_profile.py); and the 100,000-task map on a fresh host with its memory
(bench/map_scale.py).

    python -m bench --only batching [--quick]
    python -m bench.batching --map-only [--quick]   # only the map parts, only their lines
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import map_profile, map_scale
from bench.agents_profile import areas
from bench.common import (
    LOCAL,
    NOISY_CORES,
    PYTHON,
    REPO,
    CpuMeter,
    EtherHost,
    median,
    read_json_line,
    spawn,
    spread,
    stop_process,
    wait_quiet,
)
from bench.profiling import py_spy_record
from bench.report import fmt, machine_facts, markdown_table, write_section

ECHO = Path(__file__).resolve().parent / "echo"
BATCH = 64  # tasks per PipeRequest
WINDOW = 128  # tasks in flight: the echo agent's max_concurrency
UNARY_IN_FLIGHT = 64
MAP_TASKS = 10_000
MAP_IN_FLIGHT = 64
MAP_ROUNDS = 5  # single stages of ~0.5 s each spread ±20 % on a shared 2-core machine
WAITED = "stage waits for the run store"  # the host's line when a stage waited for its writer
BIG_MAP_INPUTS = 10_000  # x map_scale.ACTIONS: the 100,000-task map
MAP_HEADING = "### Workflow map stage against batched Pipe"
TARGET_VS_UNARY = 3.0
TARGET_VS_FLOOR = 0.9
TARGET_MAP = 1.2


def run_client(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One measurement in a fresh client process. A client that fails to run is tried twice more
    after a pause (engineers sharing this tree regenerate code: the ``ether`` stubs vanish for a
    moment); a timeout is not retried."""
    for attempt in range(3):
        result = _client_once(spec, timeout)
        if "failed" not in result or attempt == 2 or "timed out" in result["failed"]:
            return result
        print(f"    failed, trying again in 3 s: {result['failed'][-200:]}", file=sys.stderr)
        time.sleep(3)
    raise AssertionError("unreachable")


def _client_once(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    argv = [PYTHON, "-m", "bench.echo.batch_client", json.dumps(spec)]
    env = os.environ | {"PYTHONPATH": str(REPO)}
    try:
        done = subprocess.run(
            argv, cwd=REPO, capture_output=True, text=True, env=env, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"failed": f"client timed out after {timeout:.0f}s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        return {"failed": f"client exit {done.returncode}: {done.stderr.strip()[-500:]}"}
    result: dict[str, Any] = json.loads(lines[-1])
    if result["errors"]:
        print(f"    {result['errors']} errors, first: {result['first_error']}", file=sys.stderr)
    return result


async def _pipe_batches(address: str, tasks: int, batch: int, window: int) -> float:
    """Seconds to run ``tasks`` echo tasks ``{"input": i}`` through one Pipe stream in batches."""
    import grpc

    from ether.v1 import agent_io_pb2, agent_io_pb2_grpc

    def task(i: int) -> agent_io_pb2.AgentInput:
        return agent_io_pb2.AgentInput(
            agent="echo-py",
            action="echo",
            params_json=b'{"input": %d}' % i,
            output_encoding=agent_io_pb2.DATA_ENCODING_JSON,
        )

    async with grpc.aio.insecure_channel(address) as channel:
        stub = agent_io_pb2_grpc.AgentIOServiceStub(channel)

        async def requests() -> Any:
            for start in range(0, tasks, batch):
                inputs = [task(i) for i in range(start, min(start + batch, tasks))]
                yield agent_io_pb2.PipeRequest(inputs=inputs, max_in_flight=window)

        began = time.perf_counter()
        done = errors = 0
        async for response in stub.Pipe(requests(), timeout=600):
            done += len(response.outputs)
            errors += sum(o.status != agent_io_pb2.TASK_STATUS_SUCCESS for o in response.outputs)
        elapsed = time.perf_counter() - began
    if done != tasks or errors:
        raise RuntimeError(f"Pipe: {done} outputs for {tasks} inputs, {errors} not successful")
    return elapsed


async def _map_stage(address: str, tasks: int) -> float:
    """Seconds from CreateRun to the end of a one-stage map of ``tasks`` echo tasks."""
    import grpc
    from google.protobuf import struct_pb2

    from ether.v1 import workflow_pb2, workflow_pb2_grpc

    spec = workflow_pb2.WorkflowSpec(name="bench-batching-map", max_concurrency=MAP_IN_FLIGHT)
    stage = spec.stages.add(
        name="map", agent="echo-py", action="echo", parallel=True, max_concurrency=MAP_IN_FLIGHT
    )
    stage.inputs.extend(struct_pb2.Value(number_value=i) for i in range(tasks))
    async with grpc.aio.insecure_channel(
        address, options=[("grpc.max_receive_message_length", 64 << 20)]
    ) as channel:
        stub = workflow_pb2_grpc.WorkflowServiceStub(channel)
        began = time.perf_counter()
        run = (await stub.CreateRun(workflow_pb2.CreateRunRequest(spec=spec), timeout=60)).run
        run = (await stub.WaitRun(workflow_pb2.WaitRunRequest(run_id=run.id), timeout=600)).run
        elapsed = time.perf_counter() - began
    if run.state != workflow_pb2.RUN_STATE_SUCCEEDED or run.tasks.succeeded != tasks:
        raise RuntimeError(f"workflow run {run.id} ended with {run.tasks.succeeded}/{tasks} tasks")
    return elapsed


def _timed(host: EtherHost, agent_pid: int, which: str, tasks: int) -> dict[str, float]:
    waits_before = _waits(host)
    meter = CpuMeter({"host": host.pid, "agent": agent_pid})
    meter.start()
    if which == "pipe":
        elapsed = asyncio.run(_pipe_batches(host.address, tasks, 100, MAP_IN_FLIGHT))
    else:
        elapsed = asyncio.run(_map_stage(host.address, tasks))
    cpu = meter.stop()
    return {
        "us_per_task": elapsed / tasks * 1e6,
        "host_cpu_us": cpu["cpu_s"]["host"] / tasks * 1e6,
        "foreign_cores": cpu["foreign_cores"],
        "waited": float(_waits(host) > waits_before),
    }


def _waits(host: EtherHost) -> int:
    """How many times the host has logged that a stage waited for the run store's writer."""
    return host.log_path.read_text(errors="replace").count(WAITED)


def _profile(host_pid: int, spec: dict[str, Any], raw: Path) -> dict[str, Any]:
    """py-spy on the host's main thread in the middle of a batched Pipe run, by area."""
    seconds = 4
    sampled: dict[str, Any] = {}

    def record() -> None:
        time.sleep(1.5)  # past the warm-up
        sampled["threads"] = py_spy_record(host_pid, seconds, raw)

    recorder = threading.Thread(target=record)
    recorder.start()
    load = run_client(spec | {"warmup": 0.5, "duration": seconds + 2.5}, seconds + 90)
    recorder.join()
    threads = sampled.get("threads")
    if "failed" in load or threads is None or not raw.exists():
        return {"failed": load.get("failed") or "py-spy recorded nothing"}
    return areas(raw) | {
        "rate": load["rate"],
        "host_cpu_us": load["cpu"]["cpu_s"].get("server", 0.0) / max(load["calls"], 1) * 1e6,
        "main_us": threads.main_cores / load["rate"] * 1e6 if load["rate"] else float("nan"),
        "path": str(raw),
    }


def _verdict(value: float, op: str, target: float) -> str:
    if value != value:
        return "-"
    return "MEETS" if (value >= target if op == ">=" else value <= target) else "MISS"


def main(quick: bool = False) -> int:
    rounds, warmup, duration = (1, 0.5, 1.5) if quick else (4, 0.5, 3.0)
    map_tasks, map_rounds = (1_000, 1) if quick else (MAP_TASKS, MAP_ROUNDS)
    began = time.perf_counter()
    facts = machine_facts()
    out = Path(tempfile.mkdtemp(prefix="ether-bench-batching-"))
    print(f"batching: starting the servers and the host (logs in {out})", file=sys.stderr)
    bare = spawn([PYTHON, str(ECHO / "grpc_server.py"), "--loop", "uvloop"])
    floor = spawn([PYTHON, str(ECHO / "batch_floor.py"), "--loop", "uvloop"])
    host: EtherHost | None = None
    runs: dict[str, list[dict[str, Any]]] = {"unary": [], "floor": [], "ether": []}
    maps: list[dict[str, dict[str, float]]] = []
    profile: dict[str, Any] = {}
    try:
        bare_address = f"{LOCAL}:{read_json_line(bare, timeout=30)['port']}"
        started = read_json_line(floor, timeout=30)
        floor_address, floor_child = f"{LOCAL}:{started['port']}", started["child"]
        host = EtherHost(out / "state", out / "host.log")
        agent = host.deploy(ECHO / "python", name="echo-py")
        agent_pid = host.pids(agent)[0]
        ours = [os.getpid(), bare.pid, floor.pid, floor_child, host.pid, agent_pid]
        timing = {"warmup": warmup, "duration": duration, "ours": ours}
        batches = {"batch": BATCH, "window": WINDOW}
        targets = {
            "unary": {
                "kind": "unary",
                "address": bare_address,
                "concurrency": UNARY_IN_FLIGHT,
                "pids": {"server": bare.pid},
            },
            "floor": {
                "kind": "batch",
                "address": floor_address,
                "agent": "echo",
                "pids": {"server": floor.pid, "child": floor_child},
                **batches,
            },
            "ether": {
                "kind": "batch",
                "address": host.address,
                "agent": agent,
                "pids": {"server": host.pid, "child": agent_pid},
                **batches,
            },
        }
        for number in range(rounds):
            order = list(targets) if number % 2 == 0 else list(targets)[::-1]
            for key in order:
                wait_quiet(ours, max_wait=10.0)
                result = run_client(timing | targets[key], warmup + duration + 60)
                runs[key].append(result | {"round": number})
                print(
                    f"  round {number + 1}/{rounds} {key:<6} "
                    + (result.get("failed") or f"{result['rate']:,.0f} tasks/s"),
                    file=sys.stderr,
                    flush=True,
                )
        if not quick:
            print("batching: profiling the host during batched Pipe", file=sys.stderr)
            profile = _profile(host.pid, timing | targets["ether"], out / "host-batched-pipe.txt")
        maps = _map_rounds(host, agent_pid, ours, map_tasks, map_rounds)
        map_profiled = {} if quick else _map_profile(host, out)
    finally:
        if host is not None:
            host.stop()
        stop_process(bare)
        stop_process(floor)
    big = _big_map(quick)
    body = _report(
        runs,
        maps,
        profile,
        facts,
        quick,
        time.perf_counter() - began,
        map_tasks,
        big,
        map_profiled,
    )
    write_section("Batching", body)
    print(body, file=sys.stderr)
    return 0


def _map_rounds(
    host: EtherHost, agent_pid: int, ours: list[int], map_tasks: int, map_rounds: int
) -> list[dict[str, dict[str, float]]]:
    """The map stage and batched Pipe side by side, ``map_rounds`` times, order alternating."""
    print(f"batching: {map_tasks:,}-task map stage against batched Pipe", file=sys.stderr)
    _timed(host, agent_pid, "pipe", 500)  # warm-up of both paths
    _timed(host, agent_pid, "map", 500)
    maps = []
    for number in range(map_rounds):
        figures: dict[str, dict[str, float]] = {}
        for which in ("pipe", "map") if number % 2 == 0 else ("map", "pipe"):
            wait_quiet(ours, max_wait=10.0)
            figures[which] = _timed(host, agent_pid, which, map_tasks)
            print(
                f"  map round {number + 1} {which}: {figures[which]['us_per_task']:.0f} µs/task",
                file=sys.stderr,
            )
        maps.append(figures)
    return maps


def _map_profile(host: EtherHost, out: Path) -> dict[str, Any]:
    """py-spy on the host while 10,000-task map stages run back to back."""
    print("batching: profiling the host during map stages", file=sys.stderr)

    def one_map() -> int:
        asyncio.run(_map_stage(host.address, MAP_TASKS))
        return MAP_TASKS

    try:
        return map_profile.measure(host.pid, one_map, out / "host-map-stage.txt")
    except Exception as error:  # reported in the section, the rest of it stands
        return {"failed": f"{type(error).__name__}: {error}"[:300]}


def _big_map(quick: bool) -> dict[str, Any]:
    """The 100,000-task map on a fresh host (10,000 tasks with --quick)."""
    inputs = BIG_MAP_INPUTS // 10 if quick else BIG_MAP_INPUTS
    print(f"batching: {inputs * map_scale.ACTIONS:,}-task map on a fresh host", file=sys.stderr)
    try:
        return map_scale.measure(inputs)
    except Exception as error:  # reported in the section, the rest of it stands
        return {"failed": f"{type(error).__name__}: {error}"[:300], "tasks": inputs * 10}


def main_map_only(quick: bool = False) -> int:
    """Only the map parts: their lines replace the map lines of the Batching section, the
    batched Pipe figures above them stay as the last full run left them."""
    map_tasks, map_rounds = (1_000, 1) if quick else (MAP_TASKS, MAP_ROUNDS)
    out = Path(tempfile.mkdtemp(prefix="ether-bench-batching-"))
    host = EtherHost(out / "state", out / "host.log")
    try:
        agent = host.deploy(ECHO / "python", name="echo-py")
        agent_pid = host.pids(agent)[0]
        maps = _map_rounds(
            host, agent_pid, [os.getpid(), host.pid, agent_pid], map_tasks, map_rounds
        )
        map_profiled = {} if quick else _map_profile(host, out)
    finally:
        host.stop()
    big = _big_map(quick)
    facts = machine_facts()
    stamp = (
        f"Map parts rerun on {facts['date']} at commit {facts['commit']} "
        f"(`python -m bench.batching --map-only`"
        + (", `--quick`: a smoke check, not a measurement" if quick else "")
        + ")."
    )
    new = [stamp, "", *_map_lines(maps, map_tasks, big, map_profiled)]
    print("\n".join(new), file=sys.stderr)
    _replace_map_lines(new)
    return 0


def _replace_map_lines(new: list[str]) -> None:
    """Put ``new`` in place of the Batching section's map lines: from MAP_HEADING (or the line
    stamping a map-only run above it) up to the machine facts, which belong to the whole run."""
    section = next((s for s in _sections() if s[0] == "## Batching"), None)
    if section is None:
        raise SystemExit("bench/RESULTS.md has no Batching section yet: run the whole suite first")
    _, body = section
    lines = body.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(MAP_HEADING))
    # The stamp of an earlier map-only run, and any note written under it, go too.
    stamp = next(
        (i for i in range(start - 1, -1, -1) if lines[i].startswith("Map parts rerun")), -1
    )
    if stamp >= 0 and not any(line.startswith("#") for line in lines[stamp:start]):
        start = stamp
    end = next(i for i, line in enumerate(lines) if line.startswith("- Machine:"))
    lines[start:end] = new
    write_section("Batching", "\n".join(lines))


def _sections() -> list[tuple[str, str]]:
    """(heading, body) of each ``## `` section of RESULTS.md."""
    from bench.report import RESULTS

    found: list[tuple[str, str]] = []
    for line in RESULTS.read_text().splitlines():
        if line.startswith("## "):
            found.append((line.strip(), ""))
        elif found:
            found[-1] = (found[-1][0], found[-1][1] + line + "\n")
    return found


def _rate(run: dict[str, Any]) -> float:
    return float(run.get("rate", float("nan"))) if "failed" not in run else float("nan")


def _cpu(runs: list[dict[str, Any]], role: str) -> float:
    ok = [r for r in runs if "failed" not in r and r["calls"]]
    return median(r["cpu"]["cpu_s"].get(role, 0.0) / r["calls"] * 1e6 for r in ok) if ok else 0.0


def _report(
    runs: dict[str, list[dict[str, Any]]],
    maps: list[dict[str, dict[str, float]]],
    profile: dict[str, Any],
    facts: dict[str, str],
    quick: bool,
    wall: float,
    map_tasks: int,
    big: dict[str, Any],
    map_profiled: dict[str, Any],
) -> str:
    rounds = range(len(runs["unary"]))

    def per_round(top: str, bottom: str) -> list[float]:
        return [_rate(runs[top][n]) / _rate(runs[bottom][n]) for n in rounds]

    def quiet_rounds() -> list[int]:
        loads = [
            max(runs[k][n].get("cpu", {}).get("foreign_cores", 9) for k in runs) for n in rounds
        ]
        quiet = [n for n in rounds if loads[n] <= NOISY_CORES]
        return quiet if len(quiet) >= 2 else list(rounds)

    used = quiet_rounds()
    floor_vs_unary = per_round("floor", "unary")
    ether_vs_unary = per_round("ether", "unary")
    ether_vs_floor = per_round("ether", "floor")
    floor_median = median(floor_vs_unary[n] for n in used)
    floor_below = floor_median < TARGET_VS_UNARY
    # The throughput ratio that CPU per task predicts when both sides are CPU-bound on the same
    # cores (all of a target's processes: server, child, client): steadier under other load.
    cpu_total = {
        key: sum(_cpu(runs[key], role) for role in ("server", "child", "client")) for key in runs
    }

    def from_cpu(top: str, bottom: str) -> str:
        return fmt(cpu_total[bottom] / cpu_total[top], 2) if cpu_total[top] else "-"

    ratio_rows = []
    for name, values, op, target, applies, pair in (
        (
            "Ether batched Pipe / bare unary",
            ether_vs_unary,
            ">=",
            TARGET_VS_UNARY,
            not floor_below,
            ("ether", "unary"),
        ),
        (
            "floor batched Pipe / bare unary",
            floor_vs_unary,
            ">=",
            TARGET_VS_UNARY,
            False,
            ("floor", "unary"),
        ),
        (
            "Ether batched Pipe / floor",
            ether_vs_floor,
            ">=",
            TARGET_VS_FLOOR,
            floor_below,
            ("ether", "floor"),
        ),
    ):
        value = median(values[n] for n in used)
        low, high = spread(values)
        verdict = _verdict(value, op, target) if applies else "(reference)"
        ratio_rows.append(
            [
                name,
                f"{op} {target}",
                fmt(value, 2),
                f"{fmt(low, 2)}-{fmt(high, 2)}",
                verdict,
                from_cpu(*pair),
            ]
        )
    labels = {
        "unary": f"bare grpc.aio unary echo, {UNARY_IN_FLIGHT} in flight",
        "floor": "batch floor (echo/batch_floor.py)",
        "ether": "Ether Pipe, batched, Python SDK echo agent",
    }
    rows = []
    for key, label in labels.items():
        rates = [_rate(r) for r in runs[key]]
        low, high = spread(rates)
        rows.append(
            [
                label,
                fmt(median(rates)),
                f"{fmt(low)}-{fmt(high)}",
                fmt(_cpu(runs[key], "server"), 1),
                fmt(_cpu(runs[key], "child"), 1),
                fmt(_cpu(runs[key], "client"), 1),
            ]
        )
    loads = [r["cpu"]["foreign_cores"] for v in runs.values() for r in v if "failed" not in r]
    failed = [
        f"- A {k} run failed: {r['failed'][:200]}"
        for k, v in runs.items()
        for r in v
        if "failed" in r
    ]
    note = (
        "The floor itself is below 3x bare unary on this machine, so Ether is held to 0.9x the floor."
        if floor_below
        else "The floor reaches 3x bare unary, so Ether is held to the 3x target itself; Ether / floor is "
        "shown for reference."
    )
    lines = [
        f"Run on {facts['date']} at commit {facts['commit']}; {wall:.0f} s"
        + (" (`--quick`: a smoke check, not a measurement)" if quick else "")
        + ". `make bench ARGS='--only batching'` reruns only this section.",
        "",
        f'Small echo tasks (`{{"n": 1, "text": "hello"}}`, params_json in, data_json out) in '
        f"PipeRequest.inputs batches of {BATCH} with at most {WINDOW} tasks in flight (the echo "
        f"agent's max_concurrency), against bare grpc.aio unary echo of the same small ExecuteRequest's "
        f"bytes; {len(runs['unary'])} rounds x {'1.5' if quick else '3'} s, the order reversed every "
        f"other round. Verdicts use the median over rounds where other processes used at most "
        f"{NOISY_CORES} cores (all rounds when fewer than two were that quiet: {len(used)} used). {note}",
        "",
        markdown_table(
            ["ratio", "target", "median", "range, all rounds", "verdict", "from CPU µs/task"],
            ratio_rows,
        ),
        "",
        "The last column is the ratio that CPU per task predicts when both sides are CPU-bound on "
        "the same two cores (the other side's total CPU µs per task, server + child + client, over "
        "this side's): a cross-check that holds still while other processes take a varying share.",
        "",
        markdown_table(
            [
                "target",
                "tasks/s (median)",
                "range",
                "server CPU µs/task",
                "child CPU µs/task",
                "client CPU µs/task",
            ],
            rows,
        ),
        "",
        *_profile_lines(profile),
        *_map_lines(maps, map_tasks, big, map_profiled),
        f"- Machine: {facts['nproc']} vCPUs ({facts['cpu']}), {facts['kernel']}, {facts['memory']}; "
        f"Python {facts['python']}; {facts['packages']}.",
        f"- Load from other processes during the measured windows: median {fmt(median(loads), 2)} cores, "
        f"max {fmt(max(loads, default=None), 2)}.",
        "- CPU is time on CPU (/proc/<pid>/task/*/schedstat) over the measured window per task "
        'completed; "server" is the bare server, the floor or the Ether host, "child" the floor\'s '
        "stdio child or the echo agent.",
        *failed,
    ]
    return "\n".join(lines)


def _map_lines(
    maps: list[dict[str, dict[str, float]]],
    map_tasks: int,
    big: dict[str, Any],
    profiled: dict[str, Any],
) -> list[str]:
    """The map stage against batched Pipe, and the 100,000-task map, for the report."""
    map_ratio = [m["map"]["us_per_task"] / m["pipe"]["us_per_task"] for m in maps]
    map_cpu = [m["map"]["host_cpu_us"] / m["pipe"]["host_cpu_us"] for m in maps]
    map_rows = [
        [
            number,
            which,
            fmt(m[key]["us_per_task"]),
            fmt(m[key]["host_cpu_us"]),
            fmt(m[key]["foreign_cores"], 2),
            ("yes" if m[key].get("waited") else "no") if key == "map" else "-",
        ]
        for number, m in enumerate(maps, start=1)
        for key, which in (
            ("pipe", "batched Pipe (100 per request)"),
            ("map", "workflow map stage"),
        )
    ]
    pipe_us = median(m["pipe"]["us_per_task"] for m in maps)
    pipe_cpu = median(m["pipe"]["host_cpu_us"] for m in maps)
    return [
        f"### Workflow map stage against batched Pipe ({map_tasks:,} tasks, {MAP_IN_FLIGHT} in flight)",
        "",
        "The stage's tasks go through the dispatcher's batch path, as batched Pipe's do "
        "(Dispatcher.execute_batch: no coroutine per task, no protobuf per task; each task's start "
        "and end recorded from callbacks), and the run's task rows and events go to the store in "
        "batches (workflows/writes.py): a batch's events share rows of the events table, a "
        "run's task rows of a commit go in as statements of up to 1,000 rows (workflows/store.py: "
        "an executemany took the GIL back for every row, and with the event loop busy each take "
        "waited its switch interval, so the writer fell behind and the stage waited on it), the "
        "stage's plan "
        "does not count in the backlog the stage waits on (stage_pipe.py), and a task's events "
        "and its finished row are encoded to JSON once, on the event loop (writes.py); a task "
        "that succeeded frees its slot before it is recorded, so the tasks that take it are sent "
        "first (stage_pipe.py). A stage waits while the store's writer is 10,000 rows behind "
        f"(MAX_BACKLOG; the host logs '{WAITED}' once per stage). The host's "
        "young GC generation is 10,000 objects (main.py): a map keeps a record, a result and its "
        "metadata per finished task. Per-task wall time from CreateRun to the run's end, against "
        "the same tasks through batched Pipe, side by side:",
        "",
        markdown_table(
            [
                "ratio",
                "target",
                "median",
                "range",
                "verdict",
            ],
            [
                [
                    "map stage µs/task / batched Pipe µs/task",
                    f"<= {TARGET_MAP}",
                    fmt(median(map_ratio), 2),
                    "-".join(fmt(v, 2) for v in spread(map_ratio)),
                    _verdict(median(map_ratio), "<=", TARGET_MAP),
                ],
                [
                    "map stage host CPU/task / batched Pipe host CPU/task",
                    "(reported)",
                    fmt(median(map_cpu), 2),
                    "-".join(fmt(v, 2) for v in spread(map_cpu)),
                    "-",
                ],
            ],
        ),
        "",
        markdown_table(
            [
                "round",
                "path",
                "µs/task",
                "host CPU µs/task",
                "other load (cores)",
                "stage waited for the store",
            ],
            map_rows,
        ),
        "",
        *map_profile.lines(profiled, pipe_cpu),
        *map_scale.lines(big, pipe_us, pipe_cpu),
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.batching")
    parser.add_argument("--quick", action="store_true", help="short runs: a smoke check")
    parser.add_argument(
        "--map-only",
        action="store_true",
        help="only the map parts, only their lines of the section",
    )
    arguments = parser.parse_args()
    entry = main_map_only if arguments.map_only else main
    sys.exit(entry(arguments.quick))


def _profile_lines(profile: dict[str, Any]) -> list[str]:
    """Where the host's time goes in batched Pipe (py-spy, main thread), for the report."""
    if not profile:
        return []
    title = "### Where the host's time goes in batched Pipe (py-spy, main thread)"
    if "failed" in profile:
        return [title, "", f"py-spy failed: {profile['failed']}", ""]
    return [
        title,
        "",
        f"`py-spy record --rate 200 --threads` of the host in the middle of a batched run at "
        f"{fmt(profile['rate'])} tasks/s: {fmt(profile['host_cpu_us'], 1)} µs of host CPU per task, "
        f"{fmt(profile['main_us'], 1)} of them on the main thread, which is what bounds the rate "
        f"(one core: at most {fmt(1e6 / profile['main_us'] if profile['main_us'] else None)} "
        f"tasks/s). Samples by area (the innermost frame under the event loop that names one) "
        f"and the top functions by own time; raw stacks: `{profile['path']}`.",
        "",
        markdown_table(["area", "% of samples"], [[n, fmt(p, 1)] for n, p in profile["areas"]]),
        "",
        markdown_table(
            ["top functions, own time", "% of samples"],
            [[f"`{n}`", fmt(p, 1)] for n, p in profile["top"]],
        ),
        "",
    ]
