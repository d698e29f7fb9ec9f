"""The ``[cluster]`` rules docs/cluster.md ("Settings") states, checked on real hosts and a real
redis-server:

- a password in ``redis_url`` never appears in the host's logs or in GetHostInfo: a host joined
  to a Redis that requires a password shows the URL with the password masked;
- ``advertise`` is required when ``listen`` is a wildcard address (0.0.0.0, [::]): the host
  refuses to start, exit 2 ("a bad value of any key") with one line naming the setting;
- ``dropout`` must be longer than ``heartbeat``: refused at start the same way.

tests/support/redis.py's fixture cannot pass extra arguments to redis-server, so the module
starts its own (same way: a free loopback port, no persistence, ready on its log line and a
PING, stopped by its pid) with ``--requirepass``."""

from __future__ import annotations

import json
import secrets
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ether.v1 import supervisor_pb2
from tests.cluster.support import cluster_env, cluster_host
from tests.support.certs import Authority
from tests.support.host import ETHER, HostProcess
from tests.support.redis import READY_LINE, redis_server_or_skip


@dataclass(frozen=True)
class GuardedRedis:
    """A running redis-server on 127.0.0.1 that requires ``password``."""

    port: int
    password: str

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    @property
    def masked(self) -> str:
        """The URL as the host may show it: the password replaced by ``***``."""
        return f"redis://:***@127.0.0.1:{self.port}/0"

    def ask(self, *commands: bytes) -> list[bytes]:
        """One reply line per inline command, sent on one connection."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=20) as connection:
            replies = []
            reader = connection.makefile("rb")
            for command in commands:
                connection.sendall(command + b"\r\n")
                replies.append(reader.readline().rstrip(b"\r\n"))
            return replies


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM by pid and wait for the exit (SIGKILL if it does not come)."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _start_redis(
    program: str, folder: Path, password: str
) -> tuple[subprocess.Popen[bytes], int, list[str]]:
    """A redis-server requiring ``password``, started and ready to accept connections."""
    port = _free_port()
    process = subprocess.Popen(
        [
            program,
            *("--port", str(port), "--bind", "127.0.0.1", "--requirepass", password),
            *("--dir", str(folder), "--save", "", "--appendonly", "no"),
            *("--logfile", "", "--daemonize", "no", "--protected-mode", "yes"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            lines.append(raw.decode("utf-8", errors="replace").rstrip("\n"))
            if READY_LINE in lines[-1]:
                ready.set()
        ready.set()  # it exited: the caller sees that and says why

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(20) or process.poll() is not None:
        _stop(process)
        raise AssertionError(f"redis-server on port {port} not ready:\n" + "\n".join(lines[-20:]))
    return process, port, lines


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GuardedRedis]:
    program = redis_server_or_skip()
    folder = tmp_path_factory.mktemp("redis")
    password = f"pw-{secrets.token_hex(16)}"  # nothing else the host writes can hold it
    for attempt in range(3):  # the free port may be taken between the probe and the bind
        try:
            process, port, _ = _start_redis(program, folder, password)
            break
        except AssertionError as error:
            if attempt == 2 or "Address already in use" not in str(error):
                raise
    try:
        server = GuardedRedis(port, password)
        assert server.ask(f"AUTH {password}".encode(), b"PING") == [b"+OK", b"+PONG"]
        yield server
    finally:
        _stop(process)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cluster-rules")


def refused(host: HostProcess) -> tuple[int, str]:
    """The exit code of a host expected to refuse to start, and the lines it wrote that are not
    JSON log records (its message); a host that starts instead fails the test and is stopped."""
    try:
        code = host.process.wait(60)
    except subprocess.TimeoutExpired:
        pytest.fail("the host did not refuse to start:\n" + "\n".join(host.last_lines()))
    finally:
        host.stop()
    host._reader.join(60)  # every line it wrote is read once stderr closes
    said = []
    for line in host.raw_lines:
        try:
            json.loads(line)
        except ValueError:
            said.append(line)
    return code, "\n".join(said)


# --- a password in redis_url ------------------------------------------------------------------


def test_a_password_in_the_redis_url_shows_in_neither_the_log_nor_host_info(
    folder: Path, redis: GuardedRedis
) -> None:
    # The Redis really requires the password: a host without it could not have joined.
    assert redis.ask(b"PING")[0].startswith(b"-NOAUTH"), redis.ask(b"PING")
    host = cluster_host(folder, redis.url, "guarded")
    try:
        joined = host.wait_for_log(lambda r: r.get("event") == "cluster joined", 60)
        assert joined["redis"] == redis.masked, joined
        info = host.supervisor.GetHostInfo(supervisor_pb2.GetHostInfoRequest(), timeout=30).host
        assert info.HasField("cluster")
        assert (info.cluster.host_name, info.cluster.redis) == ("guarded", redis.masked)
        assert redis.password not in str(info), info
        # `ether status` prints the same cluster line (docs/cluster.md: "... hosts on <url>").
        status = subprocess.run(
            [str(ETHER), "status", "--address", host.address],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert status.returncode == 0, status.stderr
        assert f"guarded of 1 hosts on {redis.masked}" in status.stdout, status.stdout
        assert redis.password not in status.stdout + status.stderr
    finally:
        code = host.stop()
    assert code == 0
    host._reader.join(60)  # the whole log: every line up to the exit, "cluster left" included
    assert host.process.stdout is not None
    output = host.process.stdout.read().decode("utf-8", errors="replace")
    log = "\n".join(host.raw_lines)
    assert any(r.get("event") == "cluster left" for r in host.records), log
    assert redis.password not in log
    assert redis.password not in output
    assert f"127.0.0.1:{redis.port}" in log  # the log does name the Redis, masked


# --- advertise with a wildcard listen ---------------------------------------------------------


def _exposed(folder: Path, listen: str) -> tuple[str, ...]:
    """``ether serve`` arguments to listen on ``listen``: beyond loopback a host needs auth and
    TLS before it gets as far as joining its cluster."""
    folder.mkdir(parents=True, exist_ok=True)
    server = Authority(folder, "cluster").issue("server", "ether host", server=True)
    tokens = folder / "tokens"
    tokens.write_text(f"admin {secrets.token_hex(16)}\n")
    tokens.chmod(0o600)
    return (
        *("--listen", listen, "--auth-tokens-file", str(tokens)),
        *("--tls-cert", str(server.cert), "--tls-key", str(server.key)),
    )


@pytest.mark.parametrize("wildcard", ["0.0.0.0", "[::]"])
def test_a_wildcard_listen_without_advertise_is_refused_naming_advertise(
    folder: Path, redis: GuardedRedis, wildcard: str
) -> None:
    name = "wild4" if wildcard == "0.0.0.0" else "wild6"
    args = _exposed(folder / f"{name}-files", f"{wildcard}:0")
    host = HostProcess(folder / name, *args, env=cluster_env(redis.url, name))
    code, said = refused(host)
    assert code == 2, said
    (line,) = said.splitlines()
    assert line.startswith("ether: cluster_advertise: "), said
    assert f"'{wildcard}:" in line, said  # the listen address that does not say it
    assert redis.password not in "\n".join(host.raw_lines)

    # The same host with advertise set starts and joins: advertise was what it lacked.
    advertised = "127.0.0.1:50051"
    env = cluster_env(redis.url, name) | {"ETHER_CLUSTER_ADVERTISE": advertised}
    host = HostProcess(folder / f"{name}-advertised", *args, env=env)
    try:
        joined = host.wait_for_log(lambda r: r.get("event") == "cluster joined", 60)
        assert (joined["host"], joined["advertise"]) == (name, advertised)
        host.wait_for_log(lambda r: r.get("event") == "serving", 60)
    finally:
        assert host.stop() == 0


# --- dropout longer than heartbeat ------------------------------------------------------------


@pytest.mark.parametrize(("heartbeat", "dropout"), [("2", "2"), ("5", "1")])
def test_a_dropout_not_longer_than_the_heartbeat_is_refused_naming_dropout(
    folder: Path, redis: GuardedRedis, heartbeat: str, dropout: str
) -> None:
    name = f"beat-{heartbeat}-{dropout}"
    env = cluster_env(redis.url, name) | {
        "ETHER_CLUSTER_HEARTBEAT": heartbeat,
        "ETHER_CLUSTER_DROPOUT": dropout,
    }
    host = HostProcess(folder / name, env=env)
    code, said = refused(host)
    assert code == 2, said
    (line,) = said.splitlines()
    assert line.startswith(f"ether: cluster_dropout: {dropout} s must be longer than "), said
    assert f"cluster_heartbeat ({heartbeat} s)" in line, said


@pytest.mark.parametrize(
    "broken", ["redis://:{pw}@127.0.0.1:1/cache", "redis://admin:{pw}@/0", "redis://{pw}@h:x"]
)
def test_a_redis_url_that_does_not_parse_is_refused_without_its_password(
    folder: Path, broken: str
) -> None:
    """A malformed redis_url stops the host with one line naming the key, the URL shown with
    what stands before its host starred: the password never reaches the terminal or a log."""
    password = "sekret-" + "q7w8e9"
    name = "broken-url"
    host = HostProcess(folder / name, env=cluster_env(broken.format(pw=password), name))
    code, said = refused(host)
    assert code == 2, said
    (line,) = said.splitlines()
    assert "cluster_redis_url" in line and ":***@" in line, said
    assert password not in said
