"""The `serial` marker under pytest-xdist: a worker skips a serial test; `make test` runs it alone afterwards.

A serial test restarts a process the other tests share or bounds a wall-clock time that parallel load would
break. Kept apart from tests/conftest.py so tests can import it by a name no other module has.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

SERIAL_SKIP = "serial: run alone, after the parallel pass (`make test`), never under pytest -n"


def skip_serial_in_workers(config: Any, items: Iterable[Any]) -> None:
    """Under an xdist worker (the only processes that carry `workerinput`), skip every `serial` test."""
    if not hasattr(config, "workerinput"):
        return
    for item in items:
        if item.get_closest_marker("serial") is not None:
            item.add_marker(pytest.mark.skip(reason=SERIAL_SKIP))
