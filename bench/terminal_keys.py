"""Keystroke echo: one byte typed, the same byte read back, through a PTY and through the host.

The program is `cat` on a raw-mode PTY, so every byte typed is read by it and written back
(the kernel's own echo is off). Three paths, measured in turns within one run:

- raw: this process writes the byte to the PTY master and reads the master;
- raw + input pump: the byte goes through a pipe and a second `cat` into the master, as the
  host's input pump carries it; the difference to raw is what that hop adds per keystroke;
- attached: a gRPC client attached to a terminal (`Attach`) sends the byte as input and waits
  for the output message that carries it back; typed at a human pace (PAUSE between keys), and
  back to back (each key sent as soon as the last one's echo is in).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from typing import Any

RAW_CAT = "stty raw -echo && echo ready && exec cat"
PAUSE = 0.02  # seconds between keys when typed at a human pace (50 keys a second)


def _spawn_cat_on_pty() -> tuple[subprocess.Popen[bytes], int]:
    master, slave = os.openpty()
    process = subprocess.Popen(
        [shutil.which("setsid") or "setsid", "--ctty", "sh", "-c", RAW_CAT],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
        env={"PATH": os.defpath, "LANG": "C.UTF-8"},
    )
    os.close(slave)
    seen = b""
    while b"ready" not in seen:
        seen += os.read(master, 4096)
    return process, master


def raw_echo(count: int, through_pump: bool) -> list[float]:
    """Seconds from writing one byte to reading it back, ``count`` times."""
    process, master = _spawn_cat_on_pty()
    pump = None
    send = master
    try:
        if through_pump:
            reader, send = os.pipe()
            pump = subprocess.Popen([shutil.which("cat") or "cat"], stdin=reader, stdout=master)
            os.close(reader)
        times = []
        for _ in range(count):
            began = time.perf_counter()
            os.write(send, b"x")
            while b"x" not in os.read(master, 4096):
                pass
            times.append(time.perf_counter() - began)
        return times
    finally:
        if pump is not None:
            os.close(send)
            pump.wait()
        os.close(master)
        process.kill()
        process.wait()


def attached_echo(terminals: Any, count: int, pause: float) -> list[float]:
    """Seconds from sending one byte on an Attach stream to the output message carrying it,
    with ``pause`` seconds between one echo and the next key."""
    pb = terminals.pb
    terminal = terminals.create(command_line=RAW_CAT)
    terminals.wait_screen(terminal.id, "ready")
    requests, responses = terminals.attach(terminal.id, timeout=120)
    times = []
    try:
        for _ in range(count):
            began = time.perf_counter()
            requests.put(pb.AttachRequest(input=pb.TerminalInput(text="x")))
            for message in responses:
                if message.WhichOneof("kind") == "output" and b"x" in message.output.data:
                    break
            else:
                raise RuntimeError(f"terminal {terminal.id}: the stream ended before the echo")
            times.append(time.perf_counter() - began)
            time.sleep(pause)
    finally:
        requests.put(None)
        responses.cancel()
        terminals.close(terminal.id)
    return times


def measure(terminals: Any, count: int, rounds: int) -> dict[str, list[float]]:
    """Each path ``rounds`` times, in turns (so a slow moment of the VM hits them all)."""
    paths: dict[str, Callable[[], list[float]]] = {
        "raw": lambda: raw_echo(count, through_pump=False),
        "pump": lambda: raw_echo(count, through_pump=True),
        "attached": lambda: attached_echo(terminals, count, PAUSE),
        "attached, back to back": lambda: attached_echo(terminals, count, 0.0),
    }
    found: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(rounds):
        for name, run in paths.items():
            found[name] += run()
    return found
