"""Suite "scale": one host with many agents and many tasks (issue 27 item 4, first half).

    python -m bench --only scale [--quick]

Part of plain ``make bench``: a full run took 193 s on a loaded 2-core machine (500 agent
processes, about 5 GiB of memory together), under the 5 minutes past which it would be opt-in.

Against a real host started here (``ether serve``, its state dir ``.ether/bench-scale`` kept
between runs so the Go and TypeScript builds stay cached), from a gRPC client in this process:

1. ``AGENTS`` echo agents, a third each Python, Go and TypeScript (bench/echo/*), deployed by
   DeployAgent under their own names (``DEPLOY_IN_FLIGHT`` calls at a time) after one of each
   was built and removed again: the seconds from the first DeployAgent to the last agent
   RUNNING (a WatchEvents stream over all agents, opened before the first deploy; ListAgents
   confirms), the host's RSS then, ListAgents listing all of them (one page) p50 over many
   sequential calls, and the private memory (USS: Private_Clean + Private_Dirty of
   /proc/<pid>/smaps_rollup) of idle agents, per language: the agent program alone and its
   whole process tree (the bwrap wrappers of its sandbox too).
2. ``IN_FLIGHT`` tasks in flight through Pipe across ``PIPE_AGENTS`` of those agents: one Pipe
   stream per agent with ``IN_FLIGHT / PIPE_AGENTS`` tasks in flight (batched requests, the
   bench's ~1 KB params), for ``pipe_seconds``; every task answered, the errors counted, the
   host's RSS polled meanwhile (peak, and the peak of each quarter: bounded or growing)
   and the tasks the host itself holds (ListAgents in_flight + queued) sampled once a second.

Targets are the issue's absolute ones (deploy <= 30 s, host RSS <= 150 MiB, ListAgents p50 <= 5
ms, an idle Python agent <= 12 MiB private, 0 errors); each prints its ratio to the target and
the verdict. Every process the host started is checked gone by pid (and start time) after it
stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import (
    PYTHON,
    REPO,
    CpuMeter,
    EtherHost,
    median,
    percentile,
    sequential,
    spawn,
    spread,
    stop_process,
)
from bench.echo.client import PARAMS
from bench.report import fmt, machine_markdown, markdown_table, write_section

ECHO = Path(__file__).resolve().parent / "echo"
STATE_DIR = REPO / ".ether" / "bench-scale"  # kept: Go and TypeScript builds stay cached
LANGUAGES = {"py": "python", "go": "go", "ts": "typescript"}  # key -> folder under echo/
DEPLOY_IN_FLIGHT = 8
IDLE_S = 5.0
MIB = 1024 * 1024

# The targets (absolute: nothing to measure them against in the same run).
DEPLOY_TARGET_S = 30.0
HOST_RSS_TARGET_MIB = 150.0
LIST_P50_TARGET_MS = 5.0
PYTHON_USS_TARGET_MIB = 12.0
PIPE_ERRORS_TARGET = 0

# Where a ListAgents of 500 agents goes (py-spy of the host answering them back to back, and a
# bare grpc.aio server answering the same bytes; 2026-11-26, on a loaded machine).
WHERE_LISTING_GOES = (
    "Each agent's entry is kept encoded and made again only when the agent changes "
    "(server/ether_host/transport/agent_entries.py); its readiness and load are read on every "
    "call. py-spy of the host's main thread answering ListAgents back to back: about 40 % of "
    "its samples in the servicer's Python (reading each agent's readiness and load, "
    "ManagedAgent.load, 17 %; looking up and joining the entries 11 %; the paging's filter "
    "and sort by name 5 %), the rest in C: gRPC's call handling, the parse of the joined "
    "entries into the answer (~0.1 ms in process) and its serialization (~0.08 ms), and the "
    "socket writes. The floor: a bare grpc.aio server answering the same 99 KiB from memory "
    "took p50 0.74 ms and 0.36 ms of its CPU per call on the same machine."
)

# What py-spy of the host showed while it deployed 500 agents (2026-11-26, after the two fixes
# named here); kept beside the figures each run measures.
WHERE_DEPLOY_GOES = (
    "py-spy of the host meanwhile: starting the processes (fork and exec of the "
    "prlimit/bwrap chain from the event loop, anyio's open_process) about a fifth of its "
    "samples; finding the program's pid under bwrap, writing the children record and the "
    "cgroups, and the sandbox's scratch folder a few percent each; DeployAgent itself "
    "(validation, the agent store's SQLite row in a worker thread) under a tenth. Fixed on "
    "the way: the Go and TypeScript build key walked all of node_modules before dropping it "
    "(supervisor/install.py `_files`: 2.8 ms -> 0.1 ms per TypeScript deploy of the echo "
    "agent, far more for an agent with a real node_modules). The deploy is bound by CPU: "
    "the agents' own start-up is most of it, so on these 2 cores the figure moves with what "
    "else runs."
)


@dataclass
class Settings:
    agents: int = 500
    pipe_agents: int = 50
    in_flight: int = 10_000
    pipe_seconds: float = 40.0
    # Each Pipe task is the agents' ``hold`` action: its params back after this long, so the
    # tasks stay in flight (an echo answers at once, and the client, not the host, then holds
    # what is "in flight"). 10,000 tasks held 10 s each is 1,000 tasks/s.
    hold_ms: int = 10_000
    list_samples: int = 1000
    batch: int = 50  # inputs per Pipe request at most

    @classmethod
    def quick(cls) -> Settings:
        return cls(agents=60, pipe_seconds=8.0, hold_ms=2_000, list_samples=200)


# --- /proc ---------------------------------------------------------------------------------------


def _status_kib(pid: int, key: str) -> int:
    """A ``kB`` line of /proc/<pid>/status (VmRSS, VmHWM); 0 once the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def uss_kib(pid: int) -> int:
    """Private memory of one process: Private_Clean + Private_Dirty of smaps_rollup, in KiB."""
    total = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                total += int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return total


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process (one pass over /proc)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        found[int(entry.name)] = int(raw[raw.rindex(")") + 2 :].split()[1])
    return found


