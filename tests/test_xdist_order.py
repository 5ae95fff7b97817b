"""The parallel pass hands the heavy modules out first, each module's tests kept together and in order."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from xdist_order import heavy_modules_first

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Item:
    nodeid: str
    markers: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


def test_heavy_modules_go_first_then_the_stack_then_the_rest() -> None:
    items = [
        Item("tests/a.py::quick"),
        Item("tests/b.py::on_stack", {"stack"}),
        Item("tests/b.py::also_on_stack", {"stack"}),
        Item("tests/c.py::quick"),
        Item("tests/c.py::slow", {"slow", "stack"}),
        Item("tests/d.py::browser", {"browser"}),
        Item("tests/e.py::reliability_fast", {"reliability", "fast", "stack"}),
    ]
    heavy_modules_first(items)
    assert [i.nodeid for i in items] == [
        "tests/c.py::quick",
        "tests/c.py::slow",
        "tests/d.py::browser",
        "tests/e.py::reliability_fast",
        "tests/b.py::on_stack",
        "tests/b.py::also_on_stack",
        "tests/a.py::quick",
    ]


def test_the_makefile_keeps_that_order() -> None:
    """Without --no-loadscope-reorder, xdist sorts modules by test count and this order is lost."""
    makefile = (ROOT / "Makefile").read_text()
    parallel = next(line for line in makefile.splitlines() if "-n $(TEST_WORKERS)" in line)
    assert "--dist loadscope" in parallel and "--no-loadscope-reorder" in parallel
