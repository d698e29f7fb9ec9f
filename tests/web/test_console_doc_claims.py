"""docs/console.md claims about the web console that no other test holds:

- "How the browser reaches the services": on `/rpc`, "JSON requests are refused (415): the
  console sends `application/proto`";
- "Where it lives": "A host without the bundle answers `/` with a page saying to run
  `make setup`";
- "What works", Workflows: the run's Markdown report is rendered "(marked; raw HTML in the
  report is shown as text, and only http(s), mailto and in-page links are kept)".

The console's assets are web/dist of the checkout the host runs from (http/console.py), which
other runs on this checkout share. So each host here runs from a copy of the ether_host package
this test process imports, in a folder of the test's own: without web/dist (no bundle), or with
web/ built there by esbuild. The report is read in Debian's Chromium through playwright-core
(tests/web/report_markdown.mjs); the HTTP calls are httpx's.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ether.v1 import agent_io_pb2
from tests.support.agents import AGENTS, deploy
from tests.support.host import ROOT, HostProcess
from tests.web.support import HERE, chromium
from tests.workflows.runs import create, state, wait

pytestmark = pytest.mark.timeout(300)  # an esbuild bundle and a browser on a loaded machine


def checkout_copy(folder: Path) -> Path:
    """``folder`` laid out as a checkout holding a copy of the ether_host package in use (its
    ``server/``); the host started from it looks for its console in ``folder/web/dist``."""
    spec = importlib.util.find_spec("ether_host")
    assert spec is not None and spec.submodule_search_locations
    package = Path(next(iter(spec.submodule_search_locations)))
    shutil.copytree(
        package, folder / "server" / "ether_host", ignore=shutil.ignore_patterns("__pycache__")
    )
    return folder


def start(checkout: Path, state: Path) -> HostProcess:
    host = HostProcess(state, env={"PYTHONPATH": str(checkout / "server")}, http=True)
    host.wait_serving()
    return host


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """A host whose checkout has no built console (no web/dist)."""
    folder = tmp_path_factory.mktemp("bare")
    checkout = checkout_copy(folder / "checkout")
    assert not (checkout / "web").exists()
    host = start(checkout, folder / "state")
    try:
        yield host
    finally:
        host.stop()


# -- /rpc refuses JSON ------------------------------------------------------------------------


def test_rpc_refuses_json_with_415_and_serves_proto(bare: HostProcess) -> None:
    """The same ListAgents call: as `application/json` (unary) and as `application/connect+json`
    (a server stream, WatchEvents) it is 415; as `application/proto` it is answered."""
    with httpx.Client(base_url=bare.http_address, timeout=30) as client:
        unary = client.post(
            "/rpc/ether.v1.AgentIOService/ListAgents",
            content=b"{}",
            headers={"content-type": "application/json", "connect-protocol-version": "1"},
        )
        assert unary.status_code == 415, unary.text
        stream = client.post(
            "/rpc/ether.v1.SupervisorService/WatchEvents",
            content=b"\x00\x00\x00\x00\x02{}",  # one enveloped message, as Connect streams send
            headers={"content-type": "application/connect+json", "connect-protocol-version": "1"},
        )
        assert stream.status_code == 415, stream.text

        proto = client.post(
            "/rpc/ether.v1.AgentIOService/ListAgents",
            content=agent_io_pb2.ListAgentsRequest().SerializeToString(),
            headers={"content-type": "application/proto", "connect-protocol-version": "1"},
        )
        assert proto.status_code == 200, proto.text
        assert proto.headers["content-type"] == "application/proto"
        agent_io_pb2.ListAgentsResponse.FromString(proto.content)  # a real answer


# -- no bundle: the page says to run make setup ------------------------------------------------


def test_without_the_bundle_the_page_says_to_run_make_setup(bare: HostProcess) -> None:
    with httpx.Client(base_url=bare.http_address, timeout=30) as client:
        page = client.get("/")
        health = client.get("/healthz")
    assert health.status_code == 200, (health.status_code, health.text)  # the host itself is up
    assert "not built" in page.text and "make setup" in page.text, (page.status_code, page.text)
    assert page.status_code == 503, page.status_code  # a probe sees the console is not there
    assert page.headers.get("content-type", "").startswith("text/html"), page.headers
    assert "/console/main.js" not in page.text  # not the console's own page


# -- the run's report: raw HTML as text, only safe links ------------------------------------------

# The Markdown an agent rendered (a result's `markdown`, embedded in the report as Markdown,
# docs/workflows.md "Reports"): raw HTML, block and inline, and links of every kind.
REPORT = """\
## Findings

