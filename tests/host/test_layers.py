"""The host's layers (docs/architecture.md): the core never imports gRPC, the generated messages or
the transport, so a servicer stays a thin translation and the core can sit behind another front
(a second host through the bus, an MCP bridge) unchanged."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.support.host import ROOT

HOST = ROOT / "server" / "ether_host"
# The transport (and A2A, a second one), the composition root and the command-line clients speak
# gRPC; nothing else may.
FRONTS = {"transport", "main.py", "__main__.py", "cli", "a2a"}
# Prefixes: "grpc" covers grpc_health and grpc_reflection too, "ether_host.cli" the whole package.
FORBIDDEN = (
    *("grpc", "ether.v1", "ether.adapter", "google.rpc"),
    *("ether_host.transport", "ether_host.main", "ether_host.cli"),
)


def imported(path: Path) -> set[str]:
    """Every module a source file imports, at any depth (function-level imports included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: a relative import hides what it crosses"
            found.add(node.module or "")
    return found


def test_the_core_never_imports_grpc_or_the_transport() -> None:
    core = [p for p in HOST.rglob("*.py") if p.relative_to(HOST).parts[0] not in FRONTS]
    assert len(core) > 50, "the core's modules were not found"
    crossings = {
        f"{path.relative_to(ROOT)} imports {module}"
        for path in core
        for module in imported(path)
        if module.startswith(FORBIDDEN)
    }
    assert not crossings, "\n".join(sorted(crossings))


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """Every import of a source file as (module, names): ``import a.b`` gives ("a.b", []),
    ``from a import b, c`` gives ("a", ["b", "c"])."""
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append((node.module or "", [alias.name for alias in node.names]))
    return found


def face(package: Path) -> set[str]:
    """What a package's ``__init__`` exports: the names of its ``__all__``."""
    for node in ast.parse((package / "__init__.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    return set()


def test_code_outside_a_core_package_imports_only_its_face() -> None:
    """A core package is used through what its ``__init__`` exports (``__all__``): code outside
    it never imports ``ether_host.<package>.<module>``, nor a name its face does not export, so
    a package can rearrange its modules without its users noticing."""
    packages = {
        p.parent.name: face(p.parent)
        for p in HOST.glob("*/__init__.py")
        if p.parent.name not in FRONTS
    }
    assert {"agents", "supervisor", "link", "terminals", "gateway", "workflows"} <= set(packages)
    assert all(packages.values()), "a core package without __all__"
    crossings = set()
    for path in HOST.rglob("*.py"):
        where = path.relative_to(HOST).parts
        for module, names in imports(path):
            parts = module.split(".")
            if parts[0] != "ether_host" or len(parts) < 2 or parts[1] not in packages:
                continue
            if len(where) > 1 and where[0] == parts[1]:
                continue  # the package itself
            if len(parts) > 2:
                crossings.add(f"{path.relative_to(ROOT)} imports {module}")
            crossings.update(
                f"{path.relative_to(ROOT)} imports {name} from {module}, not in its __all__"
                for name in names
                if name not in packages[parts[1]]
            )
    assert not crossings, "\n".join(sorted(crossings))


def test_a_name_means_one_thing_across_the_faces() -> None:
    """No two core packages export the same name (the gateway's ``Session`` is a conversation, a
    terminal is a ``Terminal``; a subscription's gap is ``SubscriptionLagged``, an attached
    client's is the terminals' ``Lagged``), so a module importing both faces never shadows one."""
    owners: dict[str, list[str]] = {}
    for init in HOST.glob("*/__init__.py"):
        if init.parent.name not in FRONTS:
            for name in face(init.parent):
                owners.setdefault(name, []).append(init.parent.name)
    shared = {name: sorted(where) for name, where in owners.items() if len(where) > 1}
    assert not shared, shared
    assert {"Session", "Lagged", "SubscriptionLagged"} <= set(owners)


def test_an_agent_and_its_replicas_see_the_host_through_agent_host() -> None:
    """``ManagedAgent`` and ``Replica`` are handed an ``AgentHost`` (supervisor/host.py): they
    neither import the supervisor's module nor reach through ``.supervisor`` to it."""
    reaches = set()
    for name in ("agent.py", "replica.py", "process.py", "stopping.py"):
        path = HOST / "supervisor" / name
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "supervisor":
                reaches.add(f"{name}:{node.lineno} .supervisor")
        reaches.update(
            f"{name} imports {module}"
            for module, _ in imports(path)
            if module == "ether_host.supervisor.deployments"
        )
    assert not reaches, sorted(reaches)


def test_only_the_core_pages_a_list() -> None:
    """Every List pages in the core (a list function takes page_size and page_token and returns
    a paging.Page), so a second front pages the same way: no front imports the paginator."""
    fronts = [p for p in HOST.rglob("*.py") if p.relative_to(HOST).parts[0] in FRONTS - {"cli"}]
    crossings = {
        f"{path.relative_to(ROOT)} imports {module}"
        for path in fronts
        for module in imported(path)
        if module == "ether_host.paging"
    }
    assert not crossings, "\n".join(sorted(crossings))


def test_a_service_is_a_grpc_service() -> None:
    """``service`` names the gRPC services the transport serves; a core module says what it holds
    (``supervisor/deployments.py``, ``workflows/runs.py``, ``gateway/usecases.py``)."""
    misnamed = [
        str(p.relative_to(ROOT))
        for p in HOST.rglob("service.py")
        if p.relative_to(HOST).parts[0] not in FRONTS
    ]
    assert not misnamed, misnamed


def test_the_cli_is_a_client_like_any_other() -> None:
    """Every ``ether`` command but ``serve`` reaches the host through the five services only: its
    modules import nothing of the host but the cli package itself (``serve`` runs the host) and
    ``mcp_tools``, the MCP mapping ``ether mcp`` shares with ``/mcp``, which imports nothing of
    the host (test_the_mcp_mapping_imports_nothing_of_the_host)."""
    cli = HOST / "cli"
    clients = [p for p in cli.glob("*.py") if p.name != "serve.py"]
    assert {"client.py", "agents.py", "terminals.py", "workflows.py"} <= {p.name for p in clients}
    crossings = {
        f"{path.relative_to(ROOT)} imports {module}"
        for path in clients
        for module in imported(path)
        if module.startswith("ether_host")
        and not module.startswith(("ether_host.cli", "ether_host.mcp_tools"))
    }
    assert not crossings, "\n".join(sorted(crossings))


def test_the_mcp_mapping_imports_nothing_of_the_host() -> None:
    """``mcp_tools`` (Ether actions as MCP tools) is shared by ``ether mcp``, a client, and the
    HTTP listener's ``/mcp``: it imports the MCP SDK and itself only."""
    modules = list((HOST / "mcp_tools").glob("*.py"))
    assert modules, "mcp_tools was not found"
    crossings = {
        f"{path.relative_to(ROOT)} imports {module}"
        for path in modules
        for module in imported(path)
        if module.startswith("ether_host") and not module.startswith("ether_host.mcp_tools")
    }
    assert not crossings, "\n".join(sorted(crossings))


def test_the_ether_commands_parser_loads_neither_grpc_nor_the_host() -> None:
    """Building the ``ether`` command (``--help``, a usage error) imports no grpc, anyio or rich:
    a client command loads grpc when it connects, ``serve`` the host when it runs."""
    probe = (
        "import sys\n"
        "from ether_host.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('grpc', 'anyio', 'rich', 'ether_host.main') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.splitlines()[-1] == "[]", done.stdout
