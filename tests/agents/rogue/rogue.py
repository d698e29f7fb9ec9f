"""A deliberately badly behaved agent for the host's robustness tests.

Start-up behaviour (environment): ROGUE_BANNER=1 prints garbage before hello,
ROGUE_IGNORE_TERM=1 ignores SIGTERM, ROGUE_EXIT=N exits with N at once,
ROGUE_NO_HELLO=1 never says hello, ROGUE_FATAL=1 sends a fatal frame,
ROGUE_EXIT_AFTER_WELCOME=N exits with N once the host's welcome arrives (no task in flight),
ROGUE_CONCURRENCY=N declares N task slots in hello (default 16), ROGUE_PROTOCOL=N asks for
protocol N in hello and writes the host's welcome to stderr, ROGUE_PING=1 declares ping (and never
answers one), ROGUE_LINGER=1 stays up after
stdin ends or a shutdown frame (only a signal it does not ignore ends it). Its "stall" action
stops reading stdin until a marker file exists.
"""

import array
import base64
import fcntl
import json
import os
import signal
import subprocess
import sys
import termios
import threading
import time

out = sys.stdout.buffer
lock = threading.Lock()
napping = {"now": 0, "most": 0}  # tasks of the "nap" action running at once, now and at most


def write_raw(data: bytes, chunk: int = 0) -> None:
    with lock:
        if chunk:
            for i in range(0, len(data), chunk):
                out.write(data[i : i + chunk])
                out.flush()
        else:
            out.write(data)
            out.flush()


def send(frame: dict, chunk: int = 0) -> None:
    write_raw(json.dumps(frame, separators=(",", ":")).encode() + b"\n", chunk)


def result(frame_id: str, value: object, chunk: int = 0) -> None:
    send({"type": "result", "id": frame_id, "status": "ok", "result": value}, chunk)


