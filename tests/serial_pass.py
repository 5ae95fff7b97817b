"""The `serial` marker under pytest-xdist: a worker skips a serial test; `make test` runs it alone afterwards.

A serial test restarts a process the other tests share or bounds a wall-clock time that parallel load would
break. The serial pass collects only the files whose text says `pytest.mark.serial` (Makefile: SERIAL_FILES),
not the whole suite a second time; a serial test marked any other way is refused at collection, or it would
run in neither pass. Kept apart from tests/conftest.py so tests can import it by a name no other module has.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

SERIAL_SKIP = "serial: run alone, after the parallel pass (`make test`), never under pytest -n"
SERIAL_MARK_TEXT = "pytest.mark.serial"  # what the Makefile greps for (SERIAL_FILES)


def skip_serial_in_workers(config: Any, items: Iterable[Any]) -> None:
    """Under an xdist worker (the only processes that carry `workerinput`), skip every `serial` test."""
    if not hasattr(config, "workerinput"):
        return
    for item in items:
        if item.get_closest_marker("serial") is not None:
            item.add_marker(pytest.mark.skip(reason=SERIAL_SKIP))


def refuse_hidden_serial_marks(items: Iterable[Any]) -> None:
    """A `serial` test whose file does not say `pytest.mark.serial` is a usage error (see the docstring)."""
    for item in items:
        if (
            item.get_closest_marker("serial") is not None
            and SERIAL_MARK_TEXT not in Path(item.path).read_text()
        ):
            raise pytest.UsageError(
                f"{item.nodeid} is serial, but its file does not say {SERIAL_MARK_TEXT}: make test's serial pass "
                "collects only the files that do (Makefile: SERIAL_FILES), so it would run in neither pass"
            )
