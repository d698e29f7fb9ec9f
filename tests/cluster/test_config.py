"""``[cluster]`` settings (server/ether_host/config.py): each key from TOML and ETHER_CLUSTER_*,
bad values as one line naming the key, and a host without ``redis_url`` that loads nothing of
the cluster's client."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ether_host.cluster import ClusterSettings
from ether_host.config import ConfigError, load_config


def test_cluster_keys_come_from_the_toml_section_and_the_environment(tmp_path: Path) -> None:
    file = tmp_path / "host.toml"
    file.write_text(
        '[cluster]\nredis_url = "redis://10.0.0.9:6379/2"\nhost_name = "north"\n'
        'advertise = "10.0.0.5:50051"\nheartbeat = 1.5\ndropout = 9\nclaim_idle = 3\n'
    )
    config = load_config({}, {}, str(file))
    assert config.cluster_redis_url == "redis://10.0.0.9:6379/2"
    assert (config.cluster_host_name, config.cluster_advertise) == ("north", "10.0.0.5:50051")
    assert (config.cluster_heartbeat, config.cluster_dropout) == (1.5, 9.0)
    assert config.cluster_claim_idle == 3.0
    environ = {"ETHER_CLUSTER_REDIS_URL": "unix:///run/redis.sock", "ETHER_CLUSTER_DROPOUT": "30"}
    config = load_config({}, environ | {"ETHER_CLUSTER_CLAIM_IDLE": "0.5"}, str(file))
    assert (config.cluster_redis_url, config.cluster_dropout) == ("unix:///run/redis.sock", 30.0)
    assert config.cluster_claim_idle == 0.5
    assert load_config({}, {}).cluster_claim_idle == 5.0  # the default


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("REDIS_URL", "127.0.0.1:6379"),  # no scheme
        ("REDIS_URL", "http://127.0.0.1:6379"),
        ("REDIS_URL", "redis://127.0.0.1:port/0"),
        ("REDIS_URL", "redis:///0"),
        ("REDIS_URL", "redis://127.0.0.1:6379/cache"),  # a database is a number
        ("HOST_NAME", "a host"),
        ("ADVERTISE", "10.0.0.5"),
        ("DROPOUT", "soon"),
        ("CLAIM_IDLE", "soon"),
        ("CLAIM_IDLE", "601"),  # ten minutes at most
    ],
)
def test_a_bad_cluster_value_is_one_line_naming_its_key(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config({}, {f"ETHER_CLUSTER_{name}": value})
    message = str(raised.value)
    assert f"cluster_{name.lower()}: " in message and "\n" not in message, message


def test_a_claim_idle_of_zero_is_refused_naming_its_key() -> None:
    with pytest.raises(ConfigError) as raised:
        ClusterSettings.resolve(
            redis_url="redis://127.0.0.1:6379/0",
            host_name="a",
            advertise="",
            heartbeat=2,
            dropout=10,
            bound="127.0.0.1:50051",
            claim_idle=0,
        )
    assert str(raised.value) == "cluster_claim_idle: must be more than 0 seconds"


def test_a_host_without_a_cluster_imports_no_redis_client(tmp_path: Path) -> None:
    """The embedded default pays nothing: building a host's core without ``[cluster]`` loads
    neither redis-py nor starts anything of the cluster."""
    script = (
        "import sys, pathlib\n"
        "from ether_host.config import HostConfig\n"
        "from ether_host.main import build_core\n"
        f"core = build_core(HostConfig(state_dir=pathlib.Path({str(tmp_path)!r})))\n"
        "assert core.cluster is None\n"
        "print(sorted(m for m in sys.modules if m == 'redis' or m.startswith('redis.')))\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert ran.stdout.strip() == "[]", ran.stdout + ran.stderr
