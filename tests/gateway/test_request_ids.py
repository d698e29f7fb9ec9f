"""SendMessage request ids: a retry is answered with the first message, not sent again; the host
remembers a bounded number of them (`remembered_request_ids`), across a restart, and what it
keeps for one never holds the message's data."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from ether_host import sqlite
from ether_host.gateway import store as gateway_store
from tests.support.agents import AGENTS, deploy, watch_until
from tests.support.calls import data, execute, struct
from tests.support.host import HostProcess, sandbox_grants

from ._support import send

TOOLBOX = AGENTS / "toolbox"
BLOB = "x" * 60_000  # a message's data far larger than what is kept for its request id


def test_request_ids_are_bounded_kept_across_a_restart_and_hold_no_data(tmp_path: Path) -> None:
    """With remembered_request_ids = 2: the two last ids answer their first message (also after
    a restart, with the data of the repeat); an older one is forgotten and sends anew; the
    store's rows for them are small although one message carried 60 KB."""
    config = tmp_path / "host.toml"
    config.write_text(sandbox_grants() + "\n[gateway]\nremembered_request_ids = 2\n")
    state = tmp_path / "state"
    host = HostProcess(state, "--config", str(config))
    try:
        host.wait_serving()
        inbox = deploy(host, TOOLBOX, name="inbox", config=struct({"mailbox_size": 10}))
        first = send(host, inbox, "note", {"n": 1}, request_id="r-1")
        second = send(host, inbox, "note", {"n": 2}, request_id="r-2")
        third = send(host, inbox, "note", {"n": 3, "blob": BLOB}, request_id="r-3")
        repeat = send(host, inbox, "note", {"n": 3, "blob": BLOB}, request_id="r-3")
        assert repeat == third  # the very answer: message, sequence, depth
        forgotten = send(host, inbox, "note", {"n": 1}, request_id="r-1")  # r-2 goes now
        assert forgotten.message.id != first.message.id
        assert forgotten.message.sequence == third.message.sequence + 1
        assert host.stop() == 0
    finally:
        host.stop()

    with sqlite3.connect(state / "gateway" / "state.sqlite3") as db:
        rows = db.execute("SELECT * FROM sent_requests").fetchall()
    assert sorted(row[1] for row in rows) == ["r-1", "r-3"]
    assert sum(len(str(value)) for row in rows for value in row) < 1000  # no 60 KB blob

    again = HostProcess(state, "--config", str(config))
    try:
        again.wait_serving()
        after = send(again, inbox, "note", {"n": 3, "blob": BLOB}, request_id="r-3")
        assert (after.message.id, after.message.sequence, after.mailbox_depth) == (
            third.message.id,
            third.message.sequence,
            third.mailbox_depth,
        )
        assert after.message.data.struct_value["n"] == 3
        anew = send(again, inbox, "note", {"n": 2}, request_id="r-2")  # forgotten before
        assert anew.message.id != second.message.id
        watch_until(again, inbox, {"RUNNING"})  # deployed agents come back by themselves
        received = [m["id"] for m in data(execute(again, inbox, "receive"))]
        assert received[:4] == [
            first.message.id,
            second.message.id,
            third.message.id,
            forgotten.message.id,
        ]
        assert received[4:] == [anew.message.id]  # no repeat was put in the mailbox
    finally:
        again.stop()


def test_request_ids_of_a_version_1_store_still_answer_their_retry(tmp_path: Path) -> None:
    """A gateway store written before version 2 (whole messages kept for request ids) is
    migrated in place: its remembered request id still answers with its message."""
    state = tmp_path / "state"
    path = state / "gateway" / "state.sqlite3"
    db = sqlite.connect(path, gateway_store.MIGRATIONS[:1])
    body = {
        "id": "msg-00000000000000aa",
        "sequence": 7,
        "sender": "local",
        "agent": "inbox",
        "topic": "",
        "type": "note",
        "data": {"n": 1},
        "correlation_id": "",
        "session_id": "",
        "sent_at": 1700000000.5,
    }
    db.execute(
        "INSERT INTO sent_requests VALUES (?, ?, ?, ?)", ("local", "r-old", 3, json.dumps(body))
    )
    db.close()
    host = HostProcess(state)
    try:
        host.wait_serving()
        deploy(host, TOOLBOX, name="inbox")
        answer = send(host, "inbox", "note", {"n": 1}, request_id="r-old")
        assert (answer.message.id, answer.message.sequence, answer.mailbox_depth) == (
            "msg-00000000000000aa",
            7,
            3,
        )
        assert answer.message.sent_at.ToSeconds() == 1700000000
        assert data(execute(host, "inbox", "receive")) == []  # nothing sent again
    finally:
        host.stop()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(gateway_store.MIGRATIONS)
