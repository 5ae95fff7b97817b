"""CONTRIBUTING.md's two paths (a Slack message to its row, a tool result to its compact row) stay true:
every listed file exists and defines the listed function or method, and each path holds at most 8 files."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from services.runtime.settings import REPO_ROOT

STEP = re.compile(r"^\d+\. `([^`]+\.py)` `([A-Za-z_][\w.]*)`", re.MULTILINE)
MAX_FILES = 8


def paths(text: str) -> list[list[tuple[str, str]]]:
    """The numbered lists of the "Two paths" section, one per path."""
    section = text.split("## Two paths, file by file", 1)[1].split("\n## ", 1)[0]
    return [STEP.findall(block) for block in section.split("\n\n") if STEP.search(block)]


def defines(path: Path, dotted: str) -> bool:
    """`f` or `Class.method` is defined at the top of the module (a class, a function, an assignment)."""
    body = ast.parse(path.read_text()).body
    for part in dotted.split("."):
        found = [
            n
            for n in body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == part
        ]
        if not found:
            return False
        body = getattr(found[0], "body", [])
    return True


def missing(root: Path, steps: list[tuple[str, str]]) -> list[str]:
    return [f"{f} {name}" for f, name in steps if not (root / f).is_file() or not defines(root / f, name)]


def test_both_paths_are_listed_within_8_files_and_every_step_exists() -> None:
    listed = paths((REPO_ROOT / "CONTRIBUTING.md").read_text())
    assert len(listed) == 2 and all(listed)
    for steps in listed:
        assert len({f for f, _ in steps}) <= MAX_FILES, steps
        assert not missing(REPO_ROOT, steps)


def test_a_vanished_function_or_file_is_caught(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("class A:\n    def b(self) -> None: ...\n\ndef c() -> None: ...\n")
    steps = [("m.py", "A.b"), ("m.py", "c"), ("m.py", "A.gone"), ("m.py", "gone"), ("gone.py", "c")]
    assert missing(tmp_path, steps) == ["m.py A.gone", "m.py gone", "gone.py c"]
