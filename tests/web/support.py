"""Driving the web console in a real browser: Debian's Chromium through playwright-core
(tests/web/drive.mjs, one scenario per run), no browser download."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.host import ROOT

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "drive.mjs"
BUNDLE = ROOT / "web" / "dist" / "main.js"
# Where the screenshots go, for a person to look at: ETHER_SCREENSHOTS, or .ether/screenshots.
SCREENSHOTS = Path(os.environ.get("ETHER_SCREENSHOTS", ROOT / ".ether" / "screenshots"))


def chromium() -> str:
    """The Chromium to drive. Missing: a skip with the reason, unless running as root (CI, where
    `make setup` installs it and these tests must run)."""
    found = shutil.which("chromium")
    if found:
        return found
    if os.geteuid() == 0:
        pytest.fail("chromium is missing: `make setup` installs Debian's chromium as root")
    pytest.skip(
        "chromium is missing (Debian's `chromium` package; `make setup` installs it as root)"
    )


def drive(
    scenario: str,
    *,
    budget: float = 90.0,
    when_ready: Callable[[], None] | None = None,
    **config: Any,
) -> dict[str, Any]:
    """Run one scenario of drive.mjs; what the page showed, or a failure naming what it did.
    ``when_ready``: called when the scenario prints READY (its page is following a stream), for
    the test to make the change the page should then show; the driver is then told DONE (a
    scenario may wait for it)."""
    assert BUNDLE.is_file(), "the console is not built: `make setup` bundles web/ into web/dist"
    assert (HERE / "node_modules" / "playwright-core").is_dir(), "`make setup` installs tests/web"
    folder = SCREENSHOTS / scenario
    folder.mkdir(parents=True, exist_ok=True)
    settings = {
        "chromium": chromium(),
        "screenshots": str(folder),
        "budget_ms": int(budget * 1000),
        **config,
    }
    process = subprocess.Popen(
        ["node", str(DRIVER), scenario],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=HERE,
    )
    try:
        assert process.stdin is not None and process.stdout is not None
        # The config as one line; stdin stays open for a DONE after each step the test makes.
        process.stdin.write(json.dumps(settings) + "\n")
        process.stdin.flush()
        lines = []
        for line in process.stdout:  # ends when the driver exits (its own waits have budgets)
            if line.strip() == "READY" and when_ready is not None:
                when_ready()
                try:
                    process.stdin.write("DONE\n")
                    process.stdin.flush()
                except BrokenPipeError:
                    pass  # the driver ended meanwhile: its last line says why
            else:
                lines.append(line)
        # The whole scenario's budget: the waits inside it, browser start and stop on a loaded CI.
        process.wait(timeout=budget * 3)
        stderr = process.stderr.read() if process.stderr else ""
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    assert lines, f"{scenario}: the driver printed nothing\n{stderr[-4000:]}"
    result: dict[str, Any] = json.loads(lines[-1])
    print(f"{scenario}: screenshots in {folder}")
    assert result["ok"], f"{scenario}: {result['error']}\n{stderr[-2000:]}"
    return result
