"""The host's orphan sweeper and the install tools it runs (pip, go build, npm, tsc).

The sweeper reaps every zombie child its registry does not know; a tool it reaped before the
event loop saw it exit was never seen to exit at all (libuv drops an exit it finds already
reaped): the agent stayed INSTALLING for good and the host could not stop. A fresh clone's test
run hit it once (2026-11-27: the report example's tsc). Here the race is made likely instead of
rare: tools run back to back under uvloop, as in the host, while the real sweeper sweeps in a
tight loop in a thread; every tool must be seen to exit. Run with the tools left out of the
registry (the script's "unregistered"), a tool's exit is lost and the script fails (2 of 2 runs).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import sys, threading, time
    import anyio, uvloop
    from ether_host.procs import ChildRegistry
    from ether_host.supervisor import install

    registry = ChildRegistry() if sys.argv[1] == "registered" else None
    stop = threading.Event()
    sweeper = ChildRegistry()  # the sweeper's view: it knows no tool unless told

    def sweep() -> None:
        while not stop.is_set():
            (registry or sweeper).sweep()

    async def main() -> None:
        token = install._children.set(registry)
        try:
            for _ in range(60):
                with anyio.fail_after(10):
                    await install._run_tool(["true"], ".", {}, lambda line: None, "true")
        finally:
            install._children.reset(token)

    thread = threading.Thread(target=sweep, daemon=True)
    thread.start()
    try:
        anyio.run(main, backend="asyncio", backend_options={"loop_factory": uvloop.new_event_loop})
    except TimeoutError:
        print("a tool was never seen to exit")
        sys.exit(1)
    finally:
        stop.set()
    print("every tool was seen to exit")
    """
)


def _run(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=300
    )


def test_install_tools_are_never_reaped_by_the_orphan_sweeper() -> None:
    done = _run("registered")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "every tool was seen to exit" in done.stdout
