"""The client tours in clients/examples (Python, Go, TypeScript) run against a real host that asks
for a token, and print the same lines: what a user copying them would see.

Each tour lists the agents, calls scout, streams a search, pipes three calls (one per message,
then as one batch: PipeRequest.inputs, PipeResponse.outputs) and shows the error
for an agent that is not there. The expected lines are worked out here from the files scout reads,
so a tour that printed what it was told rather than what the host answered would fail.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator

import grpc
import pytest

from ether.v1 import supervisor_pb2
from tests.support.agents import EXAMPLES, deploy
from tests.support.certs import Authority
from tests.support.host import ROOT, sandbox_grants

from ._support import README_ADDRESS, Host, clean_environment, readme_commands, write_tokens

TOKEN = "tour-token-6d2b9f4e1a7c3058"
AUTH = [("authorization", f"Bearer {TOKEN}")]
# The README's commands, one per language, run as they are written (only the address changes).
TOURS = {
    language: next(c for c in readme_commands("tours") if f"clients/examples/{language}" in c)
    for language in ("python", "go", "typescript")
}
PIPED = ("Makefile", "README.md", "pyproject.toml")  # sorted, as the tours print them


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    """A host that needs a token for every call, with the scout example agent running."""
    folder = tmp_path_factory.mktemp("tours")
    tokens = write_tokens(folder / "tokens", tour=TOKEN)
    config = folder / "ether.toml"  # scout reads this checkout through its sandbox
    config.write_text(sandbox_grants())
    host = Host(
        "--listen", "127.0.0.1:0", "--auth-tokens-file", str(tokens),
        "--state-dir", str(folder / "state"), "--log-format", "json", "--config", str(config),
    )  # fmt: skip
    try:
        host.wait_serving()
        deploy(host, EXAMPLES / "scout", metadata=AUTH)
        yield host
    finally:
        assert host.stop() == 0


def run_tour(command: str, host: Host, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command.replace(README_ADDRESS, host.address)],
        cwd=ROOT,
        env=clean_environment(env | {"GOTOOLCHAIN": "local"}),
        capture_output=True,
        text=True,
        timeout=180,  # go run may compile first
        check=False,
    )


def expected_lines(pid: int) -> list[str]:
    """What every tour must print, from the files themselves."""

    def lines_of(name: str) -> int:
        return len((ROOT / name).read_text().splitlines())

    # scout's search_content: *.py files under server/ (no hidden folders), one match per line.
    servicer = re.compile("class .*Servicer")
    sources = sorted(
        path
        for path in (ROOT / "server").rglob("*.py")
        if not any(part.startswith(".") for part in path.relative_to(ROOT / "server").parts)
    )
    matches = sum(
        1 for path in sources for line in path.read_text().splitlines() if servicer.search(line)
    )
    total = len(sources)
    progress = [f"progress {index}/{total}" for index in range(0, total, 50)]
    stream = [f"started pid={pid}", *progress, f"output SUCCESS count={matches}"]
    return [
        "agents: scout",
        f"analyze_file: SUCCESS lines={lines_of('README.md')} pid={pid}",
        *(f"stream {sequence}: {event}" for sequence, event in enumerate(stream, start=1)),
        *(f"pipe: {name} SUCCESS lines={lines_of(name)}" for name in PIPED),
        *(f"batch: {name} SUCCESS lines={lines_of(name)}" for name in PIPED),
        "missing agent: NOT_FOUND: no agent named 'no-such-agent' (deployed: scout)",
    ]


@pytest.mark.parametrize("language", list(TOURS))
def test_the_tour_prints_what_the_host_answered(host: Host, language: str) -> None:
    """Directory, a call, a streamed call, a pipe and a NOT_FOUND, with the token from
    ETHER_TOKEN, printed line for line as the other languages print them."""
    tour = run_tour(TOURS[language], host, {"ETHER_TOKEN": TOKEN})
    assert tour.returncode == 0, tour.stderr
    listed = host.supervisor.ListProcesses(
        supervisor_pb2.ListProcessesRequest(agent="scout"), timeout=10, metadata=AUTH
    )
    pid = listed.processes[0].pid
    assert tour.stdout.splitlines() == expected_lines(pid), tour.stderr


def test_a_tour_without_the_token_is_refused(host: Host) -> None:
    """No ETHER_TOKEN: the first call fails UNAUTHENTICATED and the tour says so and exits 1."""
    tour = run_tour(TOURS["python"], host, {})
    assert tour.returncode == 1
    assert tour.stdout == ""
    assert tour.stderr.startswith("tour: UNAUTHENTICATED"), tour.stderr


@pytest.fixture(scope="module")
def tls_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Host, dict[str, str]]]:
    """A host that serves TLS and names callers by their client certificate, with scout
    running; and the ETHER_TLS_* variables of a client holding such a certificate."""
    folder = tmp_path_factory.mktemp("tours-tls")
    authority = Authority(folder, "tours")
    server = authority.issue("server", "ether host", server=True)
    client = authority.issue("client", "tour.example")
    tokens = folder / "tokens"
    tokens.write_text("tour cert:tour.example\n")
    config = folder / "ether.toml"
    config.write_text(sandbox_grants())
    host = Host(
        "--listen", "127.0.0.1:0", "--auth-tokens-file", str(tokens),
        "--tls-cert", str(server.cert), "--tls-key", str(server.key),
        "--tls-client-ca", str(authority.pem),
        "--state-dir", str(folder / "state"), "--log-format", "json", "--config", str(config),
    )  # fmt: skip
    env = {
        "ETHER_TLS_CA": str(authority.pem),
        "ETHER_TLS_CLIENT_CERT": str(client.cert),
        "ETHER_TLS_CLIENT_KEY": str(client.key),
    }
    try:
        record = host.wait_for_log(lambda r: r.get("event") == "serving", 60)
        host.address = record["addresses"][0]
        trust = grpc.ssl_channel_credentials(
            authority.pem.read_bytes(), client.key.read_bytes(), client.cert.read_bytes()
        )
        host._channel = grpc.secure_channel(host.address, trust)
        deploy(host, EXAMPLES / "scout")
        yield host, env
    finally:
        assert host.stop() == 0


@pytest.mark.parametrize("language", list(TOURS))
def test_the_tour_connects_with_tls_and_a_client_certificate(
    tls_host: tuple[Host, dict[str, str]], language: str
) -> None:
    """The same tour, over TLS, with the client certificate from ETHER_TLS_*."""
    host, env = tls_host
    tour = run_tour(TOURS[language], host, env)
    assert tour.returncode == 0, tour.stderr
    listed = host.supervisor.ListProcesses(
        supervisor_pb2.ListProcessesRequest(agent="scout"), timeout=10
    )
    assert tour.stdout.splitlines() == expected_lines(listed.processes[0].pid), tour.stderr


def test_a_tour_without_the_client_certificate_is_refused(
    tls_host: tuple[Host, dict[str, str]],
) -> None:
    host, env = tls_host
    tour = run_tour(TOURS["python"], host, {"ETHER_TLS_CA": env["ETHER_TLS_CA"]})
    assert tour.returncode == 1
    assert tour.stderr.startswith("tour: UNAVAILABLE"), tour.stderr
