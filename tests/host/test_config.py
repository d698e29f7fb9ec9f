"""Configuration: flags > ETHER_* environment > TOML file > defaults, and bad input refused
with exit code 2 and one line naming the key and what is allowed."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ._support import Host, run_ether


def _serving(host: Host) -> dict[str, object]:
    host.wait_serving()
    return host.wait_for_log(lambda r: r.get("event") == "serving")


def _grace_on_stop(host: Host) -> float:
    assert host.stop() == 0
    return float(host.wait_for_log(lambda r: r.get("event") == "stopping")["grace_s"])


def test_flag_beats_environment_beats_file_beats_default(tmp_path: Path) -> None:
    """Each setting comes from the highest layer that sets it."""
    config = tmp_path / "ether.toml"
    socket_path = tmp_path / "sock" / "ether.sock"
    config.write_text(
        f'listen = "127.0.0.1:1"\n'  # port 1: binding it would fail, so the flag must win
        f'state_dir = "{tmp_path / "file-state"}"\n'
        f"shutdown_grace = 7\n"
        f'log_format = "console"\n'
        f'unix_socket = "{socket_path}"\n'
    )
    env = {
        "ETHER_LISTEN": "127.0.0.1:2",
        "ETHER_STATE_DIR": str(tmp_path / "env-state"),
        "ETHER_SHUTDOWN_GRACE": "3",
        "ETHER_LOG_FORMAT": "json",
    }
    host = Host(
        "--config",
        str(config),
        "--listen",
        "127.0.0.1:0",
        "--state-dir",
        str(tmp_path / "flag-state"),
        env=env,
    )
    try:
        serving = _serving(host)
    finally:
        grace = _grace_on_stop(host)
    assert serving["state_dir"] == str(tmp_path / "flag-state")  # flag > env > file
    assert (tmp_path / "flag-state").is_dir()
    assert not (tmp_path / "env-state").exists() and not (tmp_path / "file-state").exists()
    addresses = serving["addresses"]
    assert isinstance(addresses, list)
    assert addresses[0].startswith("127.0.0.1:") and not addresses[0].endswith((":1", ":2"))  # flag
    assert f"unix:{socket_path}" in addresses  # file > default (no socket)
    assert grace == 3.0  # env > file
    # env > file for the log format: every line the host wrote is a JSON record.
    assert all(line.startswith("{") for line in host.raw_lines), host.raw_lines[:3]


def test_file_from_environment_and_defaults(tmp_path: Path) -> None:
    """ETHER_CONFIG names the file; what nobody sets keeps its default (state_dir .ether in the
    working directory); a flag beats the environment for the log level too."""
    config = tmp_path / "ether.toml"
    config.write_text('shutdown_grace = 2\nlog_level = "error"\n')
    env = {"ETHER_CONFIG": str(config), "ETHER_LOG_LEVEL": "error"}
    host = Host(
        "--listen",
        "127.0.0.1:0",
        "--log-format",
        "json",
        "--log-level",
        "info",
        env=env,
        cwd=tmp_path,
    )
    try:
        serving = _serving(host)  # logged at info: the flag won over env and file
    finally:
        grace = _grace_on_stop(host)
    assert serving["state_dir"] == ".ether"
    assert (tmp_path / ".ether").is_dir()
    assert grace == 2.0  # file > default (5)


def test_log_level_filters(tmp_path: Path) -> None:
    """log_level warning keeps the info records (serving, one per RPC) out of the log."""
    socket_path = tmp_path / "s" / "ether.sock"
    host = Host(
        "--listen", "", "--unix-socket", str(socket_path), "--state-dir", str(tmp_path / "state"),
        "--log-format", "json", env={"ETHER_LOG_LEVEL": "warning"},
    )  # fmt: skip
    try:
        host.address = f"unix:{socket_path}"
        _wait_unix_serving(host)
    finally:
        assert host.stop() == 0
    assert not [r for r in host.records if r.get("level") == "info"], host.raw_lines


def _wait_unix_serving(host: Host) -> None:
    """Health SERVING over the socket, without relying on the (filtered) serving record; the
    socket may not exist yet, so retry connecting quickly rather than after grpc's 1 s."""
    fast_retry = [("grpc.initial_reconnect_backoff_ms", 20), ("grpc.min_reconnect_backoff_ms", 20)]
    with grpc.insecure_channel(host.address, options=fast_retry) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        response = health.Check(health_pb2.HealthCheckRequest(), timeout=30, wait_for_ready=True)
    assert response.status == health_pb2.HealthCheckResponse.SERVING


