"""``ether top``: the agents, refreshed from the host every ``--interval`` seconds on a live
rich view — state, replicas running of those asked for, tasks in flight and queued, restarts
(and how many since the view opened), and the tasks that ended since the last refresh: per
second, and their p50 and p99 durations. ``--once`` (or ``--iterations N``) prints plain tables
instead, for scripts and for a terminal that is not one.

The task figures come from the host's /metrics (task_metrics.py), scraped at every refresh; a
rate needs two scrapes. The live view draws its first frame at once, with "-" until the next
refresh; a plain table is printed for good, so each one shows the interval before it: the
first is printed one ``--interval`` after a first scrape (``--once`` takes that long, as
``docker stats --no-stream`` does). Without metrics the columns are "-", a line says why, and
the first table comes at once.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import Any, TextIO

from ether_host.cli.client import (
    EXIT_OK,
    Metadata,
    add_connection_arguments,
    connect,
    print_table,
    report_rpc_error,
)
from ether_host.cli.status import (
    AGENT_HEADER,
    AgentRow,
    agent_cells,
    agent_rows,
    format_uptime,
    host_summary,
)
from ether_host.cli.task_metrics import (
    MetricsUnavailable,
    Scrape,
    TaskFigures,
    add_metrics_argument,
    format_rate,
    format_seconds,
    over_interval,
    scrape_host,
)

HEADER = [*AGENT_HEADER, "TASKS/S", "P50", "P99", "NEW RESTARTS"]


def add_parser(commands: Any) -> None:
    """Register ``top`` on the ``ether`` command's subparsers."""
    text = "a live view of the agents: state, replicas, load and restarts"
    parser = commands.add_parser("top", help=text, description=text)
    parser.set_defaults(command_parser=parser)
    add_connection_arguments(parser)
    parser.add_argument(
        "--interval", type=float, default=2.0, help="seconds between refreshes (default 2)"
    )
    parser.add_argument(
        "--iterations", type=int, default=0, help="refresh this many times, then exit (0: until ^C)"
    )
    parser.add_argument(
        "--once",
        action="store_true",
        help="print the agents once as a plain table and exit (after one --interval: the "
        "tasks/s and percentiles are over it)",
    )
    add_metrics_argument(parser)


@dataclass(frozen=True)
class _Frame:
    """One refresh: the host, its agents, restarts since the view opened, and the task figures
    over the interval since the previous refresh (empty, with ``note`` saying why, when there
    are none)."""

    host: dict[str, Any]
    rows: list[AgentRow]
    since: dict[str, int]
    tasks: dict[str, TaskFigures]
    note: str

    def task_cells(self, name: str) -> list[str]:
        if not self.tasks:
            return ["-", "-", "-"]
        found = self.tasks.get(name)
        if found is None:  # no task of it ever ended on this host
            return ["0", "-", "-"]
        return [format_rate(found.per_second), format_seconds(found.p50), format_seconds(found.p99)]


