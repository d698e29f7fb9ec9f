"""Terminals at scale (issue 27 item 4): 100 terminals printing at once, each with an attached
client, against one terminal printing alone, and ReadScreen on one of them meanwhile.

    python -m bench --only scale_terminals [--quick]

Each round runs four floods, in a rotating order:

1. one: one terminal prints 20 MB with one attached client (the baseline of host CPU per MB);
2. many: 100 terminals print 2 MB each at once, each with its own attached client (Attach
   streams of a grpc.aio client in another process, bench/scale_terminals_client.py);
3. many + reads: the same, while this process calls ReadScreen on one of the 100 every
   ``READ_PAUSE`` s (an agent polling a screen); before the flood the same calls on the same
   terminal, every terminal attached and idle, are the baseline;
4. many + reads, no cpu groups: the same on a second host started with
   ``[limits.terminals] cpu_weight = "unlimited"`` (the terminals' programs in the host's cpu
   group, each weighing as much as its event loop: the default before).

Every terminal runs ``head -c 4000 FILE; read go; exec head -c SIZE FILE`` (FILE: 20 MB of Python
sources, bench/terminals.py's corpus), so its screen is full and it waits; the client types Enter
into all of them at once. Target: ReadScreen p50 during the flood <= 5 ms (issue 27). Host CPU
per MB delivered and total throughput are reported, with the one-terminal figures beside them.

Every process is started by this module and stopped by its pid; the host listens on 127.0.0.1:0.
"""

from __future__ import annotations

import argparse
import json
import selectors
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import (
    PYTHON,
    CpuMeter,
    EtherHost,
    median,
    percentile,
    read_json_line,
    spawn,
    spread,
    stop_process,
    wait_quiet,
)
from bench.report import fmt, machine_facts, markdown_table, write_section
from bench.terminals import Terminals, _corpus, _rss_kib, reaped_children_cpu

TERMINALS = 100
PER_TERMINAL = 2_000_000  # bytes each of the 100 prints
ALONE = 20_000_000  # bytes the one terminal prints
PREFILL = 4000  # bytes each prints before it waits: a full screen to read
ROUNDS = 3
READ_PAUSE = 0.02  # seconds between two ReadScreen calls (50 a second)
IDLE_READS = 100
READ_TARGET_MS = 5.0
FLOOD_TIMEOUT = 600.0
CONFIG = "[terminals]\nmax_terminals = 300\nmax_terminals_per_owner = 300\n"
# The terminals' programs in the host's cpu group, as before they had one of their own by default.
UNGROUPED_CONFIG = '[limits.terminals]\ncpu_weight = "unlimited"\n'


@dataclass
class Flood:
    """What one flood delivered and cost."""

    terminals: int
    printed: int  # bytes the programs printed after Enter
    delivered: int  # bytes the attached clients received after Enter
    seconds: float  # Enter -> the last terminal's exit message
    host_cpu: float  # seconds, every thread of `ether serve`, over the flood
    children_cpu: float  # seconds, the terminals' processes (programs, pumps), create to close
    foreign_cores: float
    messages: int
    lagged: int
    rss_mib: tuple[float, float]  # host RSS before and after
    idle_reads: list[float] = field(default_factory=list)  # seconds
    flood_reads: list[float] = field(default_factory=list)  # seconds, ended before the first exit

    @property
    def mb_per_s(self) -> float:
        return self.delivered / 1e6 / self.seconds

    @property
    def host_ms_per_mb(self) -> float:
        return self.host_cpu * 1000 / (self.delivered / 1e6)

    @property
    def children_ms_per_mb(self) -> float:
        return self.children_cpu * 1000 / (self.delivered / 1e6)


def _ready(process: subprocess.Popen[bytes]) -> bool:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        return bool(selector.select(0))


def _send(process: subprocess.Popen[bytes], value: dict[str, Any]) -> None:
    assert process.stdin is not None
    process.stdin.write(json.dumps(value).encode() + b"\n")
    process.stdin.flush()


