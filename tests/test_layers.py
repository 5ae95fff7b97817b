"""The layers are enforced: `lint-imports` (import-linter, `make lint`) keeps the contracts in pyproject.toml,
and fails when one is broken. Run on a copy of the packages, with a violation planted in it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from services.runtime.settings import REPO_ROOT

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
PACKAGES = ("schemas", "services", "deploy", "benchmarks")


def _tree(tmp_path: Path) -> Path:
    for name in PACKAGES:
        shutil.copytree(
            REPO_ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "*.json")
        )
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )


def _contracts() -> int:
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    return len(config["tool"]["importlinter"]["contracts"])


def test_the_tree_keeps_every_contract(tmp_path: Path) -> None:
    result = _lint(_tree(tmp_path))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "BROKEN" not in result.stdout and result.stdout.count("KEPT") == _contracts()


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("services/agent/_planted.py", "from services.projector import sql\n", "no service imports another"),
        (
            "services/telemetry_mcp/_planted.py",
            "from services.agent import config\n",
            "no service imports another",
        ),
        ("services/voice/_planted.py", "from services.agent import graph\n", "no service imports another"),
        (
            "services/ingest/_planted.py",
            "import deploy.local.seed\n",
            "Production never imports the dev tools",
        ),
        ("schemas/_planted.py", "from services.runtime import errors\n", "One way down"),
        ("services/boundary/_planted.py", "from services.runtime import errors\n", "One way down"),
        ("services/boundary/_planted2.py", "from services.compaction import fit\n", "One way down"),
        (
            "services/compaction/_planted.py",
            "from services.compactor import stream\n",
            "compaction library is pure",
        ),
        ("services/compaction/_planted2.py", "import confluent_kafka\n", "compaction library is pure"),
        ("services/compaction/_planted3.py", "import faust\n", "compaction library is pure"),
        (
            "services/_planted.py",
            "def bench() -> None:\n    import benchmarks.run  # noqa: F401\n",
            "Production never imports the dev tools",
        ),
        (
            "services/runtime/_planted.py",
            "from deploy.local import ports\n",
            "Production never imports the dev tools",
        ),
    ],
)
def test_breaking_a_layer_fails_the_lint(tmp_path: Path, module: str, line: str, contract: str) -> None:
    root = _tree(tmp_path)
    (root / module).write_text(f'"""A planted violation."""\n\n{line}')
    result = _lint(root)
    assert result.returncode != 0
    said = " ".join(result.stdout.split())
    assert "BROKEN" in said and contract in said, result.stdout[-3000:]
    assert f"{module.removesuffix('.py').replace('/', '.')} ->" in said  # the planted import is named