def _toml(tmp_path: Path, text: str) -> str:
    path = tmp_path / "ether.toml"
    path.write_text(text)
    return str(path)


BAD_INPUT = [
    # (id, args, env, TOML text or None, words the one line must hold)
    ("unknown-flag", ["--bogus"], {}, None, ["--bogus", "--listen", "--state-dir", "--log-level"]),
    (
        "flag-value",
        ["--log-format", "xml"],
        {},
        None,
        ["log_format", "'xml'", "auto, console, json"],
    ),
    ("flag-grace-text", ["--shutdown-grace", "soon"], {}, None, ["shutdown_grace", "seconds"]),
    ("flag-grace-range", ["--shutdown-grace", "99999"], {}, None, ["shutdown_grace", "0 to 3600"]),
    ("flag-listen", ["--listen", "nowhere"], {}, None, ["listen", "'nowhere'", "HOST:PORT"]),
    (
        "env-value",
        [],
        {"ETHER_LOG_LEVEL": "loud"},
        None,
        ["ETHER_LOG_LEVEL", "'loud'", "debug, info, warning, error"],
    ),
    (
        "env-listen",
        [],
        {"ETHER_LISTEN": "127.0.0.1:99999"},
        None,
        ["ETHER_LISTEN", "99999", "HOST:PORT"],
    ),
    ("file-type", [], {}, "listen = 5\n", ["listen", "5", "string"]),
    ("file-key", [], {}, "colour = 'blue'\n", ["'colour'", "allowed keys", "listen", "state_dir"]),
    ("file-syntax", [], {}, "listen = [\n", ["ether.toml"]),
    ("file-agents", [], {}, "[[agents]]\nname = 'x'\n", ["agents", "path"]),
]


@pytest.mark.parametrize(
    ("args", "env", "toml", "words"), [b[1:] for b in BAD_INPUT], ids=[b[0] for b in BAD_INPUT]
)
def test_bad_input_exits_2_with_one_line(
    tmp_path: Path, args: list[str], env: dict[str, str], toml: str | None, words: list[str]
) -> None:
    """Exit code 2 and one line naming the key and what is allowed; nothing is served."""
    base = ["--state-dir", str(tmp_path / "state")]
    if "--log-format" not in args:
        base += ["--log-format", "json"]
    if "--listen" not in args and "ETHER_LISTEN" not in env:
        base += ["--listen", "127.0.0.1:0"]  # never the fixed default port, even on a bug
    config = ["--config", _toml(tmp_path, toml)] if toml is not None else []
    result = run_ether(*config, *args, *base, env=env, timeout=15)
    lines = result.stderr.splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], f"{word!r} missing from: {lines[0]}"
    assert result.stdout == ""


def test_missing_config_file(tmp_path: Path) -> None:
    result = run_ether(
        "--config", str(tmp_path / "nope.toml"), "--listen", "127.0.0.1:0", timeout=15
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"ether: config file {tmp_path / 'nope.toml'} does not exist"
    ]


@pytest.mark.parametrize("kind", ["missing", "directory", "empty", "short", "shared"])
def test_unusable_token_file_refuses_to_start(tmp_path: Path, kind: str) -> None:
    """A token file that cannot be read, holds no token, or gives a token under 16 characters
    (guessable) or one certificate subject to two names stops the host before it serves,
    naming the file (and the line)."""
    path = tmp_path / "tokens"
    if kind == "directory":
        path.mkdir()
    elif kind == "empty":
        path.write_text("# no tokens yet\n")
    elif kind == "short":
        path.write_text("alice alice-token-5f1c9e2a7b3d\nbob short-token-15\n")
    elif kind == "shared":
        path.write_text("ci cert:ci.example.com\nops cert:ci.example.com\n")
    result = run_ether(
        "--listen", "127.0.0.1:0", "--state-dir", str(tmp_path / "state"), "--log-format", "json",
        "--auth-tokens-file", str(path), timeout=15,
    )  # fmt: skip
    assert result.returncode != 0
    assert str(path) in result.stderr
    assert '"serving"' not in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    if kind == "short":
        assert "line 2" in result.stderr and "shorter than 16 characters" in result.stderr
    if kind == "shared":
        assert "line 2" in result.stderr and "already 'ci'" in result.stderr
