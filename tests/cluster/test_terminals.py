"""Terminals across hosts (docs/cluster.md, "Terminals across hosts"): a terminal stays on the
host that owns its PTY and its id names that host; every call on it made on another host is
forwarded there over gRPC (WriteInput, ReadScreen, WaitFor, GetTerminal, Resize, Attach both
ways), or, on a host with forwarding off, refused with the owner's name and address in the
error's details. ListTerminals with cluster=true lists every host's terminals with their host.

Real redis-server, real hosts on loopback: a and b forward, c does not. The tests that stop a
host run last."""

from __future__ import annotations

import queue
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from ether.v1 import agent_io_pb2
from ether.v1 import terminal_pb2 as pb
from tests.cluster.support import cluster_env, cluster_host
from tests.support.agents import deploy
from tests.support.calls import execute
from tests.support.certs import Authority
from tests.support.host import ETHER, HostProcess
from tests.support.redis import RedisServer, redis_server
from tests.terminals.support import (
    close,
    error_details,
    processes_of,
    screen,
    shell,
    wait_output,
    wait_screen,
    write,
)

__all__ = ["redis_server"]  # the module's Redis fixture

TERMUSER = Path(__file__).parents[1] / "terminals" / "agents" / "termuser"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cluster-terminals")


@pytest.fixture(scope="module")
def host_a(folder: Path, redis_server: RedisServer) -> Iterator[HostProcess]:
    host = cluster_host(folder, redis_server.url, "a")
    try:
        yield host
    finally:
        host.stop()


@pytest.fixture(scope="module")
def host_b(folder: Path, redis_server: RedisServer, host_a: HostProcess) -> Iterator[HostProcess]:
    host = cluster_host(folder, redis_server.url, "b")
    try:
        yield host
    finally:
        host.stop()


def started(host: HostProcess) -> HostProcess:
    try:
        host.wait_serving()
    except BaseException:
        host.stop()
        raise
    return host


@pytest.fixture(scope="module")
def host_c(folder: Path, redis_server: RedisServer, host_a: HostProcess) -> Iterator[HostProcess]:
    """A host that does not forward terminal calls."""
    env = cluster_env(redis_server.url, "c") | {"ETHER_CLUSTER_FORWARD_TERMINALS": "false"}
    host = started(HostProcess(folder / "c", env=env))
    try:
        yield host
    finally:
        host.stop()


@pytest.fixture
def on_a(host_a: HostProcess) -> Iterator[pb.Terminal]:
    """A bash terminal on host a, its prompt on the screen."""
    terminal = shell(host_a)
    yield terminal
    close(host_a, terminal.id)


def get(host: HostProcess, terminal_id: str) -> pb.Terminal:
    request = pb.GetTerminalRequest(terminal_id=terminal_id)
    return host.terminals.GetTerminal(request, timeout=30).terminal


def failure(call: object) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as raised:
        call()  # type: ignore[operator]
    return raised.value


def test_a_terminal_id_names_its_host(host_a: HostProcess, on_a: pb.Terminal) -> None:
    """In a cluster the id ends in @<host> and Terminal.host says it."""
    assert on_a.id.startswith("term-") and on_a.id.endswith("@a")
    assert on_a.host == "a"


def test_input_typed_through_b_reaches_the_terminal_on_a(
    host_a: HostProcess, host_b: HostProcess, on_a: pb.Terminal
) -> None:
    """WriteInput on b types into a's bash; WaitFor and ReadScreen on b see its answer, which
    is on a's own screen too; GetTerminal on b describes a's terminal (its pid on a)."""
    accepted = write(host_b, on_a.id, "echo typed-through-$((40 + 2))\r")
    assert accepted.bytes_queued > 0
    waited = wait_output(host_b, on_a.id, r"typed-through-(\d+)", after=0)
    assert waited.groups == ["42"]
    waited = wait_screen(host_b, on_a.id, r"(?m)^typed-through-42$")
    assert "typed-through-42" in waited.screen.lines
    assert "typed-through-42" in screen(host_b, on_a.id).lines
    assert "typed-through-42" in screen(host_a, on_a.id).lines  # the same PTY
    seen = get(host_b, on_a.id)
    assert seen.host == "a" and seen.pid == on_a.pid and seen.output_offset > 0


