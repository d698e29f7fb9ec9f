"""`ether top`'s tasks/s and p50/p99 and `ether status`'s tasks since start, against a real host
with metrics on and real agents: the CLI finds the host's /metrics through GetHostInfo (or
--metrics-url), scrapes it with the command's token, and shows the agent that ran tasks with
figures and the one that did not with none; without metrics the columns are "-" and a line says
why. No wait is on time: a thread keeps the busy agent working for as long as `top` runs."""

from __future__ import annotations

import fcntl
import json
import math
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyte
import pytest

from ether.v1 import agent_io_pb2
from ether_host.cli.task_metrics import histogram_quantile, metrics_url
from tests.host._support import Host
from tests.support.agents import AGENTS, deploy
from tests.support.calls import agent_input
from tests.support.certs import Authority
from tests.support.host import ETHER, ROOT, HostProcess

OPERATOR = "operator-token-for-tests"
VIEWER = "viewer-token-for-tests"  # agent.read only: what ListAgents and /metrics need
AUTH = (("authorization", f"Bearer {OPERATOR}"),)
# A column of `ether top`'s rows, counted on the whitespace-split row ("IN FLIGHT" is one cell).
TASKS_PER_S, P50, P99 = 6, 7, 8


def ether(host: HostProcess, *args: str, token: str = VIEWER) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ETHER), *args, "--address", host.address, "--token", token],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
    )


@pytest.fixture(scope="module")
def metrics_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """Metrics on, an HTTP listener, auth on; 'busy', 'past' and 'napper' (workers the tests
    give tasks) and 'quiet' (a worker no test calls)."""
    root = tmp_path_factory.mktemp("top-metrics")
    tokens = root / "tokens"
    tokens.write_text(f"operator {OPERATOR}\nviewer {VIEWER} agent.read\n")
    tokens.chmod(0o600)
    host = HostProcess(
        root / "state",
        "--auth-tokens-file",
        str(tokens),
        env={"ETHER_TELEMETRY_METRICS": "true"},
        http=True,
    )
    try:
        host.wait_serving()
        for name in ("busy", "past", "quiet", "napper"):
            deploy(host, AGENTS / "worker", name=name, metadata=AUTH)
        yield host
    finally:
        assert host.stop() == 0


def run_task(host: HostProcess, agent: str, action: str, params: dict[str, object]) -> None:
    request = agent_io_pb2.ExecuteRequest(input=agent_input(agent, action, params))
    output = host.agents.Execute(request, timeout=60, metadata=AUTH).output
    assert agent_io_pb2.TaskStatus.Name(output.status) == "TASK_STATUS_SUCCESS"


def frames(stdout: str) -> list[list[str]]:
    """`ether top`'s plain tables: blocks of lines with a blank line between them."""
    return [block.splitlines() for block in stdout.strip("\n").split("\n\n")]


def seconds(cell: str) -> float:
    """750us, 3.2ms, 41ms, 1.25s back to seconds."""
    number, unit = re.fullmatch(r"([0-9.]+)(us|ms|s)", cell).groups()  # type: ignore[union-attr]
    return float(number) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[unit]


class BusyAgent:
    """A thread running echo tasks on an agent, one after another, until stopped."""

    def __init__(self, host: HostProcess, agent: str) -> None:
        self._stop = threading.Event()
        self._failures: list[BaseException] = []
        self._thread = threading.Thread(target=self._drive, args=(host, agent), daemon=True)

    def _drive(self, host: HostProcess, agent: str) -> None:
        try:
            while not self._stop.is_set():
                run_task(host, agent, "echo", {"n": 1})
        except BaseException as error:  # reported by the test, not lost in the thread
            self._failures.append(error)

    def __enter__(self) -> BusyAgent:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=120)
        assert not self._failures, self._failures


def screen_rows(drawn: bytes) -> dict[str, list[str]]:
    """The rich view's rows as a terminal shows them after ``drawn``: cells by agent name."""
    screen = pyte.Screen(160, 40)
    pyte.ByteStream(screen).feed(drawn)
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in screen.display]
    return {cells[0]: cells for cells in rows if cells and cells[0]}


