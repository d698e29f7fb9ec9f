"""GetHostInfo: the host says what it is and what isolates its agents, as it logs at start."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ether.v1 import supervisor_pb2
from ether_host import __version__
from tests.support.host import HostProcess

REQUEST = supervisor_pb2.GetHostInfoRequest()


def _info(host: HostProcess) -> supervisor_pb2.HostInfo:
    return host.supervisor.GetHostInfo(REQUEST, timeout=10).host


def _logged(host: HostProcess, event: str) -> dict[str, object]:
    return host.wait_for_log(lambda r: str(r.get("event", "")).startswith(event))


def test_version_listeners_and_isolation_as_logged(host: HostProcess) -> None:
    info = _info(host)
    assert info.version == __version__
    assert list(info.listeners) == [host.address]
    assert not info.auth and not info.tls and not info.client_certificates
    assert info.started_at.seconds > 0
    isolation = info.isolation
    assert isolation.sandbox_mode == "auto"
    assert set(isolation.limits) >= {"memory", "pids", "open_files"}
    if shutil.which("bwrap") is None:
        return  # a machine without bubblewrap: the next test shows what it reports
    assert isolation.sandboxed and isolation.pid_namespaces
    assert {"pid", "net", "mount"} <= set(isolation.namespaces)
    assert isolation.bubblewrap.startswith("bubblewrap")
    assert isolation.why_not == ""
    logged = _logged(host, "agents run in sandboxes")
    assert logged["bubblewrap"] == isolation.bubblewrap


def test_without_bubblewrap_it_says_why(tmp_path: Path) -> None:
    """A PATH without bwrap: no sandbox, no PID namespaces, and the reason."""
    path = [p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "bwrap").exists()]
    host = HostProcess(tmp_path / "state", env={"PATH": os.pathsep.join(path)})
    try:
        host.wait_serving()
        isolation = _info(host).isolation
        assert not isolation.sandboxed and not isolation.pid_namespaces
        assert list(isolation.namespaces) == [] and isolation.bubblewrap == ""
        assert "not installed" in isolation.why_not
    finally:
        host.stop()


def test_sandbox_off_is_reported(tmp_path: Path) -> None:
    config = tmp_path / "ether.toml"
    config.write_text('[sandbox]\nmode = "off"\n')
    host = HostProcess(tmp_path / "state", "--config", str(config))
    try:
        host.wait_serving()
        isolation = _info(host).isolation
        assert isolation.sandbox_mode == "off" and not isolation.sandboxed
        assert "off" in isolation.why_not
    finally:
        host.stop()
