"""Issue 35: the production CLI (`incident-memory-service`, services/cli.py) reaches no dev tool by any
means, and the dev CLI (`incident-memory`, deploy/local/devcli.py) adds up/down/demo/bench over it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from deploy.local.devcli import COMMANDS, DEV_SUBCOMMANDS
from services.cli import SUBCOMMANDS
from services.runtime.settings import REPO_ROOT

DEV_ROOTS = ("deploy", "benchmarks")
KNOWN: set[str] = set()  # production strings that name a dev module: none


def test_the_dev_commands_are_only_in_the_dev_cli() -> None:
    assert set(DEV_SUBCOMMANDS) == {"up", "down", "demo", "bench"}
    assert not set(DEV_SUBCOMMANDS) & set(SUBCOMMANDS)
    assert set(COMMANDS) == set(SUBCOMMANDS) | set(DEV_SUBCOMMANDS)
    assert DEV_SUBCOMMANDS["demo"].load().__name__ == "deploy.local.demo"
    assert DEV_SUBCOMMANDS["bench"].load().__name__ == "benchmarks.run"


def test_every_production_subcommand_loads_without_a_dev_module() -> None:
    code = (
        "import sys\nfrom services.cli import SUBCOMMANDS\n"
        "names = {n: c.load().__name__ for n, c in SUBCOMMANDS.items()}\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {DEV_ROOTS!r}))\n"
        "print(len(names))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=240, cwd=REPO_ROOT, check=True
    )
    loaded, count = done.stdout.strip().splitlines()
    assert loaded == "[]" and int(count) == len(SUBCOMMANDS)


def _dev_names_in_strings(path: Path, root: Path = REPO_ROOT) -> list[str]:
    """String constants that name a dev module (`deploy.local.x`, `benchmarks.run`): an import by name
    (importlib, a `module:attr` setting default) that import-linter cannot see."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            head = node.value.split(":")[0].strip()
            if head.split(".")[0] in DEV_ROOTS and "." in head and " " not in head:
                found.append(f"{path.relative_to(root)}: {node.value!r}")
    return found


def test_no_production_module_names_a_dev_module_in_a_string() -> None:
    files = sorted((REPO_ROOT / "services").rglob("*.py")) + sorted((REPO_ROOT / "schemas").rglob("*.py"))
    found = {hit for path in files for hit in _dev_names_in_strings(path)}
    assert found == KNOWN, found - KNOWN


def test_a_dev_module_named_in_a_string_is_caught(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text('import importlib\n\nimportlib.import_module("deploy.local.demo")\n')
    assert _dev_names_in_strings(planted, tmp_path) == ["planted.py: 'deploy.local.demo'"]