class _Sampler:
    """One look at the host per call, with the restarts seen at the first look kept, so the
    view can say which agents restarted while it was open."""

    def __init__(self, channel: Any, metadata: Metadata, args: argparse.Namespace) -> None:
        from ether.v1 import agent_io_pb2_grpc, supervisor_pb2_grpc

        self._agents = agent_io_pb2_grpc.AgentIOServiceStub(channel)
        self._supervisor = supervisor_pb2_grpc.SupervisorServiceStub(channel)
        self._metadata = metadata
        self._args = args
        self._first_restarts: dict[str, int] = {}
        self._last_scrape: Scrape | None = None

    def _scrape(self, listeners: list[str]) -> Scrape | str:
        try:
            return scrape_host(self._args, listeners)
        except MetricsUnavailable as error:
            return str(error)

    def prime(self) -> bool:
        """A first scrape, so that the next sample has an interval to show; False when the
        host's metrics cannot be read (there is no interval worth waiting for)."""
        scraped = self._scrape(host_summary(self._supervisor, self._metadata)["listeners"])
        self._last_scrape = scraped if isinstance(scraped, Scrape) else None
        return self._last_scrape is not None

    def sample(self) -> _Frame:
        host = host_summary(self._supervisor, self._metadata)
        rows = agent_rows(self._agents, self._supervisor, self._metadata)
        for row in rows:
            self._first_restarts.setdefault(row.name, row.restarts)
        since = {row.name: max(0, row.restarts - self._first_restarts[row.name]) for row in rows}
        scraped = self._scrape(host["listeners"])
        before, self._last_scrape = (
            self._last_scrape,
            scraped if isinstance(scraped, Scrape) else None,
        )
        if isinstance(scraped, str):
            return _Frame(host, rows, since, {}, f"TASKS/S, P50, P99: - ({scraped})")
        if before is None:
            return _Frame(host, rows, since, {}, "TASKS/S, P50, P99: from the next refresh on")
        seconds = scraped.at - before.at
        note = f"TASKS/S, P50, P99: the tasks that ended in the last {seconds:.1f}s"
        return _Frame(host, rows, since, over_interval(before, scraped), note)


def _title(host: dict[str, Any], rows: list[AgentRow]) -> str:
    running = sum(1 for row in rows if row.running)
    return (
        f"ether {host['version']} up {format_uptime(host['uptime_seconds'])} - "
        f"{len(rows)} agents, {running} running, "
        f"{sum(r.in_flight for r in rows)} tasks in flight, {sum(r.queued for r in rows)} queued"
    )


def _view(frame: _Frame) -> Any:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=_title(frame.host, frame.rows), title_justify="left", expand=False)
    for column in HEADER:
        table.add_column(column, justify="left" if column in ("NAME", "STATE") else "right")
    for row in frame.rows:
        style = {"RUNNING": "green", "FATAL": "bold red", "BACKOFF": "yellow"}.get(row.state, "")
        # Text: a name is never markup
        cells = [Text(cell) for cell in [*agent_cells(row), *frame.task_cells(row.name)]]
        cells[1].stylize(style)
        fresh = frame.since.get(row.name, 0)
        cells.append(Text(str(fresh), style="bold yellow" if fresh else ""))
        table.add_row(*cells)
    table.caption = Text(frame.note)  # Text: an error's message is never markup
    table.caption_justify = "left"
    return table


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Entry point of ``ether top``."""
    import grpc  # imported late: `ether --help` should not load grpc

    iterations = 1 if args.once else max(0, args.iterations)
    interval = max(0.1, args.interval)
    channel, metadata = connect(args)
    sampler = _Sampler(channel, metadata, args)
    try:
        if args.once or args.iterations or not out.isatty():
            return _print_frames(sampler, iterations, interval, out)
        return _live(sampler, interval)
    except grpc.RpcError as error:
        return report_rpc_error(error, err, "ether top")
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        channel.close()


def _print_frames(sampler: _Sampler, iterations: int, interval: float, out: TextIO) -> int:
    """Plain tables, one per refresh after a first scrape, a blank line between them. Without
    metrics the first table comes at once: its other columns are the load now."""
    wait = sampler.prime()
    done = 0
    while True:
        if wait:
            time.sleep(interval)
        wait = True
        frame = sampler.sample()
        if done:
            out.write("\n")
        out.write(_title(frame.host, frame.rows) + "\n")
        print_table(
            HEADER,
            [
                [*agent_cells(row), *frame.task_cells(row.name), str(frame.since.get(row.name, 0))]
                for row in frame.rows
            ],
            out,
        )
        out.write(frame.note + "\n")
        out.flush()
        done += 1
        if iterations and done >= iterations:
            return EXIT_OK


def _live(sampler: _Sampler, interval: float) -> int:
    """The rich view, redrawn in place until ^C."""
    from rich.live import Live

    with Live(_view(sampler.sample()), auto_refresh=False, screen=False) as live:
        while True:
            time.sleep(interval)
            live.update(_view(sampler.sample()), refresh=True)
