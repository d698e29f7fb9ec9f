"""The 100,000-task map workflow (issue 27 item 4): host memory while it runs, and per task.

A fresh host (so its peak RSS is this run's) with the Python SDK echo agent runs one map stage
of ``inputs`` x ``ACTIONS`` echo tasks (a spec's inputs are bounded at 256 KiB, so 10,000
inputs each mapped over ten actions), then the same measurement is taken while the finished
run's events are replayed through StreamRunEvents and its JSON report is asked for: neither may
hold every event or task in memory. A 10,000-task run before it on the same host says what the
memory grows by per task. RSS is /proc/<pid>/status VmRSS sampled every 20 ms (the peak is the
highest sample; VmHWM, the kernel's high-water mark, is shown too). "After it ended" is sampled
once the host logged that it handed the run's freed memory back (workflows/live_runs.py trims the
heap after a run of TRIM_AFTER_TASKS or more; its log line says how much and how long it took),
or TRIM_WAIT s after the run's end where no such line comes.

Used by bench/batching.py (``--map-only`` runs only the map parts).
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import CpuMeter, EtherHost
from bench.report import fmt, markdown_table

ECHO = Path(__file__).resolve().parent / "echo"
ACTIONS = 10  # map actions per input: tasks = inputs x ACTIONS
MIB = 1024 * 1024
TRIM_WAIT = 5.0  # seconds after the run's end to wait for the host's "heap trimmed" line
TRIM_EVENT = "heap trimmed after a large run"
# Measured once, not by each run: this bench's host at 869f3e6, the commit before the host handed
# a run's memory back, two rounds interleaved with 869f3e6 plus that change (db34bc9's files).
BEFORE = (
    "Before the host handed a run's memory back (869f3e6; two rounds interleaved with 869f3e6 "
    "plus db34bc9's change, 2026-11-27, a loaded machine): 291.9 and 294.2 MiB 5 s after the 100,000-task map ended "
    "(idle 105.9 and 103.9), against 173.6 and 170.8 MiB once the host had trimmed (idle 104.4 "
    "and 104.0; 19.6 and 17.1 MiB handed back, in 15.4 and 9.2 ms); the peaks the same (320-325 "
    "MiB); the peak while the events replay 313.0 and 315.5 against 180.0 and 177.4, while the "
    "report is asked for 310.8 and 319.7 against 260.1 and 260.4. The run's 100,000 task records "
    "lived on after it ended, in reference cycles through the dispatcher's per-task callbacks, "
    "until the cyclic collector's next full pass (an idle host may not run one for a long time); "
    "the run store's writer held the run's last row, with its 100,000 results, until its next "
    "write; and glibc kept the pages the run freed. Now the records go as the run ends, and a "
    "run of 1,000 tasks or more trims the heap (glibc's malloc_trim, in a worker thread). What "
    "stays above idle is mostly the interpreter's own small-object arenas: after the run, 81 of "
    "them (1 MiB each) against 43 at idle, holding as many bytes of live objects as at idle and "
    "38.5 MiB of empty pools; an arena goes back to the OS only once wholly empty "
    "(sys._debugmallocstats() in the host, 2026-11-27)."
)


def _status(pid: int, key: str) -> int:
    """A memory figure of /proc/<pid>/status in bytes (0 once the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class RssPeak:
    """The highest VmRSS of a process over a window, sampled every 20 ms by a thread."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = _status(pid, "VmRSS")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> RssPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, _status(self.pid, "VmRSS"))


async def _map_run(address: str, inputs: int, agent: str) -> tuple[float, str, int]:
    """(seconds from CreateRun to the run's end, run id, tasks succeeded)."""
    import grpc
    from google.protobuf import struct_pb2

    from ether.v1 import workflow_pb2, workflow_pb2_grpc

    spec = workflow_pb2.WorkflowSpec(name="bench-map-scale", max_concurrency=64)
    stage = spec.stages.add(name="map", parallel=True, max_concurrency=64)
    stage.inputs.extend(struct_pb2.Value(number_value=i) for i in range(inputs))
    for k in range(ACTIONS):
        action = stage.map.add(agent=agent, action="echo")
        action.params.update({"k": k})
    options = [("grpc.max_receive_message_length", 256 << 20)]
    async with grpc.aio.insecure_channel(address, options=options) as channel:
        stub = workflow_pb2_grpc.WorkflowServiceStub(channel)
        began = time.perf_counter()
        run = (await stub.CreateRun(workflow_pb2.CreateRunRequest(spec=spec), timeout=120)).run
        run = (await stub.WaitRun(workflow_pb2.WaitRunRequest(run_id=run.id), timeout=1800)).run
        elapsed = time.perf_counter() - began
    if run.state != workflow_pb2.RUN_STATE_SUCCEEDED:
        raise RuntimeError(f"run {run.id} ended {run.state}: {run.error.message}")
    return elapsed, run.id, run.tasks.succeeded


async def _replay(address: str, run_id: str) -> int:
    """Every event of the run through StreamRunEvents; how many."""
    import grpc

    from ether.v1 import workflow_pb2, workflow_pb2_grpc

    async with grpc.aio.insecure_channel(address) as channel:
        stub = workflow_pb2_grpc.WorkflowServiceStub(channel)
        count = 0
        request = workflow_pb2.StreamRunEventsRequest(run_id=run_id)
        async for _ in stub.StreamRunEvents(request, timeout=1800):
            count += 1
        return count


async def _report(address: str, run_id: str) -> str:
    """The JSON report's size, or the status it was refused with."""
    import grpc

    from ether.v1 import workflow_pb2, workflow_pb2_grpc

    options = [("grpc.max_receive_message_length", 256 << 20)]
    async with grpc.aio.insecure_channel(address, options=options) as channel:
        stub = workflow_pb2_grpc.WorkflowServiceStub(channel)
        request = workflow_pb2.GetRunReportRequest(
            run_id=run_id, format=workflow_pb2.REPORT_FORMAT_JSON
        )
        try:
            response = await stub.GetRunReport(request, timeout=600)
        except grpc.aio.AioRpcError as error:
            return f"{error.code().name}: {error.details()}"
        return f"{len(response.content) / MIB:.1f} MiB of JSON"


def _trimmed(host: EtherHost, run_id: str) -> dict[str, Any] | None:
    """The host's log line saying it trimmed its heap after ``run_id``, waited for up to
    TRIM_WAIT s (None: no such line, as from a host that does not trim)."""
    deadline = time.monotonic() + TRIM_WAIT
    while time.monotonic() < deadline:
        for record in host.records():
            if record.get("event") == TRIM_EVENT and record.get("run_id") == run_id:
                return record
        time.sleep(0.01)
    return None


def measure(inputs: int, out: Path | None = None) -> dict[str, Any]:
    """A fresh host: a run of inputs/10 x ACTIONS tasks, then one of inputs x ACTIONS, then the
    big run's events replayed and its report asked for; memory and time of each."""
    out = out or Path(tempfile.mkdtemp(prefix="ether-bench-map-scale-"))
    host = EtherHost(out / "state", out / "host.log")
    figures: dict[str, Any] = {"tasks": inputs * ACTIONS, "small_tasks": inputs // 10 * ACTIONS}
    try:
        agent = host.deploy(ECHO / "python", name="echo-py")
        agent_pid = host.pids(agent)[0]
        asyncio.run(_map_run(host.address, 50, agent))  # warm-up: every path loaded once
        figures["idle_rss"] = _status(host.pid, "VmRSS")
        with RssPeak(host.pid) as small:
            asyncio.run(_map_run(host.address, inputs // 10, agent))
        figures["small_peak"] = small.peak
        meter = CpuMeter({"host": host.pid, "agent": agent_pid})
        meter.start()
        with RssPeak(host.pid) as big:
            elapsed, run_id, succeeded = asyncio.run(_map_run(host.address, inputs, agent))
        cpu = meter.stop()
        trimmed = _trimmed(host, run_id)
        figures |= {
            "peak": big.peak,
            "after": _status(host.pid, "VmRSS"),
            "trim_released": None if trimmed is None else trimmed.get("released_bytes"),
            "trim_ms": None if trimmed is None else trimmed.get("took_ms"),
            "us_per_task": elapsed / figures["tasks"] * 1e6,
            "host_cpu_us": cpu["cpu_s"]["host"] / figures["tasks"] * 1e6,
            "foreign_cores": cpu["foreign_cores"],
            "succeeded": succeeded,
        }
        with RssPeak(host.pid) as replay:
            figures["events"] = asyncio.run(_replay(host.address, run_id))
        figures["replay_peak"] = replay.peak
        with RssPeak(host.pid) as reported:
            figures["report"] = asyncio.run(_report(host.address, run_id))
        figures["report_peak"] = reported.peak
        figures["hwm"] = _status(host.pid, "VmHWM")
    finally:
        host.stop()
    return figures


def lines(figures: dict[str, Any], pipe_us: float, pipe_cpu_us: float) -> list[str]:
    """The '100,000-task map' paragraph of the Batching section."""
    if "failed" in figures:
        return [f"### {fmt(figures.get('tasks'))}-task map", "", f"Failed: {figures['failed']}", ""]
    tasks, small = figures["tasks"], figures["small_tasks"]
    idle = figures["idle_rss"]
    per_task = (figures["peak"] - idle) / tasks
    small_per_task = (figures["small_peak"] - idle) / small
    mib = lambda value: fmt(value / MIB, 1)  # noqa: E731
    rows = [
        ["idle, echo agent deployed", mib(idle), "-"],
        [f"peak during a {fmt(small)}-task map", mib(figures["small_peak"]), fmt(small_per_task)],
        [f"peak during the {fmt(tasks)}-task map", mib(figures["peak"]), fmt(per_task)],
        [_after_label(figures), mib(figures["after"]), "-"],
        [
            f"peak while its {fmt(figures['events'])} events replay",
            mib(figures["replay_peak"]),
            "-",
        ],
        ["peak while its JSON report is asked for", mib(figures["report_peak"]), "-"],
        ["VmHWM (the kernel's high-water mark)", mib(figures["hwm"]), "-"],
    ]
    ratio = figures["us_per_task"] / pipe_us if pipe_us else float("nan")
    cpu_ratio = figures["host_cpu_us"] / pipe_cpu_us if pipe_cpu_us else float("nan")
    return [
        f"### {fmt(tasks)}-task map",
        "",
        f"One map stage of {fmt(tasks // ACTIONS)} inputs x {ACTIONS} actions (a spec's inputs "
        f"are bounded at 256 KiB) to the Python echo agent at 64 in flight, on a fresh host: "
        f"{fmt(figures['us_per_task'])} µs per task from CreateRun to the run's end "
        f"({fmt(ratio, 2)} x batched Pipe's {fmt(pipe_us)} µs above), host CPU "
        f"{fmt(figures['host_cpu_us'])} µs per task ({fmt(cpu_ratio, 2)} x), "
        f"{fmt(figures['succeeded'])} tasks succeeded; other load {fmt(figures['foreign_cores'], 2)} "
        f"cores. The report: {figures['report']}.",
        "",
        markdown_table(["host RSS", "MiB", "bytes per task over idle"], rows),
        "",
        BEFORE,
        "",
    ]


def _after_label(figures: dict[str, Any]) -> str:
    released = figures.get("trim_released")
    if released is None:
        return f"after it ended ({fmt(TRIM_WAIT)} s later: no heap trim logged)"
    return (
        f"after it ended, once the host trimmed its heap ({fmt(released / MIB, 1)} MiB "
        f"handed back, in {fmt(figures.get('trim_ms'), 1)} ms)"
    )
