"""py-spy of a running process, with the CPU each of its threads used meanwhile (from /proc)."""

from __future__ import annotations

import contextlib
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import PYTHON, thread_cpu

PY_SPY = Path(PYTHON).parent / "py-spy"


def named_thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds per live thread of ``pid``, keyed ``"<tid> <name>"``."""
    found = {}
    for tid, seconds in thread_cpu(pid).items():
        with contextlib.suppress(OSError):
            found[f"{tid} {Path(f'/proc/{pid}/task/{tid}/comm').read_text().strip()}"] = seconds
    return found


def context_switches(pid: int) -> tuple[int, int]:
    """(voluntary, involuntary) context switches of ``pid``'s main thread so far."""
    counts = dict(
        re.findall(r"^(\w+)_ctxt_switches:\s*(\d+)", Path(f"/proc/{pid}/status").read_text(), re.M)
    )
    return int(counts.get("voluntary", 0)), int(counts.get("nonvoluntary", 0))


@dataclass
class ThreadProfile:
    """What a process did while py-spy sampled it: cores per thread, and how often its main
    thread was switched out (involuntary: preempted while it could have run on)."""

    pid: int
    cores: list[tuple[str, float]] = field(default_factory=list)  # ("name", cores), busiest first
    record: subprocess.CompletedProcess[str] | None = None
    switches: tuple[int, int] = (0, 0)  # voluntary, involuntary, over the sampled window

    @property
    def main_cores(self) -> float:
        return next((c for name, c in self.cores if name.endswith("(main)")), 0.0)


def py_spy_record(pid: int, seconds: int, raw: Path, rate: int = 200) -> ThreadProfile:
    """``py-spy record --threads --format raw`` of ``pid`` into ``raw``, with the CPU each thread
    used meanwhile (from /proc). py-spy pauses the process briefly at each sample."""
    before, switched = named_thread_cpu(pid), context_switches(pid)
    began = time.perf_counter()
    argv = [str(PY_SPY), "record", "--pid", str(pid), "--duration", str(seconds)]
    argv += ["--rate", str(rate), "--threads", "--format", "raw", "--output", str(raw)]
    record = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60)
    wall = time.perf_counter() - began
    after, now = named_thread_cpu(pid), context_switches(pid)
    cores = []
    for key, seconds_now in after.items():
        tid, name = key.split(" ", 1)
        used = (seconds_now - before.get(key, 0.0)) / wall
        if used >= 0.005:
            cores.append((name + (" (main)" if tid == str(pid) else ""), used))
    switches = (now[0] - switched[0], now[1] - switched[1])
    return ThreadProfile(pid, sorted(cores, key=lambda kv: -kv[1]), record, switches)


def main_thread_stacks(raw: Path) -> Iterator[tuple[list[str], int]]:
    """(frames root first, sample count) of the main thread in a ``py-spy --threads --format raw``
    file; a frame reads ``function (file:line)``."""
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if count.isdigit() and frames[0].endswith("MainThread"):
            yield frames[1:], int(count)