def flood(
    host: EtherHost, terminals: Terminals, path: Path, count: int, size: int, reads: bool
) -> Flood:
    """``count`` terminals print ``size`` bytes each at once, each with an attached client."""
    command = f"head -c {PREFILL} {path}; read go; exec head -c {size} {path}"
    children_before = reaped_children_cpu(host.pid)
    with ThreadPoolExecutor(8) as pool:
        made = list(pool.map(lambda _: terminals.create(command_line=command), range(count)))
    ids = [terminal.id for terminal in made]
    client = spawn([PYTHON, "-m", "bench.scale_terminals_client", host.address])
    try:
        _send(client, {"terminals": ids})
        read_json_line(client, timeout=120)  # attached
        target = ids[0]
        terminals.wait_screen(target, r"\S")  # its prefill is in
        idle: list[float] = []
        if reads:
            wait_quiet([host.pid, client.pid], max_wait=20)
            terminals.read(target)  # the emulator's first feed
            for _ in range(IDLE_READS):
                idle.append(terminals.read(target))
                time.sleep(READ_PAUSE)
        rss_before = _rss_kib(host.pid) / 1024
        meter = CpuMeter({"host": host.pid}, ours=[client.pid])
        meter.start()
        _send(client, {"go": True})
        timed: list[tuple[float, float]] = []  # (end, seconds)
        while reads and not _ready(client):
            took = terminals.read(target)
            timed.append((time.monotonic(), took))
            time.sleep(READ_PAUSE)
        result = read_json_line(client, timeout=FLOOD_TIMEOUT)
        cpu = meter.stop()
        rss_after = _rss_kib(host.pid) / 1024
    finally:
        stop_process(client)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(terminals.close, ids))
    if result["errors"]:
        raise RuntimeError(f"{len(result['errors'])} attach streams failed: {result['errors'][0]}")
    began, first_exit = result["began"], result["first_exit"]
    return Flood(
        terminals=count,
        printed=count * size,
        delivered=sum(result["bytes"]),
        seconds=result["last_exit"] - began,
        host_cpu=cpu["cpu_s"]["host"],
        children_cpu=reaped_children_cpu(host.pid) - children_before,
        foreign_cores=cpu["foreign_cores"],
        messages=result["messages"],
        lagged=result["lagged"],
        rss_mib=(rss_before, rss_after),
        idle_reads=idle,
        flood_reads=[took for end, took in timed if began < end - took and end < first_exit],
    )


UNGROUPED = "many + reads, no cpu groups"
KINDS = ("one", "many", "many + reads", UNGROUPED)


def _round(
    hosts: dict[str, tuple[EtherHost, Terminals]], path: Path, number: int
) -> dict[str, Flood]:
    host, terminals = hosts["default"]
    other, others = hosts["ungrouped"]
    runs = {
        "one": lambda: flood(host, terminals, path, 1, ALONE, False),
        "many": lambda: flood(host, terminals, path, TERMINALS, PER_TERMINAL, False),
        "many + reads": lambda: flood(host, terminals, path, TERMINALS, PER_TERMINAL, True),
        UNGROUPED: lambda: flood(other, others, path, TERMINALS, PER_TERMINAL, True),
    }
    turn = number % len(KINDS)
    order = KINDS[turn:] + KINDS[:turn]
    found = {}
    for kind in order:
        wait_quiet([host.pid, other.pid], max_wait=20)
        found[kind] = result = runs[kind]()
        print(
            f"scale_terminals: round {number + 1} {kind}: {result.mb_per_s:.1f} MB/s, host "
            f"{result.host_ms_per_mb:.1f} ms/MB, lagged {result.lagged}"
            + (
                f", ReadScreen p50 idle {percentile(result.idle_reads, 50) * 1000:.2f} ms, "
                f"flood {percentile(result.flood_reads, 50) * 1000:.2f} ms "
                f"({len(result.flood_reads)} calls)"
                if result.idle_reads
                else ""
            ),
            file=sys.stderr,
        )
    return found


