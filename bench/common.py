"""Shared helpers for the benchmark suites: statistics, CPU accounting, bounded timing loops,
child processes and a real Ether host (machine facts and RESULTS.md: report.py; py-spy:
profiling.py).

Every loop here is bounded by a count or a clock, every process is started by us and stopped by
its pid, and everything listens on 127.0.0.1 only.

CPU figures come from /proc/<pid>/task/*/schedstat (time on CPU, every thread, in ns). On this 2-vCPU VM they are
steadier than any latency (see ../shared/research/perf-baselines.md); ``foreign_cores`` is the CPU
that processes other than ours used during a measured window, to spot a noisy neighbour.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
ETHER = REPO / ".venv" / "bin" / "ether"
TICK = os.sysconf("SC_CLK_TCK")
LOCAL = "127.0.0.1"


# --- statistics ----------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: Iterable[float]) -> float:
    return percentile([v for v in values if v == v], 50)


def spread(values: Iterable[float]) -> tuple[float, float]:
    kept = [v for v in values if v == v]
    return (min(kept), max(kept)) if kept else (float("nan"), float("nan"))


# --- CPU accounting from /proc -------------------------------------------------------------------


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds each live thread of ``pid`` has used (nanosecond resolution from
    /proc/<pid>/task/<tid>/schedstat; stat's 10 ms ticks are too coarse for µs per call).
    Empty once the process is gone."""
    found = {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return {}
    for task in tasks:
        try:
            found[int(task.name)] = int((task / "schedstat").read_text().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            continue
    return found


def process_cpu(pid: int) -> float | None:
    """CPU seconds (user + system, live threads) used so far by ``pid``; None once it is gone."""
    threads = thread_cpu(pid)
    return sum(threads.values()) if threads else None


def _cpu_since(pid: int, start: dict[int, float]) -> float:
    """CPU used by ``pid`` since the per-thread snapshot ``start`` (a thread that ended in between
    loses only its own share of the window)."""
    return sum(now - start.get(tid, 0.0) for tid, now in thread_cpu(pid).items())


def system_busy() -> float:
    """CPU seconds all CPUs have spent not idle since boot (the ``cpu`` line of /proc/stat)."""
    with open("/proc/stat") as handle:
        values = [int(v) for v in handle.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    guest = sum(values[8:10]) if len(values) > 9 else 0  # already counted in user and nice
    return (sum(values) - idle - guest) / TICK


def children_of(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (scans /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        if int(raw[raw.rindex(")") + 2 :].split()[1]) == pid:
            found.append(int(entry.name))
    return found


@dataclass
class CpuMeter:
    """CPU used by named processes over one window, and by everybody else (``foreign_cores``).

    ``pids`` are the processes to report by name; ``ours`` are further processes of this run
    (idle or not) that must not count as foreign load.
    """

    pids: dict[str, int]
    ours: list[int] = field(default_factory=list)
    _start: dict[int, dict[int, float]] = field(default_factory=dict)
    _wall: float = 0.0
    _busy: float = 0.0
    result: dict[str, Any] = field(default_factory=dict)

    def _all(self) -> set[int]:
        return set(self.pids.values()) | set(self.ours) | {os.getpid()}

    def start(self) -> None:
        self._start = {pid: thread_cpu(pid) for pid in self._all()}
        self._busy = system_busy()
        self._wall = time.perf_counter()

    def stop(self) -> dict[str, Any]:
        wall = time.perf_counter() - self._wall
        busy = system_busy() - self._busy
        used = {pid: _cpu_since(pid, start) for pid, start in self._start.items()}
        ours = sum(used.values())
        self.result = {
            "wall_s": wall,
            "cpu_s": {name: used.get(pid, 0.0) for name, pid in self.pids.items()},
            "foreign_cores": max(0.0, (busy - ours) / wall) if wall > 0 else 0.0,
        }
        return self.result


NOISY_CORES = 0.35  # foreign load above which a measured window counts as disturbed


def foreign_load(ours: Iterable[int], window: float) -> float:
    """Cores used by processes other than ``ours`` (and this one) over the next ``window`` s."""
    pids = set(ours) | {os.getpid()}
    start = {pid: thread_cpu(pid) for pid in pids}
    busy = system_busy()
    time.sleep(window)
    busy = system_busy() - busy
    used = sum(_cpu_since(pid, threads) for pid, threads in start.items())
    return max(0.0, (busy - used) / window)


def wait_quiet(
    ours: Iterable[int], *, max_wait: float, threshold: float = 0.3, window: float = 0.25
) -> float:
    """Look for a ``window`` in which other processes use under ``threshold`` cores, trying for at
    most ``max_wait`` s; return the seconds spent beyond the first look (other engineers' test
    runs share this machine)."""
    began = time.monotonic()
    ours = list(ours)
    while foreign_load(ours, window) >= threshold and time.monotonic() - began + window <= max_wait:
        pass
    return max(0.0, time.monotonic() - began - window)


# --- bounded timing loops ------------------------------------------------------------------------


@dataclass
class Sample:
    """What one measured window produced."""

    calls: int
    elapsed_s: float
    latencies_s: list[float]
    errors: int = 0
    first_error: str = ""
    cpu: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.calls / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "elapsed_s": self.elapsed_s,
            "rate": self.rate,
            "latencies_us": [round(v * 1e6, 1) for v in self.latencies_s],
            "errors": self.errors,
            "first_error": self.first_error,
            "cpu": self.cpu,
        }


Call = Callable[[], Awaitable[Any]]


@dataclass
class Window:
    """The shared state of a measured window: its phase and what ended inside it."""

    measuring: bool = False
    stopping: bool = False
    calls: int = 0
    errors: int = 0
    first_error: str = ""

    def error(self, error: BaseException) -> None:
        self.errors += 1
        self.first_error = self.first_error or repr(error)[:300]
        if self.errors > 1000:  # something is broken: stop rather than spin
            self.stopping = True

    @property
    def counting(self) -> bool:
        return self.measuring and not self.stopping


async def sequential(
    call: Call, *, count: int, warmup: int, time_limit: float, meter: CpuMeter | None = None
) -> Sample:
    """``warmup`` calls, then up to ``count`` timed calls one after another (at most ``time_limit`` s)."""
    errors, first_error = 0, ""
    warm_deadline = time.perf_counter() + time_limit
    for _ in range(warmup):
        await call()
        if time.perf_counter() > warm_deadline:
            break
    latencies: list[float] = []
    if meter:
        meter.start()
    started = time.perf_counter()
    deadline = started + time_limit
    for _ in range(count):
        begin = time.perf_counter()
        try:
            await call()
        except Exception as error:
            errors += 1
            first_error = first_error or repr(error)[:300]
        end = time.perf_counter()
        latencies.append(end - begin)
        if end > deadline:
            break
    elapsed = time.perf_counter() - started
    cpu = meter.stop() if meter else {}
    return Sample(len(latencies), elapsed, latencies, errors, first_error, cpu)


async def concurrent(
    call: Call,
    *,
    concurrency: int,
    duration: float,
    warmup: float,
    meter: CpuMeter | None = None,
    drain_timeout: float = 15.0,
) -> Sample:
    """``concurrency`` callers back to back for ``warmup`` + ``duration`` s; counts the calls that end
    inside the measured window."""
    latencies: list[float] = []
    window = Window()

    async def caller() -> None:
        while not window.stopping:
            begin = time.perf_counter()
            try:
                await call()
            except Exception as error:
                window.error(error)
            if window.counting:
                latencies.append(time.perf_counter() - begin)

    tasks = [asyncio.ensure_future(caller()) for _ in range(concurrency)]
    try:
        await asyncio.sleep(warmup)
        if meter:
            meter.start()
        started = time.perf_counter()
        window.measuring = True
        await asyncio.sleep(duration)
        window.stopping = True
        elapsed = time.perf_counter() - started
        cpu = meter.stop() if meter else {}
        await asyncio.wait(tasks, timeout=drain_timeout)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return Sample(len(latencies), elapsed, latencies, window.errors, window.first_error, cpu)


# --- processes -----------------------------------------------------------------------------------


def spawn(
    argv: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path = REPO,
    stdout: Any = subprocess.PIPE,
    stderr: Any = None,
    stdin: Any = subprocess.PIPE,
) -> subprocess.Popen[bytes]:
    environment = os.environ | {"PYTHONUNBUFFERED": "1"} | (env or {})
    return subprocess.Popen(
        list(argv), cwd=cwd, env=environment, stdin=stdin, stdout=stdout, stderr=stderr
    )


def read_json_line(process: subprocess.Popen[bytes], timeout: float) -> dict[str, Any]:
    """The first line of the child's stdout that is a JSON object, waiting at most ``timeout`` s."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if not selector.select(left):
                continue
            line = process.stdout.readline()
            if not line:
                break
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    raise RuntimeError(
        f"{process.args!r} printed no JSON line within {timeout}s (exit {process.poll()})"
    )


def stop_process(process: subprocess.Popen[Any], timeout: float = 10.0) -> int:
    """Close stdin, SIGTERM, wait; SIGKILL after ``timeout`` s. Only ever this one pid."""
    if process.stdin and not process.stdin.closed:
        with contextlib.suppress(OSError):
            process.stdin.close()
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


# --- a real Ether host ---------------------------------------------------------------------------


class EtherHost:
    """``ether serve`` on 127.0.0.1:0 with its JSON log going to a file (never a full pipe).

    Use as a context manager; ``deploy`` a folder and wait until it runs; ``pids`` of its replicas.
    The state dir may be kept between runs so Go and TypeScript builds stay cached.
    """

    def __init__(
        self,
        state_dir: Path,
        log_path: Path,
        *args: str,
        command: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        """``command``: what runs ``ether`` (default the venv's console script; bench/telemetry.py
        runs an older checkout's host with ``python -m ether_host.cli`` and its PYTHONPATH)."""
        import grpc

        state_dir.mkdir(parents=True, exist_ok=True)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path = log_path
        self._log = log_path.open("wb")
        argv = [
            *(command or [str(ETHER)]),
            "serve",
            "--listen",
            f"{LOCAL}:0",
            "--state-dir",
            str(state_dir),
            "--log-format",
            "json",
            *args,
        ]
        self.process = spawn(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log
        )
        self.pid = self.process.pid
        self.address = self._wait_serving(timeout=60)
        self.channel = grpc.insecure_channel(self.address)
        grpc.channel_ready_future(self.channel).result(timeout=30)

    def __enter__(self) -> EtherHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def records(self) -> Iterator[dict[str, Any]]:
        with self.log_path.open("rb") as handle:
            for line in handle:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict):
                    yield record

    def _wait_serving(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for record in self.records():
                if record.get("event") == "serving":
                    return str(record["addresses"][0])
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        tail = self.log_path.read_text(errors="replace")[-3000:]
        self.stop()
        raise RuntimeError(
            f"ether serve did not report 'serving' (exit {self.process.poll()}):\n{tail}"
        )

    def deploy(self, path: Path, *, name: str = "", timeout: float = 600.0, **spec: Any) -> str:
        """Deploy the agent folder and wait for RUNNING; raise with the reason on FATAL."""
        import grpc

        from ether.v1 import agent_io_pb2, supervisor_pb2, supervisor_pb2_grpc

        supervisor = supervisor_pb2_grpc.SupervisorServiceStub(self.channel)
        request = supervisor_pb2.DeployAgentRequest(
            spec=supervisor_pb2.AgentSpec(name=name, path=str(path), **spec)
        )
        try:
            response = supervisor.DeployAgent(request, timeout=30)
        except grpc.RpcError as error:
            # A state dir kept between runs (builds stay cached) holds the previous run's
            # agents, which the host deploys again at start (desired state): replace them.
            if not name or error.code() != grpc.StatusCode.ALREADY_EXISTS:
                raise
            supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=name), timeout=60)
            response = supervisor.DeployAgent(request, timeout=30)
        agent = response.agent.info.name
        # The answer's status first: it and its event_sequence are one snapshot, taken once the
        # deploy is recorded, by when a fast agent may already run (no RUNNING event follows).
        if response.agent.info.state == agent_io_pb2.AGENT_STATE_RUNNING:
            return agent
        events = supervisor.WatchEvents(
            supervisor_pb2.WatchEventsRequest(
                agent=agent, after_sequence=response.agent.event_sequence
            ),
            timeout=timeout,
        )
        try:
            for event in events:
                state = agent_io_pb2.AgentState.Name(event.state).removeprefix("AGENT_STATE_")
                if state == "RUNNING":
                    return agent
                if state == "FATAL":
                    raise RuntimeError(
                        f"{agent} is FATAL: {event.reason}\n" + "\n".join(event.stderr_tail[-15:])
                    )
        finally:
            events.cancel()
        raise RuntimeError(f"{agent} never reached RUNNING")

    def pids(self, agent: str) -> list[int]:
        from ether.v1 import supervisor_pb2, supervisor_pb2_grpc

        supervisor = supervisor_pb2_grpc.SupervisorServiceStub(self.channel)
        response = supervisor.ListProcesses(supervisor_pb2.ListProcessesRequest(), timeout=10)
        return [p.pid for p in response.processes if p.agent == agent and p.pid > 0]

    def stop(self, timeout: float = 30.0) -> None:
        if getattr(self, "channel", None) is not None:
            self.channel.close()
        stop_process(self.process, timeout)
        self._log.close()


def run_async(coroutine: Awaitable[Any], loop: str = "asyncio") -> Any:
    """Run on the named event loop ("asyncio" or "uvloop")."""
    if loop == "uvloop":
        import uvloop

        return uvloop.run(coroutine)  # type: ignore[arg-type]
    return asyncio.run(coroutine)  # type: ignore[arg-type]
