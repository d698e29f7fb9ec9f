"""Suite "workflows": a 10,000-task map through WorkflowService against the same tasks through Pipe.

Issue 6 item 8. One host, the Python echo agent (``echo/python``) with 2 replicas. In each round:

- Pipe: one ``AgentIOService.Pipe`` stream carries 10,000 inputs ``{"input": i}`` with 64 in
  flight; timed from the first request sent to the last output read.
- Workflow: ``CreateRun`` of a one-stage spec (given as a message) whose 10,000 literal inputs run
  in parallel with ``max_concurrency`` 64, then ``WaitRun``; timed from CreateRun to the end of
  the run (validation, persistence of every task and event to SQLite included).

Per-task overhead is wall time / tasks; the ratio workflow / Pipe is the target (<= 1.5). Host CPU
per task (from /proc schedstat) is reported beside it: the steadier figure on a shared VM. The
order of the two alternates from one round to the next; the verdict uses the median ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, CpuMeter, EtherHost, median, spread, wait_quiet
from bench.report import fmt, machine_facts, markdown_table, write_section

ECHO = Path(__file__).resolve().parent / "echo" / "python"
TASKS = 10_000
IN_FLIGHT = 64
ROUNDS = 3
TARGET = 1.5


async def _pipe(address: str, tasks: int) -> float:
    """Seconds to run ``tasks`` echo tasks through one Pipe stream."""
    import grpc
    from google.protobuf import struct_pb2

    from ether.v1 import agent_io_pb2, agent_io_pb2_grpc

    async with grpc.aio.insecure_channel(address) as channel:
        stub = agent_io_pb2_grpc.AgentIOServiceStub(channel)

        async def requests() -> Any:
            for i in range(tasks):
                params = struct_pb2.Struct()
                params.update({"input": i})
                yield agent_io_pb2.PipeRequest(
                    input=agent_io_pb2.AgentInput(agent="echo-py", action="echo", params=params),
                    max_in_flight=IN_FLIGHT,
                )

        began = time.perf_counter()
        done = errors = 0
        async for response in stub.Pipe(requests(), timeout=600):
            done += 1
            errors += response.output.status != agent_io_pb2.TASK_STATUS_SUCCESS
        elapsed = time.perf_counter() - began
    if done != tasks or errors:
        raise RuntimeError(f"Pipe: {done} outputs for {tasks} inputs, {errors} not successful")
    return elapsed


async def _workflow(address: str, tasks: int) -> tuple[float, dict[str, Any]]:
    """Seconds from CreateRun to the end of a run of ``tasks`` echo tasks; and the run's usage."""
    import grpc
    from google.protobuf import struct_pb2

    from ether.v1 import workflow_pb2, workflow_pb2_grpc

    spec = workflow_pb2.WorkflowSpec(name="bench-map", max_concurrency=IN_FLIGHT)
    stage = spec.stages.add(
        name="map", agent="echo-py", action="echo", parallel=True, max_concurrency=IN_FLIGHT
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
        raise RuntimeError(
            f"workflow run {run.id} ended {workflow_pb2.RunState.Name(run.state)} "
            f"with {run.tasks.succeeded}/{tasks} tasks: {run.error.message}"
        )
    return elapsed, {"id": run.id, "events": run.last_sequence}


def _measure(host: EtherHost, replicas: list[int], which: str, tasks: int) -> dict[str, Any]:
    meter = CpuMeter({"host": host.pid, **{f"agent{i}": pid for i, pid in enumerate(replicas)}})
    meter.start()
    if which == "pipe":
        elapsed, extra = asyncio.run(_pipe(host.address, tasks)), {}
    else:
        elapsed, extra = asyncio.run(_workflow(host.address, tasks))
    cpu = meter.stop()
    return {
        "wall_s": elapsed,
        "us_per_task": elapsed / tasks * 1e6,
        "host_cpu_us": cpu["cpu_s"]["host"] / tasks * 1e6,
        "agents_cpu_us": sum(v for k, v in cpu["cpu_s"].items() if k.startswith("agent"))
        / tasks
        * 1e6,
        "foreign_cores": cpu["foreign_cores"],
        **extra,
    }


def main(quick: bool = False) -> int:
    tasks = 1_000 if quick else TASKS
    rounds = 1 if quick else ROUNDS
    started = time.monotonic()
    facts = machine_facts()
    with (
        tempfile.TemporaryDirectory(prefix="ether-bench-wf-") as state,
        EtherHost(Path(state) / "state", Path(state) / "host.log") as host,
    ):
        host.deploy(ECHO, replicas=2)
        replicas = host.pids("echo-py")
        print(f"workflows: echo-py with {len(replicas)} replicas; warming up", file=sys.stderr)
        _measure(host, replicas, "pipe", 500)
        _measure(host, replicas, "workflow", 500)
        results: list[dict[str, dict[str, Any]]] = []
        for number in range(rounds):
            order = ("pipe", "workflow") if number % 2 == 0 else ("workflow", "pipe")
            figures: dict[str, dict[str, Any]] = {}
            for which in order:
                wait_quiet([host.pid, *replicas], max_wait=20)
                figures[which] = _measure(host, replicas, which, tasks)
                print(
                    f"workflows: round {number + 1} {which}: {figures[which]['us_per_task']:.0f} µs/task",
                    file=sys.stderr,
                )
            results.append(figures)
    ratios = [r["workflow"]["us_per_task"] / r["pipe"]["us_per_task"] for r in results]
    cpu_ratios = [r["workflow"]["host_cpu_us"] / r["pipe"]["host_cpu_us"] for r in results]
    verdict = "MEETS" if median(ratios) <= TARGET else "MISS"
    low, high = spread(ratios)
    rows = []
    for number, figures in enumerate(results, start=1):
        for which in ("pipe", "workflow"):
            f = figures[which]
            rows.append(
                [
                    number,
                    "AgentIOService.Pipe" if which == "pipe" else "WorkflowService map",
                    fmt(f["wall_s"], 2),
                    fmt(f["us_per_task"]),
                    fmt(f["host_cpu_us"]),
                    fmt(f["agents_cpu_us"]),
                    fmt(f["foreign_cores"], 2),
                ]
            )
    body = f"""\
Run on {facts["date"]} at commit {facts["commit"]}; {time.monotonic() - started:.0f} s. \
`make bench ARGS='--only workflows'` reruns only this section.{" QUICK RUN: not a measurement." if quick else ""}

{tasks:,} echo tasks ({{"input": i}}) to the Python echo agent with 2 replicas, {IN_FLIGHT} in flight, \
through one Pipe stream and as one workflow run (a one-stage map, spec given as a message, every task \
and event persisted to SQLite), side by side in {rounds} round(s), alternating which goes first.

| ratio | issue | target | median | range | verdict |
|---|---|---|---|---|---|
| workflow µs/task / Pipe µs/task | 6 | <= {TARGET} | {median(ratios):.2f} | {low:.2f}-{high:.2f} | {verdict} |
| workflow host CPU/task / Pipe host CPU/task | 6 | (reported) | {median(cpu_ratios):.2f} | \
{spread(cpu_ratios)[0]:.2f}-{spread(cpu_ratios)[1]:.2f} | - |

{markdown_table(["round", "path", "wall s", "µs/task", "host CPU µs/task", "agents CPU µs/task", "other load (cores)"], rows)}

- Pipe is timed from the first request to the last output on a grpc.aio client in the harness; the
  workflow from CreateRun to WaitRun's answer (the client idles meanwhile). "host CPU" is the
  `ether serve` process; "agents" the two echo processes.
- Machine: {facts["nproc"]} vCPUs ({facts["cpu"]}), {facts["kernel"]}, {facts["memory"]}; Python \
{facts["python"]}; {facts["packages"]}.
"""
    write_section("Workflows", body)
    print(f"workflows: ratio {median(ratios):.2f} (target <= {TARGET}) {verdict}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.workflows")
    parser.add_argument("--quick", action="store_true")
    sys.exit(main(parser.parse_args().quick))


__all__ = ["REPO", "main"]
