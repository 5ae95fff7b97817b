"""A `serial` test never runs under an xdist worker: tests/conftest.py skips it there (tests/serial_pass.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from serial_pass import SERIAL_MARK_TEXT, SERIAL_SKIP, refuse_hidden_serial_marks, skip_serial_in_workers


class _Item:
    """What the hook reads of a collected test: its marks and its fixture closure."""

    def __init__(self, *marks: pytest.MarkDecorator) -> None:
        self.marks = [m.mark for m in marks]
        self.fixturenames: tuple[str, ...] = ()

    def get_closest_marker(self, name: str) -> Any:
        return next((m for m in self.marks if m.name == name), None)

    def add_marker(self, marker: pytest.MarkDecorator) -> None:
        self.marks.append(marker.mark)


def _skips(item: _Item) -> list[str]:
    return [m.kwargs["reason"] for m in item.marks if m.name == "skip"]


def _collect(config: object, *items: _Item) -> None:
    skip_serial_in_workers(config, list(items))


def test_a_worker_skips_serial_tests_only() -> None:
    serial, other = _Item(pytest.mark.serial), _Item(pytest.mark.slow)
    _collect(SimpleNamespace(workerinput={"workerid": "gw0"}), serial, other)
    assert _skips(serial) == [SERIAL_SKIP]
    assert _skips(other) == []


def test_the_serial_pass_runs_them() -> None:
    serial = _Item(pytest.mark.serial)
    _collect(SimpleNamespace(), serial)  # no workerinput: the controller, or a run without -n
    assert _skips(serial) == []


class _Located(_Item):
    def __init__(self, path: Any, *marks: pytest.MarkDecorator) -> None:
        super().__init__(*marks)
        self.path, self.nodeid = path, f"{path.name}::t"


def test_a_serial_test_marked_where_the_serial_pass_cannot_see_it_is_refused(tmp_path: Any) -> None:
    hidden = tmp_path / "test_hidden.py"
    hidden.write_text("import pytest\nSERIAL = pytest.mark.__getattr__('serial')\n")
    visible = tmp_path / "test_visible.py"
    visible.write_text("import pytest\n@pytest.mark.serial\ndef test_t(): ...\n")
    refuse_hidden_serial_marks([_Located(visible, pytest.mark.serial), _Located(hidden, pytest.mark.slow)])
    with pytest.raises(pytest.UsageError, match=r"test_hidden\.py::t is serial"):
        refuse_hidden_serial_marks([_Located(hidden, pytest.mark.serial)])


def test_the_makefile_serial_pass_greps_for_that_text() -> None:
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    assert f"grep -rl --include='test_*.py' '{SERIAL_MARK_TEXT}' tests" in makefile
    serial_pass = next(line for line in makefile.splitlines() if 'and serial"' in line)
    assert "$(SERIAL_FILES)" in serial_pass