def descendants(pid: int, parents: dict[int, int] | None = None) -> list[int]:
    """Every process below ``pid``, nearest first."""
    parents = parents if parents is not None else _parents()
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    found, frontier = [], [pid]
    while frontier:
        frontier = [c for p in frontier for c in sorted(children.get(p, []))]
        found += frontier
    return found


def _started(pid: int) -> str:
    """The process's start time (field 22 of stat): a pid plus this names one process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return raw[raw.rindex(")") + 2 :].split()[19]


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) ``pid`` used so far; 0 once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _program(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


# --- the host and its agents -------------------------------------------------------------------


def _stubs(channel: Any) -> tuple[Any, Any]:
    from ether.v1 import agent_io_pb2_grpc, supervisor_pb2_grpc

    return (
        supervisor_pb2_grpc.SupervisorServiceStub(channel),
        agent_io_pb2_grpc.AgentIOServiceStub(channel),
    )


async def _list_all(agents: Any) -> list[Any]:
    from ether.v1 import agent_io_pb2

    listed: list[Any] = []
    token = ""
    while True:
        page = await agents.ListAgents(
            agent_io_pb2.ListAgentsRequest(page_size=1000, page_token=token), timeout=60
        )
        listed += page.agents
        if not (token := page.next_page_token):
            return listed


async def _remove_all(supervisor: Any, names: list[str]) -> float:
    """RemoveAgent every one of ``names``, DEPLOY_IN_FLIGHT at a time; seconds it took."""
    from ether.v1 import supervisor_pb2

    began = time.perf_counter()
    slots = asyncio.Semaphore(DEPLOY_IN_FLIGHT)

    async def remove(name: str) -> None:
        async with slots:
            await supervisor.RemoveAgent(supervisor_pb2.RemoveAgentRequest(name=name), timeout=120)

    await asyncio.gather(*(remove(name) for name in names))
    return time.perf_counter() - began


def _names(count: int) -> list[tuple[str, str]]:
    """(name, language key) of ``count`` agents, the languages taking turns."""
    keys = list(LANGUAGES)
    return [(f"scale-{keys[i % 3]}-{i:03d}", keys[i % 3]) for i in range(count)]


async def _deploy_all(
    supervisor: Any, agents: Any, host_pid: int, names: list[tuple[str, str]]
) -> dict[str, Any]:
    """Deploy every agent; the seconds from the first DeployAgent to the last RUNNING, and the
    CPU the host, the agents (all they used so far), this client and other processes used."""
    from ether.v1 import agent_io_pb2, supervisor_pb2

    wanted = {name for name, _ in names}
    running: dict[str, float] = {}
    fatal: dict[str, str] = {}
    all_running = asyncio.Event()
    events = supervisor.WatchEvents(supervisor_pb2.WatchEventsRequest(after_sequence=-1))
    watching = asyncio.Event()
    gaps = 0

    async def watch() -> None:
        nonlocal gaps
        last = 0
        watching.set()
        async for event in events:
            if last and event.sequence != last + 1:
                gaps += 1  # the stream skipped events: ListAgents decides below
            last = event.sequence
            if event.agent not in wanted:
                continue
            if event.state == agent_io_pb2.AGENT_STATE_RUNNING:
                running.setdefault(event.agent, time.perf_counter())
            elif event.state == agent_io_pb2.AGENT_STATE_FATAL:
                fatal[event.agent] = event.reason
            if len(running) + len(fatal) >= len(wanted):
                all_running.set()

    watcher = asyncio.ensure_future(watch())
    await watching.wait()
    await asyncio.sleep(0.2)  # the stream is open on the host before the first deploy
    slots = asyncio.Semaphore(DEPLOY_IN_FLIGHT)
    answered: list[float] = []

    async def deploy(name: str, key: str) -> None:
        spec = supervisor_pb2.AgentSpec(name=name, path=str(ECHO / LANGUAGES[key]))
        async with slots:
            await supervisor.DeployAgent(supervisor_pb2.DeployAgentRequest(spec=spec), timeout=120)
            answered.append(time.perf_counter())

    meter = CpuMeter({"host": host_pid, "client": os.getpid()})
    meter.start()
    began = time.perf_counter()
    try:
        await asyncio.gather(*(deploy(name, key) for name, key in names))
        deployed = time.perf_counter() - began
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(all_running.wait(), timeout=900)
        cpu = meter.stop()
        agents_cpu = sum(_cpu_s(pid) for pid in descendants(host_pid))
    finally:
        events.cancel()
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    states = {a.name: a.state for a in await _list_all(agents) if a.name in wanted}
    listed_running = sum(1 for s in states.values() if s == agent_io_pb2.AGENT_STATE_RUNNING)
    last = max(running.values()) if running else float("nan")
    if listed_running < len(wanted):
        last = float("nan")  # not all RUNNING: no time to report
    return {
        "seconds": last - began,
        "deploy_calls_s": deployed,
        "running": listed_running,
        "fatal": dict(itertools.islice(fatal.items(), 5)),
        "fatal_count": len(fatal),
        "gaps": gaps,
        "wall_s": cpu["wall_s"],
        "host_cpu_s": cpu["cpu_s"]["host"],
        "client_cpu_s": cpu["cpu_s"]["client"],
        "agents_cpu_s": agents_cpu,
        # foreign_cores counts the agents too (new processes): take them out
        "other_cpu_s": max(0.0, cpu["foreign_cores"] * cpu["wall_s"] - agents_cpu),
    }


async def _processes(supervisor: Any) -> dict[str, int]:
    from ether.v1 import supervisor_pb2

    found: dict[str, int] = {}
    token = ""
    while True:
        page = await supervisor.ListProcesses(
            supervisor_pb2.ListProcessesRequest(page_size=1000, page_token=token), timeout=60
        )
        found |= {p.agent: p.pid for p in page.processes if p.pid > 0}
        if not (token := page.next_page_token):
            return found


def _memory_of(pid: int, host_pid: int, parents: dict[int, int]) -> dict[str, float]:
    """USS (MiB) of the agent's program (the replica's pid: the program below bwrap and its
    namespace's init) and of its whole tree, the sandbox's processes above it included."""
    above = []
    parent = parents.get(pid, 0)
    while parent not in (0, 1, host_pid):
        above.append(parent)
        parent = parents.get(parent, 0)
    program = pid
    tree = [*above, pid, *descendants(pid, parents)]
    return {
        "program": uss_kib(program) / 1024,
        "tree": sum(uss_kib(p) for p in tree) / 1024,
        "rss": _status_kib(program, "VmRSS") / 1024,
        "processes": len(tree),
        "comm": _program(program),  # type: ignore[dict-item]
    }


# What an idle Python agent's private memory is made of: the same interpreter the Python agents
# run (the host's), with more of what the SDK loads at each step.
PYTHON_STEPS = (
    ("the interpreter alone", "pass"),
    ("+ asyncio (which loads ssl, logging, concurrent.futures)", "import asyncio"),
    (
        "+ the SDK as `python -m ether_agent` loads it (orjson, which loads datetime, uuid, "
        "platform and json; dataclasses; _ctypes)",
        "import ether_agent.__main__",
    ),
    (
        "+ uvloop and its loop, made as the SDK makes it (the SDK's default; the loop's zeroed "
        "receive buffer handed back)",
        "import ether_agent.__main__, ether_agent._runtime\nether_agent._runtime._new_event_loop()",
    ),
)


# What is left of an idle Python agent above asyncio + uvloop (running echo agents, or processes
# that import as much and wait; medians of 3-12 run side by side, so shared pages count as shared;
# 2026-11-26, on a loaded machine), and what was cut from 13.2 MiB that day.
WHERE_PYTHON_AGENT_MEMORY_GOES = (
    "Over asyncio and uvloop with its loop (10.6 MiB; 0.24 MiB of it the loop's receive "
    "buffer, which the SDK hands back, below): dataclasses and json, which the SDK "
    "needs either way, 0.3 MiB; orjson and what only it imports (datetime, uuid with platform) "
    "0.5 MiB -- an idle echo agent without orjson holds 11.5 MiB, but an echo task of the ~1 KB "
    "params then costs the agent 21 µs of CPU instead of 11.5 µs (its frames decoded and "
    "encoded by the json module), so the SDK keeps orjson; the SDK's own code, its runtime, "
    "the echo module and the host-watch thread (0.02) the last ~0.4 MiB. Cut from 13.2 MiB on "
    "2026-11-26, each measured in a running echo agent: argparse and gettext no longer loaded "
    "to read the host's command line (-0.6 MiB), the frame reader's buffer starting at 4 KiB "
    "and growing under load (-0.25), prctl and malloc_trim through _ctypes rather than the "
    "ctypes package (-0.15), the link's internal records plain classes rather than "
    "dataclasses (-0.03), and uvloop's loop object, whose 256 KiB receive buffer (for "
    "uvloop's own transports; the link reads its fd itself) is zeroed when the loop is made, "
    "so every page was touched: its pages that read as zeros go back to the OS "
    "(madvise MADV_DONTNEED), and a transport's first reads fault them in again, zeroed "
    "(-0.22: 12.01 -> 11.80 MiB, 12 echo agents under a host against 12 of the SDK before, "
    "interleaved, twice). malloc_trim after start-up hands back the compiler's garbage when "
    "bytecode cannot be cached (an agent whose SDK bytecode was stale: 13.3 -> 12.4 MiB); "
    "with cached bytecode, as here, it frees nothing measurable. Measured and not kept "
    "(nothing measurable in a running agent): importlib.util loaded only for a module given "
    "as a file (0.01-0.03 MiB in a process that imports as much), UV_USE_IO_URING=0 (libuv "
    "1.52 maps its two rings, 28 KiB, either way), MALLOC_ARENA_MAX=1 for the host-watch "
    "thread. The largest single block left that holds nothing: the free entries of the "
    "interpreter's table of interned names, 11,015 names in 32,768 slots (408 KiB, 173 KiB "
    "of it zeroed free entries; read from the table's header in a running echo agent). It "
    "doubled when start-up interned its 10,923rd name (16,384 slots hold 10,922): an agent "
    "whose start-up interned fewer would hold ~0.2 MiB less, one that loads more code holds "
    "the larger table either way."
)


def python_steps() -> list[tuple[str, float]]:
    """USS (MiB) of a Python process that imported each step's modules and waits."""
    adapter = REPO / "adapters" / "python"
    found = []
    for label, code in PYTHON_STEPS:
        script = code + "\nimport sys\nprint('ready', flush=True)\nsys.stdin.read()"
        child = spawn([PYTHON, "-c", script], env={"PYTHONPATH": str(adapter)})
        try:
            assert child.stdout is not None
            child.stdout.readline()  # imported: nothing else runs until stdin closes
            found.append((label, uss_kib(child.pid) / 1024))
        finally:
            stop_process(child)
    return found