def main(quick: bool = False) -> int:
    rounds = 1 if quick else ROUNDS  # a quick run: one round of the same floods
    started = time.monotonic()
    facts = machine_facts()
    with tempfile.TemporaryDirectory(prefix="ether-bench-scale-term-") as folder:
        root = Path(folder)
        path = _corpus(root)
        (root / "host.toml").write_text(CONFIG)
        (root / "ungrouped.toml").write_text(CONFIG + UNGROUPED_CONFIG)
        with (
            EtherHost(
                root / "state", root / "host.log", "--config", str(root / "host.toml")
            ) as host,
            EtherHost(
                root / "state-ungrouped",
                root / "ungrouped.log",
                "--config",
                str(root / "ungrouped.toml"),
            ) as other,
        ):
            hosts = {"default": (host, Terminals(host)), "ungrouped": (other, Terminals(other))}
            data = [_round(hosts, path, number) for number in range(rounds)]
            peak_mib = _peak_kib(host.pid) / 1024
            cpu_groups = next(
                (
                    r["mechanisms"]["cpu_weight"]
                    for r in host.records()
                    if r.get("event") == "resource limits"
                ),
                "not logged",
            )
    took = time.monotonic() - started
    body, verdict = _report(data, facts, quick, took, peak_mib, cpu_groups)
    write_section("Terminals at scale", body)
    print(body)
    print(f"scale_terminals: {verdict}", file=sys.stderr)
    return 0