def test_a_recording_started_and_downloaded_through_b(
    host_b: HostProcess, on_a: pb.Terminal
) -> None:
    """SetRecording and GetRecording on b act on a's terminal: the cast b returns is the one a
    writes, with what was typed through b."""
    started = host_b.terminals.SetRecording(
        pb.SetRecordingRequest(terminal_id=on_a.id, record=True), timeout=30
    ).recording
    assert started.active
    write(host_b, on_a.id, "echo recorded-on-$((2 * 21))\r")
    wait_output(host_b, on_a.id, r"recorded-on-42", after=0)
    answer = host_b.terminals.GetRecording(pb.GetRecordingRequest(terminal_id=on_a.id), timeout=30)
    header, *events = answer.data.decode().splitlines()
    assert '"version":2' in header
    assert "recorded-on-42" in "".join(events)
    assert answer.recording.active and answer.recording.size == len(answer.data)


def test_resize_signal_and_close_through_b(host_a: HostProcess, host_b: HostProcess) -> None:
    """Resize, SendSignal and CloseTerminal on b act on a's terminal."""
    terminal = shell(host_a)
    resized = host_b.terminals.Resize(
        pb.ResizeRequest(terminal_id=terminal.id, rows=20, cols=70), timeout=30
    )
    assert (resized.rows, resized.cols) == (20, 70)
    assert (get(host_a, terminal.id).rows, get(host_a, terminal.id).cols) == (20, 70)
    # The foreground job says it runs (its own output, not the typed line's echo): a SIGINT sent
    # while bash has the line but has not started the job yet reaches bash, and the sleep that
    # then starts would never end.
    write(host_b, terminal.id, "sh -c 'echo sleeping; exec sleep 600'\r")
    wait_output(host_b, terminal.id, "^sleeping", after=0)
    before = get(host_a, terminal.id).output_offset
    sent = host_b.terminals.SendSignal(
        pb.SendSignalRequest(terminal_id=terminal.id, signal="INT", foreground=True), timeout=30
    )
    assert sent.signal == 2
    wait_output(host_a, terminal.id, r"ether\$ ", after=before)  # the sleep ended on a
    closed = host_b.terminals.CloseTerminal(
        pb.CloseTerminalRequest(terminal_id=terminal.id), timeout=30
    ).terminal
    assert closed.state == pb.TERMINAL_STATE_CLOSED and closed.host == "a"
    error = failure(lambda: get(host_b, terminal.id))  # a's own NOT_FOUND, through b
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert error_details(error)["ErrorInfo"].reason == "TERMINAL_NOT_FOUND"


def test_a_forwarded_call_is_not_forwarded_again(host_b: HostProcess, on_a: pb.Terminal) -> None:
    """A call that says another host forwarded it, for a terminal this host does not own, is
    refused (the hosts disagree on where it lives) instead of going round."""
    request = pb.ReadScreenRequest(terminal_id=on_a.id)
    forwarded = (("ether-forwarded-from", "c"),)
    error = failure(lambda: host_b.terminals.ReadScreen(request, metadata=forwarded, timeout=30))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_details(error)["ErrorInfo"].reason == "TERMINAL_ON_OTHER_HOST"
    assert "not forwarded again" in (error.details() or "")


