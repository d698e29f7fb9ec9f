"""What a Go or TypeScript build is keyed on (supervisor/install.py, ``_files``): the sources of
the agent's folder in a stable order, never what the build tools themselves write there
(node_modules, dist, .git), at any depth. A source file added or changed changes the key, so
the next deploy builds again; a file npm or tsc wrote does not.

A pure function over a folder, so the test calls it directly."""

from __future__ import annotations

from pathlib import Path

from ether_host.supervisor.install import _files

SOURCES = (".ts", ".mts", "tsconfig.json")


def _tree(root: Path, files: list[str]) -> None:
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)


def test_sources_in_name_order_and_nothing_the_tools_wrote(tmp_path: Path) -> None:
    """Sources at any depth, sorted; none under node_modules, dist or .git (at the top or
    deeper), no other suffix, no folder that merely ends like a source."""
    _tree(
        tmp_path,
        [
            "tsconfig.json",
            "src/b.ts",
            "src/a.ts",
            "src/deep/c.mts",
            "src/readme.md",
            "node_modules/pkg/index.ts",
            "node_modules/.bin/tsc",
            "dist/agent.ts",
            ".git/hooks/x.ts",
            "src/vendor/node_modules/y.ts",
            "src/dist/z.ts",
        ],
    )
    (tmp_path / "odd.ts").mkdir()  # a folder, not a file
    found = [str(p.relative_to(tmp_path)) for p in _files(tmp_path, SOURCES)]
    assert found == ["src/a.ts", "src/b.ts", "src/deep/c.mts", "tsconfig.json"]


def test_a_symlinked_folder_is_not_followed(tmp_path: Path) -> None:
    """A symlink to a folder (npm links "file:" packages so) adds nothing; a symlink to a
    source file counts as the file."""
    outside = tmp_path / "outside"
    _tree(outside, ["lib.ts"])
    agent = tmp_path / "agent"
    _tree(agent, ["src/main.ts"])
    (agent / "src" / "linked").symlink_to(outside, target_is_directory=True)
    (agent / "src" / "alias.ts").symlink_to(outside / "lib.ts")
    found = [str(p.relative_to(agent)) for p in _files(agent, SOURCES)]
    assert found == ["src/alias.ts", "src/main.ts"]
