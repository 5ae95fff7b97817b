"""The compactor's warm-up compacts a sample of every built-in compactor, and never stops a start.

If a sample stopped compacting (a format the compactor no longer reads), the warm-up would warm
only the dead-letter path and the first real tool result of that kind would pay its first use again.
"""

from __future__ import annotations

import logging

import pytest

from schemas import tokens
from schemas.tools import TOOL_COMPACTORS
from services.compactor.stream import Compacted
from services.compactor.warm import SAMPLES, compact_samples, warm_up
from services.runtime.warmup import run_steps


def test_every_sample_compacts_and_every_builtin_compactor_has_one() -> None:
    assert set(TOOL_COMPACTORS.values()) <= set(SAMPLES)
    results = compact_samples()
    assert set(results) == set(SAMPLES)
    for tool, result in results.items():
        assert isinstance(result, Compacted), (tool, result)
        assert result.event.tokens <= result.event.budget


def test_warm_up_loads_the_encoding_and_times_each_step() -> None:
    spent = warm_up()
    assert set(spent) == {"tokens_s", "compactors_s"}
    assert tokens.encoding.cache_info().currsize == 1


def test_a_failing_step_is_logged_and_the_next_one_still_runs(caplog: pytest.LogCaptureFixture) -> None:
    ran: list[str] = []

    def broken() -> None:
        raise ConnectionError("broker away")

    with caplog.at_level(logging.WARNING):
        spent = run_steps({"broken": broken, "next": lambda: ran.append("next")}, "test")
    assert ran == ["next"] and set(spent) == {"broken_s", "next_s"}
    assert any("broker away" in str(getattr(r, "error", "")) for r in caplog.records)
