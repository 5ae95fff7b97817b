"""Ingest holds 1,000 signed Slack requests a second for ten seconds on loopback, none lost.

A speed target, so it is not in `make test` (timed assertions belong with the benchmarks): it runs with
`make test-reliability`, beside `incident-memory bench --only ingest` (BENCHMARKS.md).
"""

from __future__ import annotations

import pytest

from benchmarks.bench_ingest import run
from services.runtime.settings import Settings

pytestmark = pytest.mark.reliability


def test_ten_seconds_hold_1000_rps_with_no_event_lost(stack: Settings) -> None:
    result = run(stack, duration_s=10.0, rate=1000.0)
    assert result["non_200"] == 0, result
    assert result["events_lost"] == 0, result
    assert result["acked_rps"] >= 900, result