# --- Pipe: many tasks in flight ------------------------------------------------------------------


@dataclass
class PipeTally:
    sent: int = 0
    answered: int = 0
    failed: int = 0
    stream_errors: int = 0
    first_error: str = ""
    outstanding: dict[str, int] = field(default_factory=dict)

    def error(self, text: str) -> None:
        self.first_error = self.first_error or text[:300]


async def _pipe_stream(
    channel: Any,
    agent: str,
    in_flight: int,
    settings: Settings,
    stop: asyncio.Event,
    tally: PipeTally,
) -> None:
    """One Pipe stream to ``agent`` kept at ``in_flight`` tasks until ``stop``; then half-close
    and read every answer."""
    import grpc

    from ether.v1 import agent_io_pb2

    batch = settings.batch
    task = agent_io_pb2.AgentInput(
        agent=agent,
        action="hold",
        params_json=json.dumps(PARAMS | {"ms": settings.hold_ms}).encode(),
        output_encoding=agent_io_pb2.DATA_ENCODING_JSON,
    )
    success = agent_io_pb2.TASK_STATUS_SUCCESS
    pipe = channel.stream_stream(
        "/ether.v1.AgentIOService/Pipe",
        request_serializer=agent_io_pb2.PipeRequest.SerializeToString,
        response_deserializer=agent_io_pb2.PipeResponse.FromString,
    )
    call = pipe(timeout=3600)
    free = asyncio.Semaphore(in_flight)
    tally.outstanding[agent] = 0

    async def writer() -> None:
        while not stop.is_set():
            await free.acquire()
            count = 1
            while count < batch and not free.locked():
                await free.acquire()  # does not wait: a slot is free
                count += 1
            if stop.is_set():
                break
            request = agent_io_pb2.PipeRequest(inputs=[task] * count, max_in_flight=in_flight)
            await call.write(request)
            tally.sent += count
            tally.outstanding[agent] += count
        await call.done_writing()

    async def reader() -> None:
        while (reply := await call.read()) is not grpc.aio.EOF:
            for output in reply.outputs:
                tally.answered += 1
                tally.outstanding[agent] -= 1
                free.release()
                if output.status != success:
                    tally.failed += 1
                    tally.error(f"{agent}: {output.error.code}: {output.error.message}")

    writing = asyncio.ensure_future(writer())
    reading = asyncio.ensure_future(reader())
    await stop.wait()
    free.release()  # a writer waiting for a slot sees the stop
    try:
        await asyncio.wait_for(asyncio.gather(writing, reading), timeout=300)
    except Exception as error:  # a stream that failed: every task still out counts as lost
        tally.stream_errors += 1
        tally.error(f"{agent}: stream: {error!r}")
        call.cancel()
        for part in (writing, reading):
            part.cancel()
        await asyncio.gather(writing, reading, return_exceptions=True)


