"""The INSTALLING phase: dependencies and builds, cached by a hash of their inputs.

Python: ``pip install --target`` into ``deps/python/<hash>``, built in a temp
folder and renamed, never reinstalled into an existing target. Go:
``go build -mod=readonly`` into ``builds/go/<hash>/agent``. TypeScript:
``npm ci`` (or ``npm install`` without a lockfile) and ``tsc`` in the folder,
remembered by a stamp ``builds/ts/<hash>``. Every line the tools print goes to
the agent's log; a failure raises InstallError with the tool's message.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.text import TextReceiveStream

from ether_host.procs import ChildRegistry
from ether_host.supervisor.environment import base_environment, python_path_of_adapter
from ether_host.supervisor.manifest import AgentSpec

LogSink = Callable[[str], None]
INSTALL_TIMEOUT = 600.0
_locks: dict[str, anyio.Lock] = {}
# The host's registry of its children, for the tools ``prepare`` runs (set for its duration,
# so the builders below need not carry it): the orphan sweeper reaps any zombie child the
# registry does not know, and a tool it reaped first was never seen to exit by the event
# loop, which waits for it (libuv drops an exit it finds already reaped): the install hung,
# INSTALLING for good, and the host could not stop (a fresh clone's test run, 2026-11-27).
_children: ContextVar[ChildRegistry | None] = ContextVar("install_children", default=None)


class InstallError(Exception):
    """The install or build failed; the message carries the tool's output tail."""


@dataclass
class LaunchPlan:
    """How to start one process of the agent."""

    argv: list[str]
    cwd: Path
    env: dict[str, str] = field(default_factory=dict)
    # What the process runs from, outside the system directories, that a sandbox shows it
    # read-only: the agent's folder, its installed dependencies or build, the runtime and
    # the adapter (containment.py binds them).
    read_only: list[str] = field(default_factory=list)


def _outside_system(paths: Iterable[str | Path]) -> list[str]:
    """Absolute, existing, unique ``paths``, minus those the system directories hold."""
    found: list[str] = []
    for raw in paths:
        path = os.path.normpath(os.path.abspath(raw))
        if not os.path.exists(path) or path in found:
            continue
        if any(path == top or path.startswith(top + "/") for top in SYSTEM_DIRS):
            continue
        found.append(path)
    return found


def _prefix_of(program: str) -> str:
    """The installation a program belongs to (``/x/bin/prog`` -> ``/x``), symlinks resolved."""
    return os.path.dirname(os.path.dirname(os.path.realpath(program)))


# Read-only in every sandbox anyway (containment.SYSTEM_READ_ONLY, symlinks resolved here).
SYSTEM_DIRS = ("/usr", "/etc", "/opt")


def _digest(parts: Iterable[bytes]) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(len(part).to_bytes(8, "big"))
        hasher.update(part)
    return hasher.hexdigest()[:20]


def _files(
    root: Path, suffixes: tuple[str, ...], skip: tuple[str, ...] = ("node_modules", "dist", ".git")
) -> list[Path]:
    found = []
    for folder, dirs, names in os.walk(root):
        # Never into a skipped folder: root.rglob walked all of node_modules before the filter
        # dropped it, on every deploy (bench/RESULTS.md, "Scale on one host").
        dirs[:] = [name for name in dirs if name not in skip]
        for name in names:
            path = Path(folder, name)
            if name not in skip and name.endswith(suffixes) and path.is_file():
                found.append(path)
    return sorted(found)


TOOL_CRASH_RETRIES = 2


async def _run_tool(
    argv: list[str], cwd: Path, env: dict[str, str], log: LogSink, what: str
) -> None:
    """Run a tool, streaming its output to the log; raise InstallError on failure.

    A tool killed by a signal it did not ask for is run again, at most
    TOOL_CRASH_RETRIES times; an ordinary failure is reported at once. (npm and tsc
    were seen dying of SIGSEGV: grpc's fork support crashed the forked child before
    exec. ether_host/__init__.py turns that off; the retry stays as a safety net.)
    """
    for attempt in range(TOOL_CRASH_RETRIES + 1):
        code, tail = await _run_tool_once(argv, cwd, env, log)
        if code == 0:
            return
        if code > 0 or attempt == TOOL_CRASH_RETRIES:
            break
        log(f"{what} was killed by signal {-code}; running it again")
    raise InstallError(f"{what} failed with exit code {code}:\n" + "\n".join(tail[-15:]))


