"""docs/invariants.md names test functions (`path::test_name`), and each one exists: the page cannot drift."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "invariants.md"
NAMED = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")
ANY_TEST_PATH = re.compile(r"`(tests/[^`]*)`")
SECTION = re.compile(r"^## (\d+)\. ", re.MULTILINE)


def defined_tests(path: Path) -> set[str]:
    """The test functions a pytest module defines at its top level (plain or async)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    }


def sections(text: str) -> dict[int, str]:
    """Invariant number -> the text of its section."""
    marks = list(SECTION.finditer(text))
    ends = [m.start() for m in marks[1:]] + [len(text)]
    return {int(m.group(1)): text[m.end() : end] for m, end in zip(marks, ends, strict=True)}


def test_every_named_test_function_exists() -> None:
    text = DOC.read_text()
    named = NAMED.findall(text)
    assert named, "docs/invariants.md names no test function"
    missing = []
    for path, name in named:
        file = ROOT / path
        if not file.is_file() or name not in defined_tests(file):
            missing.append(f"{path}::{name}")
    assert not missing, f"docs/invariants.md names tests that do not exist: {missing}"


def test_tests_are_named_by_function_never_by_folder_or_file() -> None:
    vague = [ref for ref in ANY_TEST_PATH.findall(DOC.read_text()) if not NAMED.fullmatch(f"`{ref}`")]
    assert not vague, f"name the test function (`path::test_name`), not {vague}"


def test_each_of_the_twelve_invariants_names_its_tests() -> None:
    by_number = sections(DOC.read_text())
    assert sorted(by_number) == list(range(1, 13))
    empty = [number for number, body in by_number.items() if not NAMED.search(body)]
    assert not empty, f"invariants naming no test function: {empty}"


def test_the_check_fails_on_a_name_that_does_not_exist(tmp_path: Path) -> None:
    """The parser finds what it must: a renamed test would be reported, a real one would not."""
    module = tmp_path / "test_x.py"
    module.write_text(
        "def test_real():\n    pass\n\nasync def test_async():\n    pass\n\ndef helper():\n    pass\n"
    )
    assert defined_tests(module) == {"test_real", "test_async"}
    assert NAMED.findall("`tests/a/test_b.py::test_c` and `tests/a/`") == [("tests/a/test_b.py", "test_c")]
    assert ANY_TEST_PATH.findall("`tests/a/`") == ["tests/a/"]
