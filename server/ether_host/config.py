"""Host configuration: defaults < TOML file < ``ETHER_*`` environment < flags.

Every key is declared once in ``SETTINGS`` with its parser, so a bad value
anywhere produces the same one-line error naming the key and what is allowed.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any


class ConfigError(Exception):
    """A bad configuration key or value. The CLI prints it and exits 2."""


LOG_FORMATS = ("auto", "console", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")


@dataclass(frozen=True)
class HostConfig:
    """Settings of one host process."""

    listen: str = "127.0.0.1:50051"
    # The HTTP listener (ether_host/http: /healthz, /mcp, ...): HOST:PORT, off when empty.
    http_listen: str = ""
    unix_socket: str = ""
    state_dir: Path = Path(".ether")
    log_format: str = "auto"
    log_level: str = "info"
    auth_tokens_file: str = ""
    shutdown_grace: float = 5.0
    # Calls served at once (unary and streams); grpc answers the next RESOURCE_EXHAUSTED.
    max_concurrent_rpcs: int = 10000
    # Response streams open at once on the host and per caller (transport/limits.py).
    max_streams: int = 5000
    max_streams_per_caller: int = 1000
    # A call with one response and no deadline of its own ends DEADLINE_EXCEEDED after this
    # many seconds (0: never); response streams are not bounded (transport/limits.py).
    default_deadline: float = 3600.0
    # Client pings closer together than this, with no data between, are strikes; the
    # third earns the connection a GOAWAY too_many_pings (gRPC keepalive enforcement).
    keepalive_min_ping_interval: float = 60.0
    # TLS: the server's certificate chain and key (PEM); with client_ca, every client must
    # present a certificate it signed, and its subject maps to an identity (auth.py).
    tls_cert: str = ""
    tls_key: str = ""
    tls_client_ca: str = ""
    # With client_ca and a token file: a call needs the token AND the certificate.
    tls_require_token: bool = False
    agents_dir: str = ""
    # Agents deployed at start, from the TOML file's [[agents]] tables.
    agents: tuple[Mapping[str, Any], ...] = field(default=())
    # Feature sections passed through to their core modules, validated there.
    terminals: Mapping[str, Any] = field(default_factory=dict)
    gateway: Mapping[str, Any] = field(default_factory=dict)
    workflows: Mapping[str, Any] = field(default_factory=dict)
    # Memory, processes, files and CPU per agent replica and terminal (resources.py).
    limits: Mapping[str, Any] = field(default_factory=dict)
    sandbox: Mapping[str, Any] = field(default_factory=dict)  # checked by sandbox.py
    # [telemetry] (telemetry/, docs/telemetry.md): off by default, so a host that does not
    # ask pays nothing. metrics serves Prometheus text at /metrics on the HTTP listener;
    # otlp_endpoint (an OTLP/gRPC collector, http://HOST:PORT) turns tracing on.
    telemetry_metrics: bool = False
    telemetry_otlp_endpoint: str = ""
    telemetry_service_name: str = "ether"
    # Share of traces started here that are recorded (a caller's sampled flag is followed).
    telemetry_sample_ratio: float = 1.0
    # Spans carry params and data only when asked: they may hold secrets.
    telemetry_record_payloads: bool = False
    # Ended spans wait at most this long before they are sent, in batches.
    telemetry_export_delay: float = 1.0
    # [cluster] (cluster/, docs/cluster.md): several hosts on one Redis. Off while redis_url is
    # empty: nothing of it is imported or started. host_name defaults to the machine's name and
    # the bound port; advertise (the gRPC address other hosts reach this one at) to the bound
    # listen address when it is not a wildcard. A host whose heartbeats stop for dropout seconds
    # leaves the directory.
    cluster_redis_url: str = ""
    cluster_host_name: str = ""
    cluster_advertise: str = ""
    cluster_heartbeat: float = 2.0
    cluster_dropout: float = 10.0
    # A task pending this long (seconds) on a host gone from the directory is claimed by a live
    # host that runs its agent: run again when idempotent, else answered that its host died.
    cluster_claim_idle: float = 5.0
    # A call on a terminal another host owns (its id names the host) is forwarded there over
    # gRPC; false: answered FAILED_PRECONDITION with the owner's name and address instead.
    cluster_forward_terminals: bool = True
    # PEM file of the CA that signed the other hosts' server certificates: terminal calls are
    # forwarded over TLS verified against it (without it: over TLS against the system's roots
    # when this host serves TLS itself, else in plaintext).
    cluster_tls_ca: str = ""
    # [cache] (agents/result_cache.py): the bytes of results the host keeps in memory for
    # actions declared with a cache_ttl (an LRU; 0: none kept). In a cluster they are in Redis.
    cache_max_bytes: int = 64 * 1024 * 1024
    # [notifications] (notifications/, docs/notifications.md): the key webhooks are signed with
    # (HMAC-SHA256; no webhook is accepted without one), how many times a delivery is tried,
    # and the pause before the second try (doubled for each next one, up to max_backoff).
    notifications_secret: str = ""
    notifications_max_attempts: int = 10
    notifications_backoff: float = 1.0
    notifications_max_backoff: float = 300.0


def _choice(key: str, allowed: tuple[str, ...]) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = str(value).strip().lower()
        if text not in allowed:
            raise ConfigError(f"{key}: {value!r} is not allowed; use one of {', '.join(allowed)}")
        return text

    return parse


def _text(key: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value

    return parse


def _address(key: str, example: str, empty: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = _text(key)(value)
        host, sep, port = text.rpartition(":")
        if text and (not sep or not host or not port.isdigit() or int(port) > 65535):
            raise ConfigError(
                f"{key}: {value!r} is not allowed; use HOST:PORT with a port 0 to 65535 "
                f"(for example {example}), or '' to {empty}"
            )
        return text

    return parse


def _path(key: str) -> Callable[[Any], Path]:
    def parse(value: Any) -> Path:
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{key}: expected a non-empty path, got {value!r}")
        return Path(value)

    return parse


def _seconds(key: str) -> Callable[[Any], float]:
    def parse(value: Any) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}: expected a number of seconds, got {value!r}") from None
        if not 0 <= number <= 3600:
            raise ConfigError(f"{key}: {number} is out of range; allowed 0 to 3600 seconds")
        return number

    return parse


def _count(key: str, lowest: int, highest: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        try:
            number = int(str(value).strip())
        except ValueError:
            raise ConfigError(f"{key}: expected a whole number, got {value!r}") from None
        if not lowest <= number <= highest:
            raise ConfigError(f"{key}: {number} is out of range; allowed {lowest} to {highest}")
        return number

    return parse


def _number(key: str, highest: float, unit: str) -> Callable[[Any], float]:
    def parse(value: Any) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            what = f"a number of{unit}" if unit else f"a number from 0 to {highest:g}"
            raise ConfigError(f"{key}: expected {what}, got {value!r}") from None
        if not 0 <= number <= highest:
            raise ConfigError(f"{key}: {number} is out of range; allowed 0 to {highest:g}{unit}")
        return number

    return parse


def _seconds_up_to(key: str, highest: float) -> Callable[[Any], float]:
    return _number(key, highest, " seconds")


def _flag(key: str) -> Callable[[Any], bool]:
    def parse(value: Any) -> bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"{key}: {value!r} is not allowed; use true or false")

    return parse


def _ratio(key: str) -> Callable[[Any], float]:
    return _number(key, 1, "")


def _endpoint(key: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = _text(key)(value).strip()
        scheme, sep, rest = text.partition("://")
        host, colon, port = rest.rpartition(":")
        if text and not (sep and scheme in ("http", "https") and host and colon and port.isdigit()):
            raise ConfigError(
                f"{key}: {value!r} is not allowed; use http://HOST:PORT (for example "
                "http://127.0.0.1:4317, an OTLP/gRPC collector), or '' to send no traces"
            )
        return text

    return parse


def userinfo_hidden(url: str) -> str:
    """``url`` as a log line or an error may show it: what precedes the host's ``@`` (a
    password, or a user name and password) starred, even in a URL too broken to parse; a user
    name alone is starred too (``redis://SECRET@host`` is a common slip for a password)."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    if "@" not in authority:
        return url
    userinfo, _, where = authority.rpartition("@")
    user = userinfo.split(":", 1)[0] if ":" in userinfo else ""
    return f"{scheme}{sep}{user}:***@{where}{slash}{path}"


def _redis_url(key: str) -> Callable[[Any], str]:
    """redis://[user:password@]HOST[:PORT][/DB], rediss://... (TLS) or unix:///path: the forms
    redis-py's from_url takes; checked here so a typo stops the start with one line."""

    def parse(value: Any) -> str:
        text = _text(key)(value).strip()
        if not text:
            return text
        scheme, sep, rest = text.partition("://")
        where = rest.split("/", 1)[0].rpartition("@")[2]
        host, colon, port = where.rpartition(":") if where.count(":") == 1 else (where, "", "")
        fine = bool(sep) and (
            (scheme == "unix" and rest.startswith("/"))
            or (scheme in ("redis", "rediss") and bool(host) and (not colon or port.isdigit()))
        )
        if fine and scheme != "unix":
            database = (rest.split("/", 1)[1] if "/" in rest else "").split("?", 1)[0]
            fine = not database or database.isdigit()
        if not fine:
            raise ConfigError(
                f"{key}: {userinfo_hidden(text)!r} is not allowed; use redis://HOST:PORT[/DB] (for example "
                "redis://127.0.0.1:6379/0), rediss://... or unix:///path/redis.sock, or '' for "
                "no cluster"
            )
        return text

    return parse


def _host_name(key: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = _text(key)(value).strip()
        if len(text) > 128 or not all(c.isalnum() or c in "._:-" for c in text):
            raise ConfigError(
                f"{key}: {value!r} is not allowed; use at most 128 letters, digits and . _ : -, "
                "or '' for the machine's name and the listen port"
            )
        return text

    return parse


def _table(key: str) -> Callable[[Any], Mapping[str, Any]]:
    def parse(value: Any) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected a table, got {value!r}")
        return dict(value)

    return parse


def _agents(value: Any) -> tuple[Mapping[str, Any], ...]:
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise ConfigError("agents: expected an array of tables ([[agents]] with path = ...)")
    for entry in value:
        if "path" not in entry:
            raise ConfigError("agents: every [[agents]] table needs a path")
    return tuple(dict(v) for v in value)


SETTINGS: dict[str, Callable[[Any], Any]] = {
    "listen": _address("listen", "127.0.0.1:50051", "disable TCP"),
    "http_listen": _address("http_listen", "127.0.0.1:50052", "serve no HTTP"),
    "unix_socket": _text("unix_socket"),
    "state_dir": _path("state_dir"),
    "log_format": _choice("log_format", LOG_FORMATS),
    "log_level": _choice("log_level", LOG_LEVELS),
    "auth_tokens_file": _text("auth_tokens_file"),
    "shutdown_grace": _seconds("shutdown_grace"),
    "max_concurrent_rpcs": _count("max_concurrent_rpcs", 1, 1_000_000),
    "max_streams": _count("max_streams", 1, 1_000_000),
    "max_streams_per_caller": _count("max_streams_per_caller", 1, 1_000_000),
    "default_deadline": _seconds_up_to("default_deadline", 7 * 86400),
    "keepalive_min_ping_interval": _seconds_up_to("keepalive_min_ping_interval", 3600),
    "tls_cert": _text("tls_cert"),
    "tls_key": _text("tls_key"),
    "tls_client_ca": _text("tls_client_ca"),
    "tls_require_token": _flag("tls_require_token"),
    "agents_dir": _text("agents_dir"),
    "agents": _agents,
    "terminals": _table("terminals"),
    "gateway": _table("gateway"),
    "workflows": _table("workflows"),
    "limits": _table("limits"),
    "sandbox": _table("sandbox"),
    "telemetry_metrics": _flag("telemetry_metrics"),
    "telemetry_otlp_endpoint": _endpoint("telemetry_otlp_endpoint"),
    "telemetry_service_name": _text("telemetry_service_name"),
    "telemetry_sample_ratio": _ratio("telemetry_sample_ratio"),
    "telemetry_record_payloads": _flag("telemetry_record_payloads"),
    "telemetry_export_delay": _seconds_up_to("telemetry_export_delay", 60),
    "cluster_redis_url": _redis_url("cluster_redis_url"),
    "cluster_host_name": _host_name("cluster_host_name"),
    "cluster_advertise": _address("cluster_advertise", "10.0.0.5:50051", "advertise listen"),
    "cluster_heartbeat": _seconds_up_to("cluster_heartbeat", 60),
    "cluster_dropout": _seconds_up_to("cluster_dropout", 600),
    "cluster_claim_idle": _seconds_up_to("cluster_claim_idle", 600),
    "cluster_forward_terminals": _flag("cluster_forward_terminals"),
    "cluster_tls_ca": _text("cluster_tls_ca"),
    "cache_max_bytes": _count("cache_max_bytes", 0, 1 << 40),
    "notifications_secret": _text("notifications_secret"),
    "notifications_max_attempts": _count("notifications_max_attempts", 1, 1000),
    "notifications_backoff": _seconds_up_to("notifications_backoff", 3600),
    "notifications_max_backoff": _seconds_up_to("notifications_max_backoff", 86400),
}
# Keys that only a TOML file can set (structured values).
FILE_ONLY = {"agents", "terminals", "gateway", "workflows", "limits", "sandbox"}
ENV_PREFIX = "ETHER_"
# TOML tables whose keys are settings of their own: [tls] cert = ... is tls_cert.
SECTIONS = ("tls", "telemetry", "cluster", "cache", "notifications")


def _flatten(values: Mapping[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in values.items():
        if key in SECTIONS and isinstance(value, Mapping):
            flat.update({f"{key}_{inner}": v for inner, v in value.items()})
        else:
            flat[key] = value
    return flat


def _apply(config: HostConfig, values: Mapping[str, Any], origin: str) -> HostConfig:
    known = {f.name for f in fields(HostConfig)}
    changes: dict[str, Any] = {}
    for key, raw in _flatten(values).items():
        if key not in known:
            allowed = ", ".join(sorted(SETTINGS))
            raise ConfigError(f"{origin}: unknown key {key!r}; allowed keys are {allowed}")
        try:
            changes[key] = SETTINGS[key](raw)
        except ConfigError as error:
            raise ConfigError(f"{origin}: {error}") from None
    return replace(config, **changes)


def read_toml(path: Path) -> dict[str, Any]:
    """Read a TOML config file; a missing or malformed file is a ConfigError."""
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {path}: {error}") from None


def env_values(environ: Mapping[str, str]) -> dict[str, str]:
    """The ETHER_* variables that name settings, keyed by setting name."""
    values = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or name == "ETHER_CONFIG":
            continue
        key = name[len(ENV_PREFIX) :].lower()
        if key in SETTINGS and key not in FILE_ONLY:
            values[key] = value
    return values


def load_config(
    flags: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    config_file: str | None = None,
) -> HostConfig:
    """Merge defaults, the TOML file, the environment and flags, in that order."""
    environ = os.environ if environ is None else environ
    config = HostConfig()
    path = config_file or environ.get("ETHER_CONFIG")
    if path:
        config = _apply(config, read_toml(Path(path)), f"config file {path}")
    for key, value in env_values(environ).items():
        config = _apply(config, {key: value}, f"{ENV_PREFIX}{key.upper()}")
    return _apply(config, {k: v for k, v in flags.items() if v is not None}, "flag")
