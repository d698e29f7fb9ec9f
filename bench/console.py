"""Web console benchmark (issue 26): a terminal flood reaching xterm.js in the browser through
the console, against the same flood read by an attached gRPC client (what `ether terminal
attach` does).

    python -m bench --only console [--quick]

Both paths run `read go; exec cat FILE` (20 MB of real text, bench/terminals.py's corpus) in a
fresh terminal and start it with an Enter. The gRPC client counts every output byte until the
exit message; the console (Debian's Chromium) is timed from the Enter to xterm.js having parsed
every byte after the exit message, and reports the worst lag of a 50 ms page timer meanwhile
(how unresponsive the page got). The console runs twice a round, in turn: in a Chromium driven
over a bare DevTools pipe (tests/web/flood_cdp.mjs: no DevTools domain on, as in a person's
browser; the verdict's row), and driven by playwright-core (tests/web/drive.mjs `flood`), whose
DevTools Network domain makes Chromium copy every WebSocket frame to the driver (reported for
reference). Then the corpus, and as many bytes of 75-byte lines, written into xterm.js from the
page itself: what parsing alone costs, the page's ceiling.
Target: console bytes/s >= 0.5 x the gRPC client's. The medians of ROUNDS rounds each.

Then the agents page with 200 agents (the Go echo agent, bench/echo/go, deployed under 200
names): the time from navigation (the page's time origin) to the table showing all 200 as
RUNNING, in a fresh browser context each round (nothing cached) and on a reload of the page
(its assets cached). Target: <= 1 s.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import EtherHost, median
from bench.report import fmt, machine_markdown, markdown_table, write_section
from bench.terminals import Terminals, _corpus, attached_throughput
from ether.v1 import supervisor_pb2, supervisor_pb2_grpc

ROUNDS = 3
TARGET = 0.5
AGENT_COUNT = 200
PAGE_ROUNDS = 5
PAGE_TARGET = 1.0  # seconds
GO_ECHO = Path(__file__).resolve().parent / "echo" / "go"


# What profiles showed (py-spy on the host, Chromium's CPU profile of the page; 2026-11-26, on a
# loaded machine): kept with the figures so a reader knows what bounds the ratio.
WHERE_THE_TIME_GOES = (
    "Where the time goes (target missed). The host is not the limit: py-spy shows it mostly "
    "waiting for the browser to read, apart from permessage-deflate (wsproto compresses every "
    "output frame in Python: ~70 % of its samples during the flood). Turning deflate off made "
    "the page slower, not faster (interleaved runs: 4.6-9.7 MiB/s into xterm.js and more output "
    "skipped, against 8.8-9.9 with it), so it stays on: deflate cuts the bytes through "
    "Chromium's WebSocket receive 4-5 x, and that receive is a limit of its own (20-36 MiB/s to "
    "a page that only counts bytes, deflate off). xterm.js is the other: on this corpus "
    "(Python source, short lines: a scroll event per line) the same 20 MB written from the page "
    "parse at about 24 MiB/s (17 MiB/s in 16 KiB writes), against the 75-byte lines of the "
    "'alone' row. Both run on the page's main thread, in series: the socket's data moves only "
    "while that thread is idle, and Chromium's CPU profile shows it a third idle between "
    "xterm.js's parse slices. Tried and not kept: reading the socket in a Web Worker "
    "(WebSocketStream, flow control by xterm.js's write callbacks): faster in most rounds, but "
    "Chromium ended some of its streams before their last frames (the page reconnected), so it "
    "is not built."
)


def _http_address(host: EtherHost) -> str:
    for record in host.records():
        if record.get("event") == "serving" and record.get("http"):
            return str(record["http"])
    raise RuntimeError("the host logged no HTTP listener address")


def _console_round(host: EtherHost, terminals: Terminals, base: str, path: Path) -> dict[str, Any]:
    """The flood on the console's page driven by playwright-core (drive.mjs `flood`), then the
    same bytes, and the corpus itself, written into xterm.js from the page."""
    from tests.web.support import drive

    terminal = terminals.create(command_line=f"read go; exec cat {path}", rows=40, cols=140)
    try:
        result = drive("flood", base=base, terminal=terminal.id, corpus=str(path), budget=300)
    finally:
        terminals.close(terminal.id)
    return result


def _plain_round(terminals: Terminals, base: str, path: Path) -> dict[str, Any]:
    """The flood on the console's page in a Chromium driven over a bare DevTools pipe
    (tests/web/flood_cdp.mjs): no DevTools domain on, as in a person's browser."""
    from tests.web.support import HERE, chromium

    terminal = terminals.create(command_line=f"read go; exec cat {path}", rows=40, cols=140)
    config = {"chromium": chromium(), "base": base, "terminal": terminal.id, "budget_ms": 300_000}
    try:
        finished = subprocess.run(
            ["node", str(HERE / "flood_cdp.mjs")],
            input=json.dumps(config),
            capture_output=True,
            text=True,
            timeout=360,
            cwd=HERE,
            check=False,
        )
    finally:
        terminals.close(terminal.id)
    lines = finished.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if lines else {}
    if not result.get("ok"):
        raise RuntimeError(f"flood_cdp.mjs: {result.get('error') or finished.stderr[-2000:]}")
    return result