def _peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def _report(
    data: list[dict[str, Flood]],
    facts: dict[str, str],
    quick: bool,
    took: float,
    peak_mib: float,
    cpu_groups: str,
) -> tuple[str, str]:
    many = [d["many"] for d in data]
    one = [d["one"] for d in data]
    with_reads = [d["many + reads"] for d in data]
    idle = [t * 1000 for f in with_reads for t in f.idle_reads]
    busy = [t * 1000 for f in with_reads for t in f.flood_reads]
    busy_p50, idle_p50 = percentile(busy, 50), percentile(idle, 50)
    read_verdict = "PASS" if busy_p50 <= READ_TARGET_MS else "MISS"
    per_mb = [m.host_ms_per_mb / o.host_ms_per_mb for m, o in zip(many, one, strict=True)]
    rates = [m.mb_per_s / o.mb_per_s for m, o in zip(many, one, strict=True)]
    round_p50s = [percentile(f.flood_reads, 50) * 1000 for f in with_reads]
    ungrouped = [t * 1000 for d in data for t in d[UNGROUPED].flood_reads]
    ungrouped_p50 = percentile(ungrouped, 50)
    ungrouped_rounds = [percentile(d[UNGROUPED].flood_reads, 50) * 1000 for d in data]

    def span(values: list[float], digits: int = 2) -> str:
        low, high = spread(values)
        return f"{low:.{digits}f}-{high:.{digits}f}"

    rows = [
        [
            f"ReadScreen p50 on one of {TERMINALS} printing terminals, each attached (ms)",
            f"<= {READ_TARGET_MS:g}",
            f"{busy_p50:.2f}",
            span(round_p50s),
            read_verdict,
        ],
        [
            "ReadScreen p50 during the flood / the same terminal with the host idle",
            "-",
            f"{busy_p50 / idle_p50:.1f}",
            "-",
            f"(idle p50 {idle_p50:.2f} ms)",
        ],
        [
            "ReadScreen p50 during the flood, the terminals' programs without cpu groups "
            '(`cpu_weight = "unlimited"`, the default before) (ms)',
            "-",
            f"{ungrouped_p50:.2f}",
            span(ungrouped_rounds),
            f"({ungrouped_p50 / busy_p50:.0f} x the default's)",
        ],
        [
            f"host CPU per MB delivered, {TERMINALS} terminals / 1 terminal",
            "-",
            f"{median(per_mb):.2f}",
            span(per_mb),
            f"({median([m.host_ms_per_mb for m in many]):.1f} / "
            f"{median([o.host_ms_per_mb for o in one]):.1f} ms per MB)",
        ],
        [
            f"total throughput delivered, {TERMINALS} terminals / 1 terminal",
            "-",
            f"{median(rates):.2f}",
            span(rates),
            f"({median([m.mb_per_s for m in many]):.1f} / "
            f"{median([o.mb_per_s for o in one]):.1f} MB/s)",
        ],
    ]

    def flood_row(number: int, kind: str, f: Flood) -> list[Any]:
        return [
            number,
            kind,
            f.terminals,
            f"{f.delivered / 1e6:.1f} / {f.printed / 1e6:.1f}",
            fmt(f.seconds, 2),
            fmt(f.mb_per_s, 1),
            fmt(f.host_ms_per_mb, 1),
            fmt(f.children_ms_per_mb, 1),
            fmt(f.messages),
            f.lagged,
            f"{f.rss_mib[0]:.0f} -> {f.rss_mib[1]:.0f}",
            f"{f.foreign_cores:.2f}",
            fmt(percentile(f.idle_reads, 50) * 1000, 2) if f.idle_reads else "-",
            (
                f"{percentile(f.flood_reads, 50) * 1000:.2f} / "
                f"{percentile(f.flood_reads, 90) * 1000:.2f} ({len(f.flood_reads)})"
                if f.flood_reads
                else "-"
            ),
        ]

    table = [
        flood_row(number, kind, d[kind]) for number, d in enumerate(data, start=1) for kind in KINDS
    ]
    body = f"""\
Run on {facts["date"]} at commit {facts["commit"]}; {took:.0f} s. \
`make bench ARGS='--only scale_terminals'` reruns only this section.{
        " QUICK RUN: not a measurement." if quick else ""
    }

{markdown_table(["measure", "target", "median", "range over rounds", "verdict"], rows)}

### Floods ({len(data)} rounds, the order rotating)

{
        markdown_table(
            [
                "round",
                "flood",
                "terminals",
                "MB delivered / printed",
                "seconds",
                "MB/s delivered",
                "host CPU ms/MB",
                "programs + pumps CPU ms/MB",
                "output messages",
                "lagged",
                "host RSS MiB before -> after",
                "other load (cores)",
                "ReadScreen p50 idle ms",
                "ReadScreen p50 / p90 during the flood ms (calls)",
            ],
            table,
        )
    }

- Each terminal (80x24, 1,000 lines of scrollback) runs `head -c {PREFILL} FILE; read go; exec
  head -c SIZE FILE` on 20 MB of Python sources; every one has a client attached before the
  Enter that starts it (one grpc.aio channel in another process, one Attach stream per terminal,
  reading every message). Timed from the Enter to the last `exit` message. "one": a single
  terminal printing {ALONE / 1e6:.0f} MB; "many": {TERMINALS} printing {
        PER_TERMINAL / 1e6:.0f} MB each
  at once. MB = 10^6 bytes delivered to the clients (with ONLCR's CRs), counted in `output`
  messages; a client that falls 2 MiB behind is sent `lagged` and skips ahead, so delivered can
  be less than printed.
- Host CPU: every thread of `ether serve` over the flood. Programs + pumps: the CPU of the
  terminals' processes (bash, `head`, the two `cat` pumps each), reaped by the host, from create
  to close (10 ms ticks). "other load" is every process but the host and the clients, the
  terminals' processes included: on this 2-vCPU VM the floods keep both cores busy.
- ReadScreen: TEXT format, 80x24, one call every {READ_PAUSE * 1000:.0f} ms from this process on the
  first of the {TERMINALS} terminals: {IDLE_READS} calls before the Enter (every terminal attached
  and quiet: the baseline), then calls until the first terminal's `exit` (those that ended after it
  are not counted). Each call feeds the screen what the terminal printed since the last one.
- CPU groups: each terminal's program runs in a cpu control group of its own, of the host's
  weight (`[limits.terminals] cpu_weight`, 100 by default; enforced here by: {cpu_groups}). The
  "{UNGROUPED}" floods ran on a second host, idle meanwhile, started with `cpu_weight =
  "unlimited"`: the programs then share the host's group, each weighing as much as the host's
  event loop. The pumps are in the host's group either way.
- Host peak RSS over the run (VmHWM): {peak_mib:.0f} MiB.
- Machine: {facts["nproc"]} vCPUs ({facts["cpu"]}), {facts["kernel"]}, {facts["memory"]}; Python \
{facts["python"]}; {facts["packages"]}.
"""
    verdict = (
        f"ReadScreen p50 during the flood {busy_p50:.2f} ms ({read_verdict}, target <= "
        f"{READ_TARGET_MS:g}); idle {idle_p50:.2f} ms, ratio {busy_p50 / idle_p50:.1f}; host CPU per "
        f"MB {TERMINALS} / 1 terminal {median(per_mb):.2f}; throughput {median(rates):.2f} x one terminal"
    )
    return body, verdict


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.scale_terminals")
    parser.add_argument("--quick", action="store_true")
    sys.exit(main(parser.parse_args().quick))
