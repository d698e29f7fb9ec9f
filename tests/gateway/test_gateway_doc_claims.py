"""docs/gateway.md, "Host configuration": "`[gateway]` in the host's TOML file (a bad key or value
stops the host at start, exit 2)", with README.md's "A bad key or value exits with code 2 and one
line naming the key and what is allowed". tests/host/test_config.py holds this for top-level keys
only; here for the `[gateway]` table, its `[gateway.egress]` defaults and each agent's own
`[gateway.egress.agents.<name>]` table (until e9d9acf the last was refused only when that agent
fetched, as `policy_error`: the host started with it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.host._support import Host

BAD_TABLES = [
    # (id, TOML text, words the one line must hold)
    (
        "unknown-key",
        "[gateway]\nmax_sesions = 5\n",  # a typo of max_sessions
        ["gateway", "unknown key 'max_sesions'", "allowed keys", "max_sessions", "turn_queue"],
    ),
    (
        "not-a-number",
        '[gateway]\nmax_sessions = "lots"\n',
        ["gateway.max_sessions", "expected a number", "'lots'"],
    ),
    ("zero", "[gateway]\nturn_queue = 0\n", ["gateway.turn_queue", "greater than 0"]),
    ("fraction", "[gateway]\nmailbox_size = 2.5\n", ["gateway.mailbox_size", "whole number"]),
    (
        "unknown-egress-key",
        '[gateway.egress]\nallow_hots = ["example.com"]\n',
        ["[gateway.egress]", "unknown egress key 'allow_hots'", "allowed keys", "allow_hosts"],
    ),
    (
        "unknown-agent-egress-key",
        '[gateway.egress.agents.scout]\nallow_hots = ["example.com"]\n',
        ["[gateway.egress.agents.scout]", "unknown egress key 'allow_hots'", "allow_hosts"],
    ),
    (
        "agent-egress-not-a-table",
        "[gateway.egress.agents]\nscout = 3\n",
        ["[gateway.egress.agents.scout]", "must be a table"],
    ),
    (
        "bad-egress-value",
        '[gateway.egress]\nrate = "fast"\n',
        ["rate", "positive number", "'fast'"],
    ),
]


@pytest.mark.parametrize(
    ("toml", "words"), [b[1:] for b in BAD_TABLES], ids=[b[0] for b in BAD_TABLES]
)
def test_a_bad_gateway_table_stops_the_host_with_one_line(
    tmp_path: Path, toml: str, words: list[str]
) -> None:
    """`ether serve` with the table exits 2 before it serves, and its only output is one line
    naming the key and what is allowed."""
    config = tmp_path / "ether.toml"
    config.write_text(toml)
    host = Host(
        "--config", str(config), "--listen", "127.0.0.1:0",
        "--state-dir", str(tmp_path / "state"), "--log-format", "json",
    )  # fmt: skip
    try:
        # The host either exits (the reader sees its stderr end) or serves: never wait longer.
        host.wait_for_log(lambda r: r.get("event") == "serving", 60)
    except AssertionError:
        pass  # it exited without serving, as it should
    else:
        host.stop()
        pytest.fail(f"the host served with {toml!r}:\n" + "\n".join(host.last_lines()))
    assert host.process.wait(30) == 2, host.last_lines()
    lines = host.last_lines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("ether: "), lines
    for word in words:
        assert word in lines[0], f"{word!r} missing from: {lines[0]}"
    assert host.process.stdout is not None and host.process.stdout.read() == b""