def _deploy_many(host: EtherHost, count: int) -> float:
    """Deploy the Go echo agent under ``count`` names; seconds until ListAgents shows them all
    RUNNING (polled: EtherHost.deploy, a WatchEvents per deploy from 8 threads, hung here
    before all 200 returned; not looked into)."""
    from ether.v1 import agent_io_pb2, agent_io_pb2_grpc

    began = time.perf_counter()
    host.deploy(GO_ECHO, name="page-000")  # the first builds the binary the others reuse
    supervisor = supervisor_pb2_grpc.SupervisorServiceStub(host.channel)
    for index in range(1, count):
        spec = supervisor_pb2.AgentSpec(name=f"page-{index:03d}", path=str(GO_ECHO))
        supervisor.DeployAgent(supervisor_pb2.DeployAgentRequest(spec=spec), timeout=30)
    agents = agent_io_pb2_grpc.AgentIOServiceStub(host.channel)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        listed = agents.ListAgents(agent_io_pb2.ListAgentsRequest(page_size=1000), timeout=30)
        running = [a for a in listed.agents if a.state == agent_io_pb2.AGENT_STATE_RUNNING]
        if len(running) >= count:
            return time.perf_counter() - began
        time.sleep(0.2)
    raise RuntimeError(f"only {len(running)} of {count} agents reached RUNNING in 600 s")


def _agents_page(base: str, rounds: int) -> dict[str, Any]:
    from tests.web.support import drive

    return drive("agents_load", base=base, count=AGENT_COUNT, rounds=rounds, budget=60)