async def _pipe_phase(
    channel: Any, agents_stub: Any, host_pid: int, names: list[str], settings: Settings
) -> dict[str, Any]:
    per_stream = settings.in_flight // len(names)
    stop = asyncio.Event()
    tally = PipeTally()
    rss: list[tuple[float, int]] = []
    held: list[int] = []
    client_out: list[int] = []
    wanted = set(names)

    async def poll_rss() -> None:
        while not stop.is_set():
            rss.append((time.perf_counter(), _status_kib(host_pid, "VmRSS")))
            await asyncio.sleep(0.05)

    async def poll_held() -> None:
        while not stop.is_set():
            await asyncio.sleep(1.0)
            listed = await _list_all(agents_stub)
            held.append(sum(a.in_flight + a.queued for a in listed if a.name in wanted))
            client_out.append(sum(tally.outstanding.values()))

    streams = [
        asyncio.ensure_future(_pipe_stream(channel, name, per_stream, settings, stop, tally))
        for name in names
    ]
    rss_before = _status_kib(host_pid, "VmRSS")
    pollers = [asyncio.ensure_future(poll_rss()), asyncio.ensure_future(poll_held())]
    meter = CpuMeter({"host": host_pid})
    meter.start()
    began = time.perf_counter()
    await asyncio.sleep(settings.pipe_seconds)
    stop.set()
    stopped = time.perf_counter()
    await asyncio.gather(*streams)
    drained = time.perf_counter()
    cpu = meter.stop()
    for poller in pollers:
        poller.cancel()
    await asyncio.gather(*pollers, return_exceptions=True)
    rss.append((time.perf_counter(), _status_kib(host_pid, "VmRSS")))
    quarter = settings.pipe_seconds / 4
    quarters = [
        max(
            (kib for at, kib in rss if began + i * quarter <= at < began + (i + 1) * quarter),
            default=0,
        )
        / 1024
        for i in range(4)
    ]
    lost = tally.sent - tally.answered
    return {
        "streams": len(names),
        "per_stream": per_stream,
        "seconds": stopped - began,
        "drain_s": drained - stopped,
        "sent": tally.sent,
        "answered": tally.answered,
        "failed": tally.failed,
        "lost": lost,
        "stream_errors": tally.stream_errors,
        "errors": tally.failed + max(lost, 0) + tally.stream_errors,
        "first_error": tally.first_error,
        "rate": tally.answered / (drained - began),
        "rss_before_mib": rss_before / 1024,
        "rss_peak_mib": max(kib for _, kib in rss) / 1024,
        "rss_quarter_peaks_mib": quarters,
        "rss_after_mib": rss[-1][1] / 1024,
        "held_median": median(held) if held else float("nan"),
        "held_range": spread(held),
        "client_out_median": median(client_out) if client_out else float("nan"),
        "host_cpu_s": cpu["cpu_s"]["host"],
        "foreign_cores": cpu["foreign_cores"],
    }