Inline <b id="raw-b">bold</b> and <img id="raw-img" src="x" onerror="window.__pwned = 1">.

<script>window.__pwned = 2</script>

[web](https://example.com/ok) [plain](http://example.com/plain) [mail](mailto:a@example.com)
[anchor](#top) [evil](javascript:window.__pwned=3) [data](data:text/html,hi)

![pic](https://example.com/p.png) ![bad](javascript:1)
"""


def build_console(checkout: Path) -> None:
    """web/ of this repository bundled by its own build.mjs into ``checkout/web/dist``: its
    sources copied, node_modules and the generated TypeScript stubs (clients/) linked."""
    web = checkout / "web"
    web.mkdir()
    shutil.copytree(ROOT / "web" / "src", web / "src")
    for name in ("build.mjs", "package.json"):
        shutil.copy2(ROOT / "web" / name, web / name)
    (web / "node_modules").symlink_to(ROOT / "web" / "node_modules")
    (checkout / "clients").symlink_to(ROOT / "clients")
    built = subprocess.run(
        ["node", "build.mjs"], cwd=web, capture_output=True, text=True, timeout=240, check=False
    )
    assert built.returncode == 0, built.stderr
    assert (web / "dist" / "main.js").is_file() and (web / "dist" / "index.html").is_file()


def test_the_report_shows_raw_html_as_text_and_keeps_only_safe_links(tmp_path: Path) -> None:
    browser = chromium()  # skips (or fails as root) without Debian's chromium
    assert (HERE / "node_modules" / "playwright-core").is_dir(), "`make setup` installs tests/web"
    checkout = checkout_copy(tmp_path / "checkout")
    build_console(checkout)
    host = start(checkout, tmp_path / "state")
    try:
        deploy(host, AGENTS / "flow")
        # JSON is YAML: the stage's params carry the Markdown verbatim; flow.echo returns them,
        # so the run's result is {"markdown": REPORT}.
        stage = {"name": "render", "agent": "flow", "action": "echo"}
        spec = (
            f"name: escaped\nstages:\n  - {json.dumps(stage | {'params': {'markdown': REPORT}})}\n"
        )
        run = wait(host, create(host, spec).id)
        assert state(run) == "SUCCEEDED", run
        driven = subprocess.run(
            [
                "node",
                str(HERE / "report_markdown.mjs"),
                json.dumps(
                    {"chromium": browser, "base": host.http_address, "run": run.id,
                     "budget_ms": 60000}
                ),
            ],
            cwd=HERE, capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
    finally:
        host.stop()
    lines = driven.stdout.splitlines()
    assert lines, driven.stderr[-4000:]
    shown = json.loads(lines[-1])
    assert shown["ok"], shown["error"]
    assert shown["hasResult"], shown

    # Raw HTML is shown as text: no element made of it, nothing of it ran.
    assert shown["raw"] == [], shown["raw"]
    assert shown["pwned"] is None and shown["dialogs"] == [], shown
    assert '<b id="raw-b">bold</b>' in shown["text"], shown["text"]
    assert '<img id="raw-img" src="x" onerror="window.__pwned = 1">' in shown["text"]
    assert "<script>window.__pwned = 2</script>" in shown["text"]

    # http(s), mailto and in-page links are kept; any other loses its address.
    assert dict(shown["links"]) == {
        "web": "https://example.com/ok",
        "plain": "http://example.com/plain",
        "mail": "mailto:a@example.com",
        "anchor": "#top",
        "evil": None,
        "data": None,
    }, shown["links"]
    assert dict(shown["images"]) == {"pic": "https://example.com/p.png", "bad": None}