async def _run_tool_once(
    argv: list[str], cwd: Path, env: dict[str, str], log: LogSink
) -> tuple[int, list[str]]:
    tail: list[str] = []
    children = _children.get()
    spawning = children.spawning() if children is not None else contextlib.nullcontext("")
    with spawning as spawn_id:
        try:
            with anyio.fail_after(INSTALL_TIMEOUT):
                async with await anyio.open_process(
                    argv,
                    cwd=cwd,
                    # What it leaves running when it ends is an orphan the sweeper kills.
                    env=env | {"ETHER_SPAWN_ID": spawn_id} if spawn_id else env,
                    stdin=subprocess.DEVNULL,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                ) as process:
                    if children is not None:
                        children.bind(spawn_id, process.pid)
                    assert process.stdout is not None
                    async for text in TextReceiveStream(process.stdout, errors="replace"):
                        for line in text.splitlines():
                            log(line)
                            tail = ([*tail, line])[-30:]
                    code = await process.wait()
        finally:
            if children is not None:
                children.release(spawn_id)  # reaped, or never started
    return code, tail


async def _pip_target(spec: AgentSpec, state_dir: Path, log: LogSink) -> Path | None:
    """Install the folder's requirements.txt into ``deps/python/<hash>`` (cached); its path,
    or None when there is nothing to install."""
    manifests = [
        p for p in (spec.path / "requirements.txt", spec.path / "pyproject.toml") if p.exists()
    ]
    requirements = spec.path / "requirements.txt"
    if not (requirements.exists() and requirements.read_text().strip()):
        return None
    key = _digest([p.read_bytes() for p in manifests] + [sys.version.encode()])
    target = state_dir / "deps" / "python" / key
    lock = _locks.setdefault(str(target), anyio.Lock())
    async with lock:
        if target.exists():
            log(f"dependencies cached in {target}")
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = target.parent / f".{key}.{os.getpid()}.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        log(f"installing {requirements} into {target}")
        env = base_environment() | {
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
        }
        try:
            await _run_tool(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "--target",
                    str(staging),
                    "-r",
                    str(requirements),
                ],
                spec.path,
                env,
                log,
                "pip install",
            )
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


async def _python(spec: AgentSpec, state_dir: Path, log: LogSink) -> LaunchPlan:
    python_path = [str(spec.path), python_path_of_adapter()]
    target = await _pip_target(spec, state_dir, log)
    if target is not None:
        python_path.insert(0, str(target))
    if spec.command:
        argv = list(spec.command)
    else:
        argv = [
            sys.executable,
            "-m",
            "ether_agent",
            "--path",
            str(spec.path),
            "--module",
            spec.module,
        ]
        if spec.function:
            argv += ["--function", spec.function]
    runtime = [sys.prefix, sys.base_prefix, sys.exec_prefix, _prefix_of(sys.executable)]
    return LaunchPlan(
        argv,
        spec.path,
        {"PYTHONPATH": os.pathsep.join(python_path), "PYTHONUNBUFFERED": "1"},
        _outside_system([spec.path, *python_path, *runtime]),
    )


