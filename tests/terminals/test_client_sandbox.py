"""Clients' terminals in a sandbox (``[terminals] sandbox = true``): each starts in a scratch
directory of its own and sees the system directories and the paths the config names, nothing
else of the host; a ``cwd`` the sandbox does not show is refused before anything is made."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from tests.support.host import HostProcess
from tests.terminals.conftest import CONFIG, start_host
from tests.terminals.support import close, create, error_details, screen, wait_exit


def _lines(host: HostProcess, terminal_id: str) -> list[str]:
    return [line for line in screen(host, terminal_id).lines if line.strip()]


def test_a_client_terminal_sees_its_scratch_and_the_paths_it_is_given(tmp_path: Path) -> None:
    """Without a cwd the terminal starts in its own scratch directory under the state dir and
    reads the configured path, not a folder beside it; with the configured path as cwd it
    starts there; with the hidden folder as cwd the call is INVALID_ARGUMENT (INVALID_CWD) and
    no scratch directory is made for it."""
    shown, hidden = tmp_path / "shown", tmp_path / "hidden"
    shown.mkdir()
    hidden.mkdir()
    (shown / "note.txt").write_text("visible note\n")
    (hidden / "secret.txt").write_text("secret\n")
    config = CONFIG + f'sandbox = true\nsandbox_read_only = ["{shown}"]\n'
    host = start_host(tmp_path / "state", config)
    scratches = (tmp_path / "state").absolute() / "scratch" / "terminals"
    try:
        command = f"pwd; cat {shown}/note.txt; cat {hidden}/secret.txt || echo hidden-refused"
        terminal = create(host, command=command, cwd="", cols=240)
        assert wait_exit(host, terminal.id).exit_status.code == 0
        cwd, note, *rest = _lines(host, terminal.id)
        assert Path(cwd).parent == scratches, (cwd, note, rest)
        assert note == "visible note"
        assert rest[-1] == "hidden-refused" and "secret" not in rest, rest  # not its content
        close(host, terminal.id)

        there = create(host, command="pwd", cwd=str(shown), cols=240)
        assert wait_exit(host, there.id).exit_status.code == 0
        assert _lines(host, there.id) == [str(shown)]
        close(host, there.id)

        made = sorted(scratches.iterdir())
        with pytest.raises(grpc.RpcError) as refused:
            create(host, command="pwd", cwd=str(hidden))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_details(refused.value)["ErrorInfo"].reason == "INVALID_CWD"
        assert "not visible in the terminal's sandbox" in (refused.value.details() or "")
        assert sorted(scratches.iterdir()) == made, "a refused terminal left a scratch directory"
    finally:
        host.stop()