def test_a_wait_through_b_that_times_out_carries_the_screen(
    host_b: HostProcess, on_a: pb.Terminal
) -> None:
    """The owner's error comes back as it is: DEADLINE_EXCEEDED with its WaitForFailure; the
    caller's deadline reaches the owner."""
    request = pb.WaitForRequest(
        terminal_id=on_a.id,
        screen=pb.ScreenCondition(regex="never-printed"),
        timeout={"nanos": 300_000_000},
    )
    error = failure(lambda: host_b.terminals.WaitFor(request, timeout=30))
    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    details = error_details(error)
    assert details["ErrorInfo"].reason == "WAIT_TIMEOUT"
    assert any("ether$" in line for line in details["WaitForFailure"].screen.lines)
    # No timeout in the request, only the call's deadline: a sees it (else it would wait its
    # default 30 s and b's caller would get a bare DEADLINE_EXCEEDED without the screen).
    request.ClearField("timeout")
    error = failure(lambda: host_b.terminals.WaitFor(request, timeout=2))
    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    details = error_details(error)
    assert details["ErrorInfo"].reason == "WAIT_TIMEOUT" and "WaitForFailure" in details


class Attached:
    """An Attach stream on ``host`` whose request side stays open until ``detach``."""

    def __init__(self, host: HostProcess, terminal_id: str) -> None:
        self._requests: queue.Queue[pb.AttachRequest | None] = queue.Queue()
        self._requests.put(pb.AttachRequest(start=pb.AttachStart(terminal_id=terminal_id)))
        self.responses = host.terminals.Attach(self._iterate(), timeout=120)

    def _iterate(self) -> Iterator[pb.AttachRequest]:
        while (item := self._requests.get()) is not None:
            yield item

    def send(self, **kind: object) -> None:
        self._requests.put(pb.AttachRequest(**kind))  # type: ignore[arg-type]

    def output_until(self, needle: bytes) -> bytes:
        """Output until ``needle`` shows (the stream's own pace: no clock)."""
        data = b""
        for message in self.responses:
            if message.WhichOneof("kind") == "output":
                data += message.output.data
                if needle in data:
                    return data
        raise AssertionError(f"the stream ended before {needle!r}; got {data!r}")

    def detach(self) -> None:
        self._requests.put(None)
        self.responses.cancel()


def test_attach_through_b_shows_output_types_resizes_and_detaches(
    host_a: HostProcess, host_b: HostProcess, on_a: pb.Terminal
) -> None:
    """Attach on b: started (a's terminal) and a snapshot, output typed through the stream,
    a resize that a's terminal applies; detaching on b detaches on a."""
    client = Attached(host_b, on_a.id)
    first = next(client.responses)
    assert first.WhichOneof("kind") == "started"
    assert first.started.terminal.host == "a" and first.started.terminal.attached_clients == 1
    snapshot = next(client.responses)
    assert snapshot.WhichOneof("kind") == "snapshot"
    assert snapshot.snapshot.screen.lines[0].rstrip() == "ether$"
    client.send(input=pb.TerminalInput(text="echo attached-via-$((6 * 7))\r"))
    assert b"attached-via-42\r\n" in client.output_until(b"attached-via-42\r\n")
    client.send(resize=pb.AttachResize(rows=30, cols=100))
    client.send(input=pb.TerminalInput(text="stty size\r"))
    client.output_until(b"30 100\r\n")  # the program on a sees the size sent through b
    assert (get(host_a, on_a.id).rows, get(host_a, on_a.id).cols) == (30, 100)
    client.detach()
    # a's side ends once b's call is cancelled, a moment later: polled, with a budget.
    deadline = time.monotonic() + 60
    while get(host_a, on_a.id).attached_clients:
        assert time.monotonic() < deadline, "a still counts the client attached through b"
        time.sleep(0.05)