def _go_env(state_dir: Path) -> dict[str, str]:
    home = os.environ.get("HOME") or str(state_dir / "home")
    env = base_environment() | {
        "HOME": home,
        "GOCACHE": str((state_dir / "cache" / "go-build").absolute()),
    }
    for name in ("GOPATH", "GOMODCACHE", "GOPROXY", "GOFLAGS", "GOTOOLCHAIN"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def _go_replaced_dirs(spec: AgentSpec) -> list[Path]:
    """Local folders named by ``replace ... => ./path`` in go.mod (their sources count too)."""
    dirs = []
    for line in (spec.path / "go.mod").read_text().splitlines():
        if "=>" in line:
            target = line.split("=>", 1)[1].strip().split()[0]
            if target.startswith("."):
                dirs.append((spec.path / target).resolve())
    return dirs


async def _go(spec: AgentSpec, state_dir: Path, log: LogSink) -> LaunchPlan:
    sources = _files(spec.path, (".go", "go.mod", "go.sum"))
    for folder in _go_replaced_dirs(spec):
        sources += _files(folder, (".go", "go.mod", "go.sum"))
    key = _digest([str(p).encode() + p.read_bytes() for p in sources])
    binary = (state_dir / "builds" / "go" / key / "agent").absolute()
    env = _go_env(state_dir)
    async with _locks.setdefault(str(binary), anyio.Lock()):
        if binary.exists():
            log(f"build cached: {binary}")
        else:
            staging = binary.parent.with_name(f".{key}.tmp")
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(parents=True)
            log(f"go build -mod=readonly in {spec.path}")
            try:
                await _run_tool(
                    ["go", "build", "-mod=readonly", "-o", str(staging / "agent"), "."],
                    spec.path,
                    env,
                    log,
                    "go build",
                )
                staging.rename(binary.parent)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    argv = [str(binary), *spec.command] if spec.command else [str(binary)]
    return LaunchPlan(
        argv,
        spec.path,
        {"HOME": env["HOME"], "GOCACHE": env["GOCACHE"]},
        _outside_system([spec.path, binary.parent]),
    )


async def _typescript(spec: AgentSpec, state_dir: Path, log: LogSink) -> LaunchPlan:
    lockfile = spec.path / "package-lock.json"
    inputs = [spec.path / "package.json"] + ([lockfile] if lockfile.exists() else [])
    inputs += _files(spec.path, (".ts", ".mts", "tsconfig.json"))
    for folder in _linked_packages(spec.path):  # "file:" dependencies are built into this agent too
        inputs += _files(folder, (".ts", ".mts", "tsconfig.json", "package.json"))
    key = _digest([str(p).encode() + p.read_bytes() for p in inputs])
    stamp = state_dir / "builds" / "ts" / key
    env = base_environment() | {"HOME": os.environ.get("HOME") or str(state_dir / "home")}
    env.pop("NODE_ENV", None)  # an inherited NODE_ENV=production would skip devDependencies (tsc)
    main = spec.main or _package_main(spec.path) or "dist/agent.js"
    async with _locks.setdefault(str(spec.path), anyio.Lock()), _folder_lock(spec.path, log):
        if stamp.exists() and (spec.path / main).exists():
            log(f"build cached: {spec.path / main}")
        else:
            # npm ci wipes node_modules: skip it when the folder already holds this exact
            # manifest's install (a marker keyed like the stamp, but on the manifests only).
            manifests = _digest(
                [p.read_bytes() for p in (spec.path / "package.json", lockfile) if p.exists()]
            )
            await _npm_install(spec.path, env, log, manifests)
            tsc = spec.path / "node_modules" / ".bin" / "tsc"
            if not tsc.exists():
                raise InstallError(
                    f"{tsc} not found: add typescript to devDependencies of {spec.path / 'package.json'}"
                )
            log("tsc -p .")
            await _run_tool([str(tsc), "-p", "."], spec.path, env, log, "tsc")
            stamp.parent.mkdir(parents=True, exist_ok=True)
            stamp.write_text(main)
    argv = ["node", str(spec.path / main), *spec.command]
    node = shutil.which("node")
    runtime = [_prefix_of(node)] if node else []
    linked = _linked_packages(spec.path)
    # Node looks for packages in node_modules of every folder above the importing file's
    # real path (a "file:" package's imports too).
    modules = [
        folder / "node_modules"
        for start in (spec.path, *linked)
        for folder in (start, *start.parents)
        if (folder / "node_modules").is_dir()
    ]
    # A "file:" package is reached through the path package.json names (it may pass through
    # a symlink that the sandbox would not have), and imports from where it really is.
    named = [spec.path / folder for folder in _linked_package_names(spec.path)]
    return LaunchPlan(
        argv, spec.path, {}, _outside_system([spec.path, *named, *linked, *modules, *runtime])
    )


async def _npm_install(folder: Path, env: dict[str, str], log: LogSink, manifests: str) -> None:
    """npm ci (npm install without a lockfile) in ``folder``, unless its node_modules already
    holds this exact manifest's install (a marker keyed on the manifests)."""
    marker = folder / "node_modules" / ".ether-installed"
    if marker.exists() and marker.read_text() == manifests:
        log(f"dependencies already installed in {folder / 'node_modules'}")
        return
    npm = ["npm", "ci"] if (folder / "package-lock.json").exists() else ["npm", "install"]
    log(" ".join(npm) + f" in {folder}")
    await _run_tool([*npm, "--no-audit", "--no-fund"], folder, env, log, " ".join(npm))
    marker.write_text(manifests)


async def _mcp(spec: AgentSpec, state_dir: Path, log: LogSink) -> LaunchPlan:
    """An MCP server run from its own ``command``, after the [install] its agent.toml asks.

    ``python`` as the command's program is the host's own interpreter (as Python agents run),
    so a server whose package is in the host's environment or in [install] pip needs no other.
    """
    env: dict[str, str] = {}
    read_only: list[str | Path] = [spec.path]
    argv = list(spec.command)
    if argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    if spec.install.get("pip"):
        target = await _pip_target(spec, state_dir, log)
        if target is not None:
            env["PYTHONPATH"] = str(target)
            read_only.append(target)
    if argv[0] == sys.executable or env.get("PYTHONPATH"):
        env["PYTHONUNBUFFERED"] = "1"
        read_only += [sys.prefix, sys.base_prefix, sys.exec_prefix, _prefix_of(sys.executable)]
    if spec.install.get("npm"):
        lockfile = spec.path / "package-lock.json"
        manifests = _digest(
            [p.read_bytes() for p in (spec.path / "package.json", lockfile) if p.exists()]
        )
        npm_env = base_environment() | {"HOME": os.environ.get("HOME") or str(state_dir / "home")}
        npm_env.pop("NODE_ENV", None)
        async with _locks.setdefault(str(spec.path), anyio.Lock()), _folder_lock(spec.path, log):
            if _installed_by_make(spec.path):
                log(f"dependencies installed by make setup in {spec.path / 'node_modules'}")
            else:
                await _npm_install(spec.path, npm_env, log, manifests)
    program = shutil.which(argv[0], path=os.environ.get("PATH")) if "/" not in argv[0] else None
    if program:
        read_only.append(_prefix_of(program))
    read_only += [
        folder / "node_modules"
        for folder in (spec.path, *spec.path.parents)
        if (folder / "node_modules").is_dir()
    ]
    return LaunchPlan(argv, spec.path, env, _outside_system(read_only))


def _installed_by_make(folder: Path) -> bool:
    """The Makefile's stamp (``make setup`` installs the packages it names) is newer than the
    folder's package.json and package-lock.json."""
    stamp = folder / "node_modules" / ".stamp"
    if not stamp.exists():
        return False
    made = stamp.stat().st_mtime
    manifests = [folder / "package.json", folder / "package-lock.json"]
    return all(p.stat().st_mtime <= made for p in manifests if p.exists())


@contextlib.asynccontextmanager
async def _folder_lock(folder: Path, log: LogSink) -> AsyncIterator[None]:
    """An exclusive flock on the agent folder: npm and tsc write into it, and two hosts
    (or two test runs) building the same folder at once corrupt each other's output.

    Taken without blocking, retried with a backoff: a blocking flock in a worker thread could
    not be cancelled, so a folder locked by a stuck process left the agent INSTALLING forever,
    past the install timeout and through a stop."""
    handle = await anyio.to_thread.run_sync(lambda: (folder / ".ether-build.lock").open("a"))
    try:
        pause = 0.01
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if pause == 0.01:
                    log(f"waiting for another build of {folder} to finish (its .ether-build.lock)")
                await anyio.sleep(pause)
                pause = min(pause * 2, 0.5)
        yield
    finally:
        handle.close()  # closing releases the lock


def _package_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads((path / "package.json").read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _package_main(path: Path) -> str:
    return str(_package_json(path).get("main") or "")


def _linked_package_names(path: Path) -> list[str]:
    """The relative folders named by ``"file:..."`` dependencies in package.json."""
    manifest = _package_json(path)
    specs = {**(manifest.get("dependencies") or {}), **(manifest.get("devDependencies") or {})}
    return [str(v)[5:] for v in specs.values() if str(v).startswith("file:")]


def _linked_packages(path: Path) -> list[Path]:
    """Folders named by ``"file:..."`` dependencies in package.json."""
    return [(path / name).resolve() for name in _linked_package_names(path)]


async def prepare(
    spec: AgentSpec, state_dir: Path, log: LogSink, children: ChildRegistry | None = None
) -> LaunchPlan:
    """Install or build the agent (cached) and return how to launch it; the tools it runs are
    ``children`` of the host's (the host's registry: its sweeper leaves them to be waited on).

    The whole phase, waits for locks included, ends within the spec's install_timeout: an
    agent never stays INSTALLING for good, it ends FATAL with the reason."""
    token = _children.set(children)
    try:
        return await _prepare(spec, state_dir, log)
    finally:
        _children.reset(token)


async def _prepare(spec: AgentSpec, state_dir: Path, log: LogSink) -> LaunchPlan:
    if not spec.path.is_dir():  # a recorded agent whose folder went away between runs
        raise InstallError(
            f"the agent folder {spec.path} is gone: put it back and StartAgent, "
            "or RemoveAgent and deploy it from where it is now"
        )
    if spec.protocol == "mcp":
        build = _mcp
    else:
        build = {"python": _python, "go": _go}.get(spec.language, _typescript)
    try:
        with anyio.fail_after(spec.install_timeout):
            return await build(spec, state_dir, log)
    except TimeoutError:
        raise InstallError(
            f"installing the {spec.language or spec.protocol} agent from {spec.path} took longer than its "
            f"install_timeout of {spec.install_timeout:g} s; see its install log lines"
        ) from None