def test_live_view_fills_the_task_columns_from_its_second_refresh(
    metrics_host: HostProcess,
) -> None:
    """`ether top` in a real terminal (a pty), as a user runs it, while 'busy' runs tasks:
    the first frame shows "-" in busy's task columns and says they come at the next refresh;
    a later frame shows its tasks/s above 0 and its p50 and p99; Ctrl-C ends it with 0."""
    host = metrics_host
    ours, its = pty.openpty()
    fcntl.ioctl(its, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    with BusyAgent(host, "busy"):
        top = subprocess.Popen(
            [str(ETHER), "top", "--interval", "0.5", "--address", host.address],
            stdin=its,
            stdout=its,
            stderr=its,
            cwd=ROOT,
            env=os.environ | {"ETHER_TOKEN": VIEWER, "TERM": "xterm"},
            start_new_session=True,
        )
        os.close(its)
        drawn = b""
        try:
            deadline = time.monotonic() + 60
            while b"the tasks that ended in the last" not in drawn:
                left = deadline - time.monotonic()
                assert left > 0 and top.poll() is None, drawn[-2000:]
                if select.select([ours], [], [], left)[0]:
                    drawn += os.read(ours, 65536)
            os.kill(top.pid, signal.SIGINT)
            assert top.wait(timeout=30) == 0
        finally:
            if top.poll() is None:
                top.kill()
                top.wait()
            os.close(ours)
    first = drawn.index(b"from the next refresh on")
    assert first < drawn.index(b"the tasks that ended in the last")
    at_first = screen_rows(drawn[: first + len(b"from the next refresh on")])
    assert at_first["busy"][6:9] == ["-", "-", "-"], at_first
    later = screen_rows(drawn)
    busy = later["busy"]
    assert float(busy[6]) > 0, later
    assert 0 < seconds(busy[7]) <= seconds(busy[8]), later
    assert later["quiet"][6:9] == ["0", "-", "-"], later


def test_top_shows_tasks_per_second_and_percentiles_of_the_agent_that_ran(
    metrics_host: HostProcess,
) -> None:
    """`ether top --iterations 2`, with a token that may only read, while a thread runs echo
    tasks on 'busy' until top exits: both tables (each over the interval before it) show busy
    with tasks/s above 0 and p50 <= p99; 'past', whose 3 tasks all ended before top started,
    and 'quiet', which never ran one, show 0 tasks/s and "-" percentiles (the figures are the
    interval's, not the host's lifetime); the line under each table names the interval."""
    host = metrics_host
    run_task(host, "busy", "echo", {"n": 0})  # busy has ended a task before top starts
    for n in range(3):
        run_task(host, "past", "echo", {"n": n})
    with BusyAgent(host, "busy"):
        result = ether(host, "top", "--iterations", "2", "--interval", "1")
    assert result.returncode == 0, result.stderr
    tables = frames(result.stdout)
    assert len(tables) == 2, result.stdout
    for table in tables:
        assert table[1].split()[7:11] == ["TASKS/S", "P50", "P99", "NEW"], table
        rows = {line.split()[0]: line.split() for line in table[2:-1]}
        assert set(rows) == {"busy", "past", "quiet", "napper"}, table
        busy = rows["busy"]
        assert float(busy[TASKS_PER_S]) > 0, table
        assert 0 < seconds(busy[P50]) <= seconds(busy[P99]), table
        assert rows["past"][TASKS_PER_S : P99 + 1] == ["0", "-", "-"], table
        assert rows["quiet"][TASKS_PER_S : P99 + 1] == ["0", "-", "-"], table
        assert re.fullmatch(
            r"TASKS/S, P50, P99: the tasks that ended in the last [0-9.]+s", table[-1]
        ), table


def test_status_counts_tasks_since_start_with_their_percentiles(
    metrics_host: HostProcess,
) -> None:
    """One nap of 3 s on 'napper', then `ether status -o json` (its /metrics named with
    --metrics-url): napper has 1 task ended whose p50 and p99 are Prometheus's interpolation
    in the (2.5 s, 10 s] bucket, 6.25 s and 9.925 s; quiet has 0 and null percentiles; the
    table shows the same."""
    host = metrics_host
    run_task(host, "napper", "nap", {"ms": 3000})
    url = f"{host.http_address}/metrics"
    result = ether(host, "status", "-o", "json", "--metrics-url", url)
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["metrics_unavailable"] is None
    agents = {agent["name"]: agent for agent in status["agents"]}
    napper, quiet = agents["napper"], agents["quiet"]
    assert napper["tasks_ended"] == 1
    assert napper["p50_seconds"] == pytest.approx(6.25)
    assert napper["p99_seconds"] == pytest.approx(9.925)
    assert (quiet["tasks_ended"], quiet["p50_seconds"], quiet["p99_seconds"]) == (0, None, None)

    table = ether(host, "status")  # the listener found through GetHostInfo
    assert table.returncode == 0, table.stderr
    rows = {line.split()[0]: line.split() for line in table.stdout.splitlines() if line.strip()}
    assert rows["napper"][6:8] == ["1", "6.25s"], table.stdout
    assert rows["quiet"][6:9] == ["0", "-", "-"], table.stdout


def test_metrics_off_leaves_the_task_columns_empty_and_says_why(
    tmp_path: Path, metrics_host: HostProcess
) -> None:
    """A host with an HTTP listener but metrics off (its /metrics answers 404): top and status
    still show the agents, exit 0, with "-" in the task columns and a line naming the 404 and
    the setting that turns metrics on; top's table comes without waiting for an interval.
    Pointed (--metrics-url) at a host with auth on, without a token: the 401, said so."""
    host = HostProcess(tmp_path / "state", http=True)
    try:
        host.wait_serving()
        deploy(host, AGENTS / "worker", name="plain")
        # No interval to wait for without metrics: the table comes at once, not in an hour.
        top = ether(host, "top", "--once", "--interval", "3600", token="")
        assert top.returncode == 0, top.stderr
        lines = top.stdout.splitlines()
        row = next(line.split() for line in lines if line.startswith("plain "))
        assert row[:3] == ["plain", "RUNNING", "1/1"]
        assert row[TASKS_PER_S : P99 + 1] == ["-", "-", "-"]
        assert "answered 404: the host's metrics are off ([telemetry] metrics = true)" in lines[-1]

        status = ether(host, "status", "-o", "json", token="")
        assert status.returncode == 0, status.stderr
        summary = json.loads(status.stdout)
        assert "answered 404" in summary["metrics_unavailable"]
        assert summary["agents"][0]["tasks_ended"] is None

        elsewhere = f"{metrics_host.http_address}/metrics"
        refused = ether(host, "status", "--metrics-url", elsewhere, token="")
        assert refused.returncode == 0, refused.stderr
        assert refused.stdout.splitlines()[-1] == (
            f"TASKS, P50, P99: - ({elsewhere} answered 401: it needs a token with agent.read)"
        )
    finally:
        assert host.stop() == 0


def test_status_reads_metrics_over_tls_with_the_token(tmp_path: Path) -> None:
    """A host serving TLS (so its HTTP listener is https) with auth on: `ether status
    --tls-ca --token` reads /metrics over https, trusting the CA its gRPC calls trust and
    sending their token."""
    authority = Authority(tmp_path, "ether")
    server = authority.issue("server", "ether host", server=True)
    tokens = tmp_path / "tokens"
    tokens.write_text(f"viewer {VIEWER} agent.read\n")
    tokens.chmod(0o600)
    host = Host(
        "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
        "--state-dir", str(tmp_path / "state"), "--log-format", "json",
        "--auth-tokens-file", str(tokens),
        "--tls-cert", str(server.cert), "--tls-key", str(server.key),
        env={"ETHER_TELEMETRY_METRICS": "true"},
    )  # fmt: skip
    try:
        record = host.wait_for_log(lambda r: r.get("event") == "serving", 60)
        host.address = record["addresses"][0]
        assert record["http"].startswith("https://")
        result = ether(host, "status", "-o", "json", "--tls-ca", str(authority.pem))
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["metrics_unavailable"] is None
    finally:
        assert host.stop() == 0


def test_quantiles_interpolate_as_prometheus_does() -> None:
    """histogram_quantile's rules: linear within the bucket holding the rank, the first bucket
    starting at 0, the +Inf bucket giving the largest finite bound, nothing for no tasks."""
    inf = math.inf
    # 10 tasks: 4 at most 0.1 s, 6 more at most 0.5 s.
    buckets = ((0.1, 4.0), (0.5, 10.0), (1.0, 10.0), (inf, 10.0))
    assert histogram_quantile(0.2, buckets) == pytest.approx(0.05)  # rank 2 of 4 in [0, 0.1]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.1 + 0.4 * (1 / 6))
    assert histogram_quantile(0.99, buckets) == pytest.approx(0.1 + 0.4 * (5.9 / 6))
    assert histogram_quantile(0.99, ((0.1, 0.0), (1.0, 1.0), (inf, 3.0))) == 1.0
    assert histogram_quantile(0.5, ((0.1, 0.0), (inf, 0.0))) is None


def test_the_metrics_url_is_the_http_listener_the_host_names() -> None:
    """GetHostInfo's http(s) listener plus /metrics; one on every address is reached on the host
    the command dials (loopback for a Unix socket); none without an HTTP listener."""
    assert metrics_url(["127.0.0.1:50051", "https://10.0.0.5:8443"], "10.0.0.5:50051") == (
        "https://10.0.0.5:8443/metrics"
    )
    assert metrics_url(["0.0.0.0:50051", "http://0.0.0.0:8080"], "box.example:50051") == (
        "http://box.example:8080/metrics"
    )
    assert metrics_url(["[::]:50051", "http://[::]:8080"], "[::1]:50051") == (
        "http://[::1]:8080/metrics"
    )
    assert metrics_url(["unix:/run/ether.sock", "http://0.0.0.0:8080"], "unix:/run/ether.sock") == (
        "http://127.0.0.1:8080/metrics"
    )
    assert metrics_url(["127.0.0.1:50051"], "127.0.0.1:50051") is None
