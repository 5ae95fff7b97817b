"""`integration` tests run only when asked for (`make test-integration`, or `-m integration`).

`make test` selects with its own `-m` expression, which replaces any `-m` in addopts, so the marker
alone cannot keep these minutes-long live scenarios out of it: they are deselected here unless the
marker expression names `integration`. The marker is registered here, not in pyproject.toml: the
Makefile's venv target depends on pyproject.toml, and touching it makes the next `make` reinstall the venv.
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "integration: live scenario of `make test-integration`; deselected unless -m names it"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "integration" in (config.getoption("markexpr", "") or ""):
        return
    skipped = [item for item in items if item.get_closest_marker("integration") is not None]
    if skipped:
        config.hook.pytest_deselected(items=skipped)
        items[:] = [item for item in items if item.get_closest_marker("integration") is None]