# --- the run -------------------------------------------------------------------------------------


def _fits(settings: Settings, per_agent_mib: float) -> tuple[int, str]:
    """How many agents this machine can hold: memory available (80 % of it) and open files."""
    available = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            available = int(line.split()[1]) // 1024
    by_memory = int(available * 0.8 / per_agent_mib) if per_agent_mib > 0 else settings.agents
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    by_files = (soft - 200) // 6  # the host holds a few pipes and a pidfd per agent
    count = min(settings.agents, by_memory, by_files)
    why = ""
    if count < settings.agents:
        why = (
            f"this machine holds {count} (MemAvailable {available} MiB at ~{per_agent_mib:.0f} "
            f"MiB per agent; RLIMIT_NOFILE {soft})"
        )
    return count, why


async def _run(host: EtherHost, settings: Settings) -> dict[str, Any]:
    import grpc

    from ether.v1 import agent_io_pb2

    result: dict[str, Any] = {"settings": settings.__dict__.copy()}
    async with grpc.aio.insecure_channel(host.address) as channel:
        await asyncio.wait_for(channel.channel_ready(), 30)
        supervisor, agents = _stubs(channel)
        leftover = [a.name for a in await _list_all(agents)]
        if leftover:  # a run that did not finish left its agents recorded in the state dir
            await _remove_all(supervisor, leftover)
        result["rss_empty_mib"] = _status_kib(host.pid, "VmRSS") / 1024

        # One of each, built (cached in the state dir) and measured, then removed.
        warm = [(f"warm-{key}", key) for key in LANGUAGES]
        built = await _deploy_all(supervisor, agents, host.pid, warm)
        if built["running"] < len(warm):
            raise RuntimeError(f"the echo agents did not build and run: {built}")
        pids = await _processes(supervisor)
        parents = _parents()
        # The agents take the three languages in turn: their mean private memory is what one
        # costs (the max, TypeScript's, capped a 24 GiB machine at ~320 agents).
        trees = [_memory_of(pids[name], host.pid, parents)["tree"] for name, _ in warm]
        estimate = sum(trees) / len(trees)
        await _remove_all(supervisor, [name for name, _ in warm])
        count, result["capped"] = _fits(settings, estimate * 1.5)
        names = _names(count)
        result["count"] = count

        result["deploy"] = await _deploy_all(supervisor, agents, host.pid, names)
        print(f"  deploy: {result['deploy']}", file=sys.stderr)
        result["rss_after_deploy_mib"] = _status_kib(host.pid, "VmRSS") / 1024
        result["hwm_deploy_mib"] = _status_kib(host.pid, "VmHWM") / 1024
        await asyncio.sleep(IDLE_S)  # the agents settle: what an idle agent holds

        # Idle agents' private memory, per language.
        pids = await _processes(supervisor)
        parents = _parents()
        memory: dict[str, list[dict[str, float]]] = {key: [] for key in LANGUAGES}
        for name, key in names:
            if name in pids:
                memory[key].append(_memory_of(pids[name], host.pid, parents))
        result["memory"] = {
            key: {
                "agents": len(rows),
                "program": median(r["program"] for r in rows),
                "program_range": spread(r["program"] for r in rows),
                "tree": median(r["tree"] for r in rows),
                "rss": median(r["rss"] for r in rows),
                "processes": median(r["processes"] for r in rows),
                "comm": rows[0]["comm"] if rows else "",
            }
            for key, rows in memory.items()
        }
        result["python_steps"] = python_steps()
        result["rss_idle_mib"] = _status_kib(host.pid, "VmRSS") / 1024
        tree = descendants(host.pid, parents)
        result["host_tree"] = len(tree)
        result["watched"] = [(pid, _started(pid)) for pid in tree]

        # ListAgents with every agent on one page.
        request = agent_io_pb2.ListAgentsRequest(page_size=1000)
        listed = await agents.ListAgents(request, timeout=30)
        result["listed"] = len(listed.agents)
        result["list_bytes"] = listed.ByteSize()

        async def list_call() -> None:
            await agents.ListAgents(request, timeout=30)

        meter = CpuMeter({"host": host.pid})
        sample = await sequential(
            list_call, count=settings.list_samples, warmup=50, time_limit=120, meter=meter
        )
        result["list"] = {
            "calls": sample.calls,
            "errors": sample.errors,
            "p50_ms": percentile(sample.latencies_s, 50) * 1000,
            "p90_ms": percentile(sample.latencies_s, 90) * 1000,
            "p99_ms": percentile(sample.latencies_s, 99) * 1000,
            "host_cpu_ms": sample.cpu["cpu_s"]["host"] / max(1, sample.calls) * 1000,
            "foreign_cores": sample.cpu["foreign_cores"],
        }
        default_page = agent_io_pb2.ListAgentsRequest()

        async def list_default() -> None:
            await agents.ListAgents(default_page, timeout=30)

        small = await sequential(
            list_default, count=settings.list_samples // 2, warmup=20, time_limit=60
        )
        result["list"]["default_page_p50_ms"] = percentile(small.latencies_s, 50) * 1000

        # Pipe: many tasks in flight across PIPE_AGENTS agents, the languages mixed.
        pipe_names = [name for name, _ in names[: settings.pipe_agents]]
        result["pipe"] = await _pipe_phase(channel, agents, host.pid, pipe_names, settings)
        print(f"  pipe: {result['pipe']}", file=sys.stderr)
        result["hwm_mib"] = _status_kib(host.pid, "VmHWM") / 1024

        result["remove_s"] = await _remove_all(supervisor, [name for name, _ in names])
    return result


