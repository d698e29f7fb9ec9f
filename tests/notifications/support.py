"""What the notification tests share: a loopback HTTP receiver recording each POST, the host
configuration that lets the host's notifier reach it, and the persisted delivery records."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.host import HostProcess, sandbox_grants

SECRET = "s3cret-for-tests"
BUDGET = 60.0  # seconds any wait here may take on a loaded machine


@dataclass
class Hit:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A loopback HTTP server recording every POST; ``plan[path]`` lists the statuses its next
    POSTs are answered with (then 200)."""

    plan: dict[str, list[int]] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                with receiver.changed:
                    planned = receiver.plan.get(self.path) or []
                    status = planned.pop(0) if planned else 200
                    receiver.hits.append(
                        Hit(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    receiver.changed.notify_all()
                self.send_response(status)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def wait(self, path: str, count: int) -> list[Hit]:
        """The first ``count`` POSTs to ``path``, once they came (within BUDGET)."""
        with self.changed:
            self.changed.wait_for(
                lambda: len([h for h in self.hits if h.path == path]) >= count, BUDGET
            )
            found = [h for h in self.hits if h.path == path]
        assert len(found) >= count, f"{len(found)} POSTs to {path}, wanted {count}"
        return found[:count]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def receiving() -> Iterator[Receiver]:
    """A Receiver listening for the block (each test module's ``receiver`` fixture)."""
    server = Receiver()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def notify_config(folder: Path, secret: str, max_attempts: int = 4) -> Path:
    path = folder / "notify.toml"
    path.write_text(
        sandbox_grants()
        + "[notifications]\n"
        + (f'secret = "{secret}"\n' if secret else "")
        + f"backoff = 0.05\nmax_backoff = 0.2\nmax_attempts = {max_attempts}\n"
        + '[gateway.egress.agents."@notify"]\n'
        + 'allow_hosts = ["127.0.0.1"]\nallow_addresses = ["127.0.0.1/32"]\n'
        + 'allow_methods = ["POST"]\nrate = 100\nburst = 100\n'
    )
    return path


@contextlib.contextmanager
def notifying_host(folder: Path, extra_config: str = "") -> Iterator[HostProcess]:
    """A serving host that signs notifications with SECRET and may deliver them to loopback
    (notify_config, then ``extra_config``), stopped when the block ends."""
    config = notify_config(folder, SECRET)
    config.write_text(config.read_text() + extra_config)
    process = HostProcess(folder / "state", env={"ETHER_CONFIG": str(config)})
    try:
        process.wait_serving()
        yield process
    finally:
        process.stop()


def deliveries(host: HostProcess, subject: str) -> list[dict[str, Any]]:
    """The persisted records of ``subject``'s deliveries, with their attempts."""
    with sqlite3.connect(host.state_dir / "notifications.sqlite3") as db:
        db.row_factory = sqlite3.Row
        rows = [
            dict(r) for r in db.execute("SELECT * FROM deliveries WHERE subject = ?", [subject])
        ]
        for row in rows:
            row["outcomes"] = [
                a[0]
                for a in db.execute(
                    "SELECT outcome FROM attempts WHERE delivery = ? ORDER BY number", [row["id"]]
                )
            ]
    return rows


def final_record(host: HostProcess, subject: str) -> dict[str, Any]:
    """The delivery record of ``subject`` once it left pending (its last attempt is logged)."""
    host.wait_for_log(
        lambda r: (
            r.get("event") == "notification attempt"
            and r.get("subject") == subject
            and r.get("state") != "pending"
        ),
        BUDGET,
    )
    (record,) = deliveries(host, subject)
    return record
