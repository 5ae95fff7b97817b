"""Load on loopback: signed Slack requests at 1,000 req/s against the real server and broker, none lost.

This variant (2 s) guards correctness under load: every request acked, every acked event on the topics.
The rate itself is a speed target, so it lives with the fault suite (tests/reliability/test_ingest_rate.py,
`make test-reliability`) and in `incident-memory bench --only ingest`, never in `make test`.
"""

from __future__ import annotations

from benchmarks.bench_ingest import run
from services.runtime.settings import Settings


def test_two_seconds_at_1000_rps_lose_nothing(stack: Settings) -> None:
    result = run(stack, duration_s=2.0, rate=1000.0)
    assert result["requests"] == 2000
    assert result["non_200"] == 0, result
    assert result["events_expected"] == 2000 + 2000 // 50
    assert result["events_lost"] == 0, result