def handle(task: dict) -> None:
    action, params, frame_id = task["action"], task.get("params") or {}, task["id"]
    if action == "echo":
        result(frame_id, params)
    elif action == "sized":
        # A result whose whole frame is exactly `bytes` long, written `chunk` bytes at a time.
        frame = {"type": "result", "id": frame_id, "status": "ok", "result": {"data": ""}}
        overhead = len(json.dumps(frame, separators=(",", ":")).encode()) + 1
        frame["result"]["data"] = "x" * (int(params["bytes"]) - overhead)
        send(frame, int(params.get("chunk", 0)))
    elif action == "garbage":
        write_raw(
            b'not json at all\n42\n[1,2]\n\xff\xfe invalid utf-8 \xc3\x28\n{"id":\n{"type":"result","id":"h-999999","status":"ok"}\n'
        )
        result(frame_id, {"survived": True})
    elif action == "spew":
        # Bytes a fuzzer chose, raw on stdout (then a newline, so they end as one line or
        # more), and then the answer: the host must skip whatever they were and carry on.
        write_raw(base64.b64decode(params["b64"]) + b"\n", int(params.get("chunk", 0)))
        result(frame_id, {"survived": True})
    elif action == "hang":
        pass  # never answers, ignores cancel
    elif action == "crash":
        os._exit(3)
    elif action == "grandchild":
        child = subprocess.Popen(
            ["sh", "-c", "trap '' TERM HUP; while true; do sleep 1; done"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        result(frame_id, {"pid": child.pid, "pgid": os.getpgid(child.pid)})
    elif action == "deadline":
        result(frame_id, {"deadline_ms": task.get("deadline_ms")})
    elif action == "nap":
        with lock:
            napping["now"] += 1
            napping["most"] = max(napping["most"], napping["now"])
        time.sleep(int(params.get("ms", 100)) / 1000)
        with lock:
            napping["now"] -= 1
            most = napping["most"]
        result(frame_id, {"most_at_once": most})
    elif action == "give_up":
        # Answer `timeout` this many ms before the deadline the host sent (0: right away).
        early = params.get("before_deadline_ms")
        if early is not None and task.get("deadline_ms"):
            time.sleep(max(0, int(task["deadline_ms"]) - int(early)) / 1000)
        error = {"code": "timeout", "message": "gave up"}
        send({"type": "result", "id": frame_id, "status": "error", "error": error})
    elif action == "chatter":
        # Progress every millisecond for `ms` milliseconds, cancel or not; then the result.
        until = time.monotonic() + int(params.get("ms", 1000)) / 1000
        step = 0
        while time.monotonic() < until:
            step += 1
            send({"type": "progress", "id": frame_id, "progress": step})
            time.sleep(0.001)
        result(frame_id, {"steps": step})
    elif action == "stderr":
        sys.stderr.write(
            "[WARNING] disk almost full\n"
            '{"level": "error", "msg": "upstream failed", "status": 503}\n'
            "Traceback (most recent call last):\n"
            '  File "worker.py", line 7, in <module>\n'
            "ValueError: bad value\n"
            "back to normal\n"
        )
        sys.stderr.flush()
        result(frame_id, {"written": True})
    elif action == "print":
        print("hello from print() on stdout", flush=True)
        result(frame_id, {"printed": True})
    else:
        send(
            {
                "type": "result",
                "id": frame_id,
                "status": "error",
                "error": {"code": "unknown_action", "message": action},
            }
        )


def stall(task: dict) -> None:
    """Stop reading stdin until the marker file the params name exists (the host's pipe to
    this process fills meanwhile), then answer how many bytes were waiting in it."""
    marker = (task.get("params") or {})["marker"]
    while not os.path.exists(marker):
        time.sleep(0.01)
    waiting = array.array("i", [0])
    fcntl.ioctl(sys.stdin.fileno(), termios.FIONREAD, waiting)
    result(task["id"], {"waiting_bytes": waiting[0]})


def main() -> None:
    if os.environ.get("ROGUE_IGNORE_TERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.environ.get("ROGUE_EXIT"):
        print("rogue: exiting as asked", file=sys.stderr, flush=True)
        sys.exit(int(os.environ["ROGUE_EXIT"]))
    if os.environ.get("ROGUE_BANNER"):
        write_raw(b"*** ROGUE AGENT v0 ***\nloading...\n\xff\xfe\n")
    if os.environ.get("ROGUE_FATAL"):
        send({"type": "fatal", "code": "fatal_config", "message": "missing API key ROGUE_KEY"})
        sys.exit(1)
    if not os.environ.get("ROGUE_NO_HELLO"):
        actions = [
            *("echo", "sized", "garbage", "hang", "crash", "grandchild", "print"),
            *("deadline", "nap", "stderr", "give_up", "chatter", "spew", "stall"),
        ]
        send(
            {
                "type": "hello",
                "protocol": int(os.environ.get("ROGUE_PROTOCOL", "1")),
                "agent": {"name": "rogue", "version": "0", "language": "python"},
                "actions": [{"name": a} for a in actions],
                "capabilities": {
                    "max_concurrency": int(os.environ.get("ROGUE_CONCURRENCY", "16")),
                    "cancel": True,
                    # Declares ping, and never answers one: a wedged agent.
                    "ping": bool(os.environ.get("ROGUE_PING")),
                },
                "pid": os.getpid(),
            }
        )
    if os.environ.get("ROGUE_BANNER"):
        write_raw(b"banner after hello\n")
    if os.environ.get("ROGUE_PROTOCOL"):  # show what the host answered, for the test to read
        sys.stderr.write("welcome: " + sys.stdin.buffer.readline().decode())
        sys.stderr.flush()
    if os.environ.get("ROGUE_EXIT_AFTER_WELCOME"):
        sys.stdin.buffer.readline()  # the welcome
        sys.exit(int(os.environ["ROGUE_EXIT_AFTER_WELCOME"]))
    for line in sys.stdin.buffer:
        try:
            frame = json.loads(line)
        except ValueError:
            continue
        if frame.get("type") == "task" and frame.get("action") == "stall":
            stall(frame)  # here, not in a thread: stdin is not read meanwhile
        elif frame.get("type") == "task":
            threading.Thread(target=handle, args=(frame,), daemon=True).start()
        elif frame.get("type") == "shutdown":
            break
    if os.environ.get("ROGUE_LINGER"):
        threading.Event().wait()


main()
