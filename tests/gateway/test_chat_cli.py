"""`ether chat`: a session from the terminal, one line of stdin per message."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support.agents import AGENTS, deploy
from tests.support.host import ETHER, HostProcess


@pytest.fixture(scope="module")
def chatter(host: HostProcess) -> str:
    return deploy(host, AGENTS / "chatter")


def chat(host: HostProcess, stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ETHER), "chat", "--address", host.address, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_chat_prints_replies_and_events(host: HostProcess, chatter: str) -> None:
    done = chat(
        host, "hello\n\nremember color blue\nemit milestone_report\nchunks 2\n", "--agent", chatter
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("# session ses-") and lines[0].endswith(f"with {chatter}")
    assert lines[1:-1] == [
        f"{chatter}: {chatter} heard: hello",
        f"  [context v2 by agent:{chatter}: color]",
        f"{chatter}: remembered color at version 2",
        f'  [milestone_report from {chatter}] {{"turn": 3}}',
        f"{chatter}: emitted milestone_report",
        f"{chatter}: c0 c1 done",
    ]
    session_id = lines[0].split()[2]
    assert lines[-1] == f"# resume with: ether chat --session {session_id}"
    resumed = chat(host, "again\n", "--session", session_id, "--json", "--close")
    assert resumed.returncode == 0, resumed.stderr
    events = [json.loads(line) for line in resumed.stdout.splitlines()]
    assert events[0]["turn"] == 5 and "accepted" in events[0]
    assert [e["reply"]["text"] for e in events if "reply" in e] == [f"{chatter} heard: again"]


def test_chat_reports_errors(host: HostProcess, chatter: str) -> None:
    """Exit statuses as every client command has them: 1 for a failed call, 2 for a --context
    that is not a JSON object, 4 for a host that cannot be reached."""
    done = chat(host, "", "--agent", "nobody")
    assert done.returncode == 1
    assert done.stderr.startswith("ether chat: NOT_FOUND: no agent named 'nobody'")
    bad = chat(host, "", "--agent", chatter, "--context", "[1, 2]")
    assert bad.returncode == 2 and bad.stderr.startswith("ether chat: --context"), bad.stderr
    unreachable = chat(host, "", "--agent", chatter, "--address", "127.0.0.1:1")
    assert unreachable.returncode == 4 and "UNAVAILABLE" in unreachable.stderr