def main(quick: bool = False) -> int:
    rounds = 1 if quick else ROUNDS
    with tempfile.TemporaryDirectory(prefix="bench-console-") as scratch:
        folder = Path(scratch)
        corpus = _corpus(folder)
        with EtherHost(
            folder / "state", folder / "host.log", "--http-listen", "127.0.0.1:0"
        ) as host:
            base = _http_address(host)
            terminals = Terminals(host)
            grpc_runs = [attached_throughput(terminals, corpus, host.pid) for _ in range(rounds)]
            console_runs: list[dict[str, Any]] = []
            plain_runs: list[dict[str, Any]] = []
            for index in range(rounds):  # the two browser drives in turn, alternating which first
                for plain in (False, True) if index % 2 == 0 else (True, False):
                    if plain:
                        plain_runs.append(_plain_round(terminals, base, corpus))
                    else:
                        console_runs.append(_console_round(host, terminals, base, corpus))
            deploy_seconds = _deploy_many(host, AGENT_COUNT)
            page = _agents_page(base, 1 if quick else PAGE_ROUNDS)
    grpc_rate = median(run["bytes"] / run["seconds"] for run in grpc_runs)
    plain_rate = median(run["bytes"] / run["seconds"] for run in plain_runs)
    ratio = plain_rate / grpc_rate
    console_rate = median(run["bytes"] / run["seconds"] for run in console_runs)
    observed_ratio = console_rate / grpc_rate
    corpus_rate = median(r["bytes"] / r["aloneCorpusSeconds"] for r in console_runs)
    mib = 1024 * 1024
    rows = [
        [
            "gRPC client attached (Attach, Python stub)",
            fmt(median(r["bytes"] for r in grpc_runs) / mib, 1),
            fmt(median(r["seconds"] for r in grpc_runs), 2),
            fmt(grpc_rate / mib, 1),
            "",
            "",
        ],
        [
            "console: xterm.js in Chromium (/rpc-ws bridge), no DevTools domain on",
            fmt(median(r["bytes"] for r in plain_runs) / mib, 1),
            f"{fmt(median(r['seconds'] for r in plain_runs), 2)} (last byte received at "
            f"{fmt(median(r['receivedSeconds'] for r in plain_runs), 2)})",
            fmt(plain_rate / mib, 1),
            f"{ratio:.2f} x ({'PASS' if ratio >= TARGET else 'MISS'}, target >= {TARGET})",
            fmt(max(run["lagMs"] for run in plain_runs)),
        ],
        [
            "the same, driven by playwright-core (its DevTools Network domain on)",
            fmt(median(r["bytes"] for r in console_runs) / mib, 1),
            f"{fmt(median(r['seconds'] for r in console_runs), 2)} (last byte received at "
            f"{fmt(median(r['receivedSeconds'] for r in console_runs), 2)})",
            fmt(console_rate / mib, 1),
            f"{observed_ratio:.2f} x (reference)",
            fmt(max(run["lagMs"] for run in console_runs)),
        ],
        [
            "xterm.js alone: the corpus written from the page itself (no host, no bridge)",
            fmt(median(r["bytes"] for r in console_runs) / mib, 1),
            fmt(median(r["aloneCorpusSeconds"] for r in console_runs), 2),
            fmt(corpus_rate / mib, 1),
            f"{corpus_rate / grpc_rate:.2f} x (the page's ceiling)",
            "",
        ],
        [
            "xterm.js alone: as many bytes of 75-byte lines written from the page",
            fmt(median(r["bytes"] for r in console_runs) / mib, 1),
            fmt(median(r["aloneSeconds"] for r in console_runs), 2),
            fmt(median(r["bytes"] / r["aloneSeconds"] for r in console_runs) / mib, 1),
            "",
            "",
        ],
    ]
    body = (
        f"`python -m bench --only console`{' --quick' if quick else ''}: `cat` of 20 MB of text "
        "in a terminal, from the Enter that starts it to the last byte: read by an attached gRPC "
        "client, and parsed by xterm.js on the console's terminal page (Debian's Chromium, "
        f"headless, driven by playwright-core). Medians of {rounds} round(s).\n\n"
        + markdown_table(
            ["path", "MiB", "seconds", "MiB/s", "console / gRPC", "worst page timer lag (ms)"],
            rows,
        )
        + (
            "\n\nThe console received fewer bytes than `cat` wrote: its attach fell more than "
            "`attach_lag` (2 MiB) behind and the host skipped output, as it does for any viewer "
            "that slow (AttachLagged; the page says how many bytes it skipped)."
            if min(r["bytes"] for r in plain_runs + console_runs)
            < median(r["bytes"] for r in grpc_runs)
            else ""
        )
        + "\n\n"
        + WHERE_THE_TIME_GOES
        + "\n\n"
        + _page_body(page, deploy_seconds)
        + "\n\n"
        + machine_markdown()
    )
    write_section("Web console", body)
    print(body)
    return 0


def _page_body(page: dict[str, Any], deploy_seconds: float) -> str:
    cold = [ms / 1000 for ms in page["cold"]]
    warm = [ms / 1000 for ms in page["warm"]]
    worst = max(cold + warm)
    verdict = "PASS" if worst <= PAGE_TARGET else "MISS"
    rows = [
        [
            "fresh browser context (nothing cached)",
            str(len(cold)),
            fmt(median(cold), 2),
            fmt(max(cold), 2),
        ],
        ["reload (assets cached)", str(len(warm)), fmt(median(warm), 2), fmt(max(warm), 2)],
    ]
    return (
        f"The agents page with {AGENT_COUNT} agents (the Go echo agent, bench/echo/go, deployed "
        f"under {AGENT_COUNT} names: {fmt(deploy_seconds, 0)} s to have them all RUNNING): "
        "seconds from navigation (the page's time origin) to the table showing every one of "
        "them RUNNING (Chromium headless, 1280x800, drive.mjs scenario `agents_load`). "
        f"Target <= {PAGE_TARGET:g} s: {verdict} (worst {fmt(worst, 2)} s).\n\n"
        + markdown_table(["load", "rounds", "median s", "worst s"], rows)
    )
