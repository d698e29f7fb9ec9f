"""The agents suite's host profile: py-spy samples of the host's main thread by area."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.profiling import main_thread_stacks
from bench.report import fmt, markdown_table

# Areas of the host's main thread. A sample counts for the innermost frame under the event loop
# that names an area, so a json.dumps inside structlog is logging, a call anyio makes is anyio.
AREAS = (
    ("per-RPC log line (structlog)", ("structlog/", "ether_host/logs")),
    ("params schema validation (jsonschema)", ("jsonschema/", "ether_host/agents/validation")),
    (
        "proto <-> dict conversion (convert.py, protobuf)",
        ("ether_host/transport/convert", "google/protobuf"),
    ),
    ("stdio link (frames, orjson)", ("ether_host/link/",)),
    ("dispatcher (agents/)", ("ether_host/agents/",)),
    ("supervisor", ("ether_host/supervisor/",)),
    (
        "RPC wrappers (transport/interceptors.py, rpc_logging.py)",
        ("ether_host/transport/interceptors", "ether_host/transport/rpc_logging"),
    ),
    ("AgentIO servicer (transport/agent_io.py)", ("ether_host/transport/agent_io",)),
    ("other ether_host code", ("ether_host/",)),
    ("anyio (task groups, cancel scopes, streams)", ("anyio/",)),
    ("grpc.aio Python code", ("grpc/",)),
)
NO_FRAME = "grpc.aio Cython and uvloop (no Python frame under the loop)"
# Writing a frame wakes the agent, which on two vCPUs often preempts the host right there.
PIPE_WRITE = ("StreamWriter.write (", "write(2) of a frame to the agent (and preemption by it)")


def areas(raw: Path) -> dict[str, Any]:
    """The host main thread's samples by area and its top functions by own time."""
    total, own, areas = 0, dict[str, int](), dict[str, int]()
    for frames, samples in main_thread_stacks(raw):
        total += samples
        leaf = frames[-1].rsplit(":", 1)[0] + ")" if "(" in frames[-1] else frames[-1]
        own[leaf] = own.get(leaf, 0) + samples
        # Only frames under the event loop say who asked for the work.
        loop = next((i for i, f in enumerate(frames) if f.startswith("Runner.run (")), -1)
        if loop == len(frames) - 1:
            area = NO_FRAME
        elif frames[-1].startswith(PIPE_WRITE[0]):
            area = PIPE_WRITE[1]
        else:
            named = (
                name
                for f in reversed(frames[loop + 1 :])
                for name, marks in AREAS
                if any(m in f for m in marks)
            )
            area = next(named, "asyncio and the rest of the stdlib")
        areas[area] = areas.get(area, 0) + samples
    share = sorted(
        ((name, n / max(total, 1) * 100) for name, n in areas.items()), key=lambda kv: -kv[1]
    )
    top = sorted(own.items(), key=lambda kv: -kv[1])[:12]
    return {
        "samples": total,
        "areas": share,
        "top": [(name, n / max(total, 1) * 100) for name, n in top],
    }


def profile_markdown(
    label: str, profile: dict[str, Any], base: str, baseline_us: float
) -> list[str]:
    title = f"### Host profile: {label} (py-spy)"
    if "failed" in profile:
        return [title, "", f"py-spy failed: {profile['failed']}"]
    bare = "bare unary echo" if base == "grpc" else "bare bidi-stream echo"
    voluntary, involuntary = profile["switches"]
    areas = [[name, fmt(pct, 1)] for name, pct in profile["areas"]]
    top = [[f"`{name}`", fmt(pct, 1)] for name, pct in profile["top"]]
    threads = [[name, fmt(cores, 2)] for name, cores in profile["threads"]]
    return [
        title,
        "",
        f"`py-spy record --rate 200 --threads --format raw` of the host: {profile['samples']:,} "
        f"main-thread samples in the middle of a run at {fmt(profile['rate'])} calls/s, with "
        f"{fmt(profile['host_cpu_us'])} µs of host CPU per call, {fmt(profile['main_us'])} of them on "
        f"the main thread (the {bare} server: {fmt(baseline_us)} µs per call at the same concurrency "
        f"in this run). The main thread was switched out {involuntary:.1f} times per call while it "
        f"could have run on (preempted) and {voluntary:.1f} times waiting. Raw stacks: "
        f"`{profile['path']}`.",
        "",
        markdown_table(["host thread", "cores while sampled"], threads),
        "",
        "The main thread's samples by area: the innermost frame under the event loop that names one; "
        "a sample with no Python frame under the loop is grpc.aio's Cython code or uvloop at work. "
        "py-spy counts a thread while it is runnable, including while it waits for a CPU, so where "
        "the host is often preempted (right after waking the agent, in a frame write) an area "
        "holds waiting as well as work.",
        "",
        markdown_table(["area", "% of samples"], areas),
        "",
        markdown_table(["top functions, own time", "% of samples"], top),
    ]