def _leftovers(watched: list[tuple[int, str]]) -> list[int]:
    """The processes the host had started that still run (same pid and start time)."""
    return [pid for pid, started in watched if started and _started(pid) == started]


def main(quick: bool = False) -> int:
    settings = Settings.quick() if quick else Settings()
    began = time.perf_counter()
    log_dir = REPO / ".ether" / "bench-logs"
    with EtherHost(STATE_DIR, log_dir / "scale-host.log") as host:
        result = asyncio.run(_run(host, settings))
    # The host stopped its agents before it exited; nothing it started may be left.
    deadline = time.monotonic() + 30
    while (left := _leftovers(result["watched"])) and time.monotonic() < deadline:
        time.sleep(0.2)
    result["left"] = left
    result["run_s"] = time.perf_counter() - began
    body = _report(result, quick)
    write_section("Scale on one host", body)
    print(body)
    return 1 if left else 0


def _row(label: str, value: float, digits: int, target: float) -> list[str]:
    """A target row: the figure, its target (at most), the ratio to it and the verdict."""
    ratio = value / target
    verdict = "PASS" if ratio == ratio and ratio <= 1.0 else "MISS"
    return [label, fmt(value, digits), f"<= {target:g}", f"{ratio:.2f}", verdict]


def _per_task_kib(pipe: dict[str, Any]) -> float:
    """The host's RSS growth under the load per task it held (KiB)."""
    held = pipe["held_median"]
    return (pipe["rss_peak_mib"] - pipe["rss_before_mib"]) * 1024 / held if held else float("nan")


