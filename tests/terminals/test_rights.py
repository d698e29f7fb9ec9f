"""With bearer tokens, terminals belong to their creator and each operation checks its own right."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from ether.v1 import terminal_pb2 as pb
from tests.support.host import HostProcess
from tests.terminals.conftest import CONFIG, start_host

TOKENS = {
    "admin": "admin-token-0123456789",
    "alice": "alice-token-0123456789",
    "bob": "bob-token-01234567890",
    "viewer": "viewer-token-012345678",
    "scribe": "scribe-token-012345678",
}
ALL = "terminal.create,terminal.read,terminal.write,terminal.attach,terminal.close,terminal.resize,terminal.signal"


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    folder = tmp_path_factory.mktemp("terminals-rights")
    tokens = folder / "tokens"
    tokens.write_text(
        f"admin {TOKENS['admin']}\n"
        f"alice {TOKENS['alice']} {ALL}\n"
        f"bob {TOKENS['bob']} {ALL}\n"
        f"viewer {TOKENS['viewer']} terminal.create,terminal.read,terminal.attach,terminal.close\n"
        f"scribe {TOKENS['scribe']} terminal.create,terminal.write\n"
    )
    process = start_host(folder / "state", CONFIG, "--auth-tokens-file", str(tokens))
    try:
        yield process
    finally:
        process.stop()


def as_(who: str) -> dict[str, Any]:
    return {"metadata": (("authorization", f"Bearer {TOKENS[who]}"),), "timeout": 30}


def create(host: HostProcess, who: str, **fields: Any) -> pb.Terminal:
    request = pb.CreateTerminalRequest(argv=pb.Argv(args=["sleep", "600"]), cwd="/tmp", **fields)
    return host.terminals.CreateTerminal(request, **as_(who)).terminal


def status(call: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as error:
        call()
    return error.value.code()  # type: ignore[no-any-return]


def test_another_identity_cannot_see_a_terminal_at_all(host: HostProcess) -> None:
    """Bob gets NOT_FOUND for Alice's terminal (ids do not leak), and his list does not show it."""
    mine = create(host, "alice")
    assert mine.owner == "alice"
    stub = host.terminals
    for call in (
        lambda: stub.GetTerminal(pb.GetTerminalRequest(terminal_id=mine.id), **as_("bob")),
        lambda: stub.ReadScreen(pb.ReadScreenRequest(terminal_id=mine.id), **as_("bob")),
        lambda: stub.WriteInput(
            pb.WriteInputRequest(terminal_id=mine.id, input=pb.TerminalInput(text="x")),
            **as_("bob"),
        ),
        lambda: stub.CloseTerminal(pb.CloseTerminalRequest(terminal_id=mine.id), **as_("bob")),
    ):
        assert status(call) == grpc.StatusCode.NOT_FOUND
    assert mine.id not in [
        t.id for t in stub.ListTerminals(pb.ListTerminalsRequest(), **as_("bob")).terminals
    ]
    assert status(
        lambda: stub.ListTerminals(pb.ListTerminalsRequest(owner="alice"), **as_("bob"))
    ) == (grpc.StatusCode.PERMISSION_DENIED)
    everyone = stub.ListTerminals(pb.ListTerminalsRequest(owner="*"), **as_("admin")).terminals
    assert mine.id in [t.id for t in everyone]
    stub.CloseTerminal(pb.CloseTerminalRequest(terminal_id=mine.id), **as_("alice"))


def test_each_operation_checks_its_own_right(host: HostProcess) -> None:
    """A viewer may create, read and close, but writing, resizing and signalling are refused."""
    terminal = create(host, "viewer")
    stub = host.terminals
    assert (
        stub.ReadScreen(pb.ReadScreenRequest(terminal_id=terminal.id), **as_("viewer")).screen.rows
        == 24
    )
    for call in (
        lambda: stub.WriteInput(
            pb.WriteInputRequest(terminal_id=terminal.id, input=pb.TerminalInput(text="x")),
            **as_("viewer"),
        ),
        lambda: stub.Resize(pb.ResizeRequest(terminal_id=terminal.id, rows=10), **as_("viewer")),
        lambda: stub.SendSignal(
            pb.SendSignalRequest(terminal_id=terminal.id, signal="INT"), **as_("viewer")
        ),
    ):
        assert status(call) == grpc.StatusCode.PERMISSION_DENIED
    stub.CloseTerminal(pb.CloseTerminalRequest(terminal_id=terminal.id), **as_("viewer"))


def test_reading_attaching_and_closing_need_their_own_rights(host: HostProcess) -> None:
    """A caller that may create and write, but not read, attach or close, is refused those with
    PERMISSION_DENIED, even on its own terminal."""
    terminal = create(host, "scribe")
    stub = host.terminals
    written = stub.WriteInput(
        pb.WriteInputRequest(terminal_id=terminal.id, input=pb.TerminalInput(text="x")),
        **as_("scribe"),
    )
    assert written.bytes_queued == 1
    start = pb.AttachRequest(start=pb.AttachStart(terminal_id=terminal.id, read_only=True))
    for call in (
        lambda: stub.ReadScreen(pb.ReadScreenRequest(terminal_id=terminal.id), **as_("scribe")),
        lambda: next(stub.Attach(iter([start]), **as_("scribe"))),
        lambda: stub.CloseTerminal(
            pb.CloseTerminalRequest(terminal_id=terminal.id), **as_("scribe")
        ),
    ):
        assert status(call) == grpc.StatusCode.PERMISSION_DENIED
    stub.CloseTerminal(pb.CloseTerminalRequest(terminal_id=terminal.id), **as_("admin"))


def test_attach_without_the_write_right_is_read_only(host: HostProcess) -> None:
    """Asking for a read-write attach without the write right still gives a read-only one."""
    terminal = create(host, "viewer")
    start = pb.AttachRequest(start=pb.AttachStart(terminal_id=terminal.id, read_only=False))
    stream = host.terminals.Attach(iter([start]), **as_("viewer"))
    assert next(stream).started.read_only
    stream.cancel()
    host.terminals.CloseTerminal(pb.CloseTerminalRequest(terminal_id=terminal.id), **as_("viewer"))


def test_only_the_admin_creates_terminals_for_another_owner(host: HostProcess) -> None:
    """owner= another identity needs the admin right; the admin's terminal then belongs to that owner."""
    assert status(lambda: create(host, "alice", owner="bob")) == grpc.StatusCode.PERMISSION_DENIED
    theirs = create(host, "admin", owner="bob")
    assert theirs.owner == "bob"
    mine = host.terminals.ListTerminals(pb.ListTerminalsRequest(), **as_("bob")).terminals
    assert theirs.id in [t.id for t in mine]
    host.terminals.CloseTerminal(pb.CloseTerminalRequest(terminal_id=theirs.id), **as_("bob"))
