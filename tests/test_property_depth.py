"""The deep run draws every example the heavy property tests were written with; `make test` a share."""

from __future__ import annotations

import pytest
from property_depth import DEEP_ENV, examples


def test_make_test_draws_its_share(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DEEP_ENV, raising=False)
    assert examples(deep_run=3000, make_test=600) == 600
    assert examples(deep_run=100, make_test=600) == 100  # never more than the deep run


def test_the_deep_run_draws_them_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEEP_ENV, "1")
    assert examples(deep_run=3000, make_test=600) == 3000