def _report(r: dict[str, Any], quick: bool) -> str:
    deploy, listing, pipe, memory = r["deploy"], r["list"], r["pipe"], r["memory"]
    count = r["count"]
    table = [
        _row(f"{count} agents deployed -> all RUNNING, s", deploy["seconds"], 1, DEPLOY_TARGET_S),
        _row(
            f"host RSS with {count} agents RUNNING, MiB",
            r["rss_idle_mib"],
            1,
            HOST_RSS_TARGET_MIB,
        ),
        _row(
            f"ListAgents p50, all {r['listed']} agents on one page, ms",
            listing["p50_ms"],
            2,
            LIST_P50_TARGET_MS,
        ),
        _row(
            "idle Python agent, private memory (USS), MiB",
            memory["py"]["program"],
            1,
            PYTHON_USS_TARGET_MIB,
        ),
        [
            f"{fmt(pipe['per_stream'] * pipe['streams'])} tasks in flight through Pipe across "
            f"{pipe['streams']} agents: errors",
            str(pipe["errors"]),
            f"= {PIPE_ERRORS_TARGET}",
            "-",
            "PASS" if pipe["errors"] == PIPE_ERRORS_TARGET else "MISS",
        ],
    ]
    for line in table:
        print(f"  {line[0]}: {line[1]} (target {line[2]}): {line[3]} x target, {line[4]}")
    mem_rows = [
        [
            key,
            str(m["agents"]),
            m["comm"],
            fmt(m["program"], 1),
            f"{fmt(m['program_range'][0], 1)}-{fmt(m['program_range'][1], 1)}",
            fmt(m["tree"], 1),
            fmt(m["processes"]),
            fmt(m["rss"], 1),
        ]
        for key, m in memory.items()
    ]
    body = [
        f"`python -m bench --only scale`{' --quick' if quick else ''} (part of `make bench`; "
        f"this run took {fmt(r['run_s'], 0)} s). One host started by the bench, echo agents of bench/echo deployed by "
        f"DeployAgent from a gRPC client ({DEPLOY_IN_FLIGHT} calls at a time), a third each "
        "Python, Go and TypeScript, after one of each was built and removed again (the builds "
        "are cached in the state dir)."
        + (f" **Fewer agents than asked: {r['capped']}.**" if r["capped"] else ""),
        "",
        markdown_table(["measure", "value", "target", "x target", "verdict"], table),
        "",
        f"Deploy: the {count} DeployAgent calls were answered after "
        f"{fmt(deploy['deploy_calls_s'], 1)} s; {deploy['running']} RUNNING, "
        f"{deploy['fatal_count']} FATAL. Host RSS: {fmt(r['rss_empty_mib'], 1)} MiB with no "
        f"agent, {fmt(r['rss_after_deploy_mib'], 1)} MiB when the last was RUNNING, "
        f"{fmt(r['rss_idle_mib'], 1)} MiB idle after; its peak while deploying (VmHWM) "
        f"{fmt(r['hwm_deploy_mib'], 1)} MiB: the agents add "
        f"{fmt(r['rss_idle_mib'] - r['rss_empty_mib'], 1)} MiB, about "
        f"{fmt((r['rss_idle_mib'] - r['rss_empty_mib']) * 1024 / count, 0)} KiB each (not "
        f"profiled further). The host's process tree: {r['host_tree']} processes.",
        "",
        f"Where the deploy's {fmt(deploy['wall_s'], 1)} s went, in CPU seconds of the "
        f"machine's 2 cores ({fmt(2 * deploy['wall_s'], 0)} core-seconds in all): the host "
        f"{fmt(deploy['host_cpu_s'], 1)}, the {count} agents starting "
        f"{fmt(deploy['agents_cpu_s'], 1)} (all they had used when the last was RUNNING: "
        f"interpreters and runtimes loading, the sandbox's bwrap), this client "
        f"{fmt(deploy['client_cpu_s'], 1)}, other processes of the machine "
        f"{fmt(deploy['other_cpu_s'], 1)}. " + WHERE_DEPLOY_GOES,
        "",
        f"ListAgents ({listing['calls']} sequential calls, {fmt(r['list_bytes'] / 1024, 0)} KiB "
        f"per answer): p50 {fmt(listing['p50_ms'], 2)} ms, p90 {fmt(listing['p90_ms'], 2)}, "
        f"p99 {fmt(listing['p99_ms'], 2)}; host CPU {fmt(listing['host_cpu_ms'], 2)} ms per "
        f"call; the default page (100 agents) p50 {fmt(listing['default_page_p50_ms'], 2)} ms; "
        f"other processes used {fmt(listing['foreign_cores'], 2)} cores meanwhile. "
        + WHERE_LISTING_GOES,
        "",
        "Idle agents' private memory (USS = Private_Clean + Private_Dirty of smaps_rollup, "
        "MiB, median over the agents of the language; 'tree' adds the sandbox's bwrap "
        "processes above the program):",
        "",
        markdown_table(
            [
                "language",
                "agents",
                "program",
                "USS",
                "USS range",
                "tree USS",
                "processes",
                "program RSS",
            ],
            mem_rows,
        ),
        "",
        "Where an idle Python agent's private memory goes (a process of the same interpreter "
        "that imported this much and waits):",
        "",
        markdown_table(
            ["step", "USS, MiB"],
            [
                *([label, fmt(mib, 1)] for label, mib in r["python_steps"]),
                ["an idle echo agent (above)", fmt(memory["py"]["program"], 1)],
            ],
        ),
        "",
        WHERE_PYTHON_AGENT_MEMORY_GOES,
        "",
        f"Pipe: {pipe['streams']} streams, one per agent, each kept at {pipe['per_stream']} "
        f"tasks in flight (requests of up to {r['settings']['batch']} inputs, ~1 KB params) for "
        f"{fmt(pipe['seconds'], 0)} s, then drained ({fmt(pipe['drain_s'], 1)} s): "
        f"{fmt(pipe['sent'])} tasks sent, {fmt(pipe['answered'])} answered, "
        f"{pipe['failed']} failed, {pipe['lost']} unanswered, {pipe['stream_errors']} "
        f"streams broken ({fmt(pipe['rate'])} tasks/s). Tasks the host held (ListAgents "
        f"in_flight + queued over the {pipe['streams']} agents, once a second): median "
        f"{fmt(pipe['held_median'])} (range {fmt(pipe['held_range'][0])}-"
        f"{fmt(pipe['held_range'][1])}); the client's outstanding median "
        f"{fmt(pipe['client_out_median'])}. Host RSS: {fmt(pipe['rss_before_mib'], 1)} MiB "
        f"before, peak {fmt(pipe['rss_peak_mib'], 1)} MiB (the peak of each quarter of the "
        f"window: {', '.join(fmt(q, 1) for q in pipe['rss_quarter_peaks_mib'])}), "
        f"{fmt(pipe['rss_after_mib'], 1)} MiB "
        f"after (about {fmt(_per_task_kib(pipe), 0)} KiB per task held); VmHWM over the whole "
        f"run {fmt(r['hwm_mib'], 1)} MiB. Host CPU "
        f"{fmt(pipe['host_cpu_s'] / max(1, pipe['answered']) * 1e6)} µs per task; other "
        f"processes used {pipe['foreign_cores']:.2f} cores meanwhile."
        + (f" First error: `{pipe['first_error']}`." if pipe["first_error"] else ""),
        "",
        f"RemoveAgent of all {count}: {fmt(r['remove_s'], 1)} s. Processes the host had "
        f"started still running after it stopped: {len(r['left'])}.",
        "",
        machine_markdown(),
    ]
    return "\n".join(body)