def test_list_terminals_with_cluster_lists_every_host(
    host_a: HostProcess, host_b: HostProcess, on_a: pb.Terminal
) -> None:
    """ListTerminals on b lists b's own terminals; with cluster=true a's too, each with its
    host, and every host answered, in pages; `ether term ls --cluster` shows them by host."""
    mine = shell(host_b)
    try:
        local = host_b.terminals.ListTerminals(pb.ListTerminalsRequest(), timeout=30)
        assert [t.id for t in local.terminals] == [mine.id]
        request = pb.ListTerminalsRequest(cluster=True)
        listed = host_b.terminals.ListTerminals(request, timeout=30)
        hosts = {t.id: t.host for t in listed.terminals}
        assert hosts == {on_a.id: "a", mine.id: "b"}
        assert not listed.unreachable_hosts
        paged = host_b.terminals.ListTerminals(
            pb.ListTerminalsRequest(cluster=True, page_size=1), timeout=30
        )
        assert len(paged.terminals) == 1 and paged.next_page_token
        rest = host_b.terminals.ListTerminals(
            pb.ListTerminalsRequest(cluster=True, page_size=1, page_token=paged.next_page_token),
            timeout=30,
        )
        assert {paged.terminals[0].id, rest.terminals[0].id} == {on_a.id, mine.id}
        ran = subprocess.run(
            [str(ETHER), "term", "ls", "--cluster", "--address", host_b.address],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert ran.returncode == 0, ran.stderr
        header, *rows = ran.stdout.splitlines()
        assert header.split()[:2] == ["HOST", "ID"]
        assert {row.split()[1]: row.split()[0] for row in rows} == {on_a.id: "a", mine.id: "b"}
    finally:
        close(host_b, mine.id)


def test_a_host_that_does_not_forward_names_the_owner(
    host_a: HostProcess, host_c: HostProcess, on_a: pb.Terminal
) -> None:
    """forward_terminals = false: FAILED_PRECONDITION, the owner's host and address in
    ErrorInfo.metadata, and the message says where to call."""
    request = pb.ReadScreenRequest(terminal_id=on_a.id)
    error = failure(lambda: host_c.terminals.ReadScreen(request, timeout=30))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    info = error_details(error)["ErrorInfo"]
    assert info.reason == "TERMINAL_ON_OTHER_HOST"
    assert dict(info.metadata) == {"host": "a", "address": host_a.address}
    assert f"make the call at {host_a.address}" in (error.details() or "")


def test_an_agents_term_call_on_another_hosts_terminal_names_the_owner(
    host_a: HostProcess, host_b: HostProcess, on_a: pb.Terminal
) -> None:
    """term.read from an agent on b with a's terminal id: an error naming a and its address
    (an agent's calls are not forwarded)."""
    deploy(host_b, TERMUSER)
    output = execute(host_b, "termuser", "peek", {"terminal_id": on_a.id}, timeout=60)
    assert output.status == agent_io_pb2.TASK_STATUS_ERROR
    assert output.error.code == "not_ready"  # FAILED_PRECONDITION, as agents read it
    assert f"lives on host a at {host_a.address}" in output.error.message
    assert "reach only the terminals of the host it runs on" in output.error.message


def test_an_id_naming_an_unknown_host_is_not_found(host_b: HostProcess) -> None:
    request = pb.ReadScreenRequest(terminal_id="term-0000000000000000@nowhere")
    error = failure(lambda: host_b.terminals.ReadScreen(request, timeout=30))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert "names host 'nowhere', which is not in this cluster" in (error.details() or "")
    assert error_details(error)["ErrorInfo"].reason == "TERMINAL_HOST_NOT_FOUND"


def test_a_host_without_a_cluster_keeps_its_ids(folder: Path) -> None:
    """Without a cluster ids stay term-<16 hex> with no host; an id naming a host is NOT_FOUND
    saying this host is in no cluster."""
    host = started(HostProcess(folder / "single"))
    try:
        terminal = shell(host)
        assert re.fullmatch(r"term-[0-9a-f]{16}", terminal.id) and terminal.host == ""
        request = pb.ReadScreenRequest(terminal_id=terminal.id + "@a")
        error = failure(lambda: host.terminals.ReadScreen(request, timeout=30))
        assert error.code() == grpc.StatusCode.NOT_FOUND
        assert "this host is in no cluster" in (error.details() or "")
        assert error_details(error)["ErrorInfo"].reason == "TERMINAL_HOST_NOT_FOUND"
        close(host, terminal.id)
    finally:
        host.stop()


def tls_host(folder: Path, redis_url: str, name: str, authority: Authority) -> HostProcess:
    """A host serving TLS only, with a certificate of ``authority`` and [cluster] tls_ca set to
    it; its ``channel`` trusts that authority."""
    pair = authority.issue(name, f"ether host {name}", server=True)
    env = cluster_env(redis_url, name) | {
        "ETHER_TLS_CERT": str(pair.cert),
        "ETHER_TLS_KEY": str(pair.key),
        "ETHER_CLUSTER_TLS_CA": str(authority.pem),
    }
    host = HostProcess(folder / name, env=env)
    try:
        record = host.wait_for_log(lambda r: r.get("event") == "serving", 60)
    except BaseException:
        host.stop()
        raise
    host.address = record["addresses"][0]
    # HostProcess dials in plaintext; this host answers TLS only.
    host._channel = grpc.secure_channel(
        host.address, grpc.ssl_channel_credentials(authority.pem.read_bytes())
    )
    return host


def test_hosts_that_serve_tls_forward_over_tls(folder: Path, redis_server: RedisServer) -> None:
    """Hosts g and h serve TLS only (as any host off loopback must): a terminal on g is typed
    into and read through h, which dials g over TLS trusting [cluster] tls_ca."""
    authority = Authority(folder, "cluster")
    hosts: list[HostProcess] = []
    try:
        for name in ("g", "h"):
            hosts.append(tls_host(folder, redis_server.url, name, authority))
        host_g, host_h = hosts
        terminal = shell(host_g)
        host_h.wait_for_log(
            lambda r: r.get("event") == "cluster host joined" and r.get("host") == "g", 60
        )
        write(host_h, terminal.id, "echo over-$((2 * 21))-tls\r")
        assert wait_output(host_h, terminal.id, r"over-42-tls", after=0).match
        assert "over-42-tls" in screen(host_g, terminal.id).lines
        close(host_h, terminal.id)
    finally:
        for host in hosts:
            host.stop()


def test_the_callers_token_is_what_reaches_the_owner(
    folder: Path, redis_server: RedisServer
) -> None:
    """Hosts e and f with auth: f forwards the caller's own token, so a terminal e made for
    `ops` is read through f with ops's token, and a token only f knows is refused by e
    (UNAUTHENTICATED, passed back as e said it): the cluster shares its tokens."""
    shared = "ops  ops-token-0a9b8c7d6e5f4a3b\n"
    (folder / "e.tokens").write_text(shared)
    (folder / "f.tokens").write_text(shared + "bob  bob-token-1b2c3d4e5f6a7b8c\n")
    hosts = []
    try:
        for name in ("e", "f"):
            env = cluster_env(redis_server.url, name)
            env["ETHER_AUTH_TOKENS_FILE"] = str(folder / f"{name}.tokens")
            hosts.append(started(HostProcess(folder / name, env=env)))
        host_e, host_f = hosts
        ops = (("authorization", "Bearer ops-token-0a9b8c7d6e5f4a3b"),)
        bob = (("authorization", "Bearer bob-token-1b2c3d4e5f6a7b8c"),)
        created = host_e.terminals.CreateTerminal(
            pb.CreateTerminalRequest(command_line="echo hello-ops; sleep 600", cwd="/tmp"),
            metadata=ops,
            timeout=30,
        ).terminal
        host_f.wait_for_log(
            lambda r: r.get("event") == "cluster host joined" and r.get("host") == "e", 60
        )
        waited = host_f.terminals.WaitFor(
            pb.WaitForRequest(terminal_id=created.id, screen=pb.ScreenCondition(regex="hello-ops")),
            metadata=ops,
            timeout=60,
        )
        assert waited.match == "hello-ops" and created.owner == "ops"
        request = pb.ReadScreenRequest(terminal_id=created.id)
        error = failure(lambda: host_f.terminals.ReadScreen(request, metadata=bob, timeout=30))
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED
        host_e.wait_for_log(  # e refused it: f let bob in and forwarded his token as given
            lambda r: (
                r.get("method") == "/ether.v1.TerminalService/ReadScreen"
                and r.get("code") == "UNAUTHENTICATED"
            ),
            30,
        )
        error = failure(lambda: host_f.terminals.ReadScreen(request, timeout=30))
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED  # f's own check, first
        host_e.terminals.CloseTerminal(
            pb.CloseTerminalRequest(terminal_id=created.id), metadata=ops, timeout=30
        )
    finally:
        for host in hosts:
            host.stop()


def test_a_killed_owner_is_unavailable_and_unreachable_in_lists(
    folder: Path, redis_server: RedisServer, host_b: HostProcess
) -> None:
    """Host d killed with SIGKILL (its directory entry outlives it: dropout 600 s): a call on
    its terminal through b is UNAVAILABLE naming d, and ListTerminals with cluster=true says d
    did not answer."""
    env = cluster_env(redis_server.url, "d") | {"ETHER_CLUSTER_DROPOUT": "600"}
    host_d = started(HostProcess(folder / "d", env=env))
    try:
        terminal = shell(host_d)
        host_b.wait_for_log(
            lambda r: r.get("event") == "cluster host joined" and r.get("host") == "d", 60
        )
        host_d.process.kill()
        host_d.process.wait(30)
        request = pb.ReadScreenRequest(terminal_id=terminal.id)
        error = failure(lambda: host_b.terminals.ReadScreen(request, timeout=30))
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        assert f"lives on host d ({host_d.address}), which does not answer" in (
            error.details() or ""
        )
        assert error_details(error)["ErrorInfo"].reason == "TERMINAL_HOST_UNAVAILABLE"
        listed = host_b.terminals.ListTerminals(pb.ListTerminalsRequest(cluster=True), timeout=60)
        assert list(listed.unreachable_hosts) == ["d"]
        assert terminal.id not in {t.id for t in listed.terminals}
        deadline = time.monotonic() + 60
        while processes_of(terminal.id):  # its program ended with its host: nothing leaks
            assert time.monotonic() < deadline, processes_of(terminal.id)
            time.sleep(0.05)
    finally:
        host_d.stop()


def test_an_owner_that_left_is_unavailable(host_a: HostProcess, host_b: HostProcess) -> None:
    """a stops (its terminals end with it, its entry leaves the directory at once): a call on
    its terminal through b is UNAVAILABLE saying a left the cluster. It stops a."""
    terminal = shell(host_a)
    host_a.stop()
    host_b.wait_for_log(
        lambda r: r.get("event") == "cluster host left" and r.get("host") == "a", 60
    )
    request = pb.WriteInputRequest(terminal_id=terminal.id, input=pb.TerminalInput(text="x"))
    error = failure(lambda: host_b.terminals.WriteInput(request, timeout=30))
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert "lives on host a" in (error.details() or "")
    assert "left the cluster" in (error.details() or "")
    info = error_details(error)["ErrorInfo"]
    assert info.reason == "TERMINAL_HOST_UNAVAILABLE" and info.metadata["host"] == "a"


def test_without_redis_an_unknown_host_is_unavailable_not_missing(
    redis_server: RedisServer, host_b: HostProcess
) -> None:
    """Redis stopped under b: b cannot tell whether a host it never saw exists, so it says so
    (UNAVAILABLE naming Redis) rather than NOT_FOUND. Runs last: it stops the module's Redis."""
    redis_server.stop()
    host_b.wait_for_log(lambda r: r.get("event", "").startswith("cluster degraded"), 60)
    request = pb.ReadScreenRequest(terminal_id="term-0000000000000000@zzz")
    error = failure(lambda: host_b.terminals.ReadScreen(request, timeout=30))
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert "cannot look it up in the cluster directory (Redis at" in (error.details() or "")
    assert error_details(error)["ErrorInfo"].reason == "TERMINAL_HOST_UNAVAILABLE"
