"""A `serial` test never runs under an xdist worker: tests/conftest.py skips it there (tests/serial_pass.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from serial_pass import SERIAL_SKIP, skip_serial_in_workers


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
