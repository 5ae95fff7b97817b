"""The retry cache: bounded in time and in size."""

from __future__ import annotations

from services.ingest.dedupe import TtlSet


def test_entries_expire_after_the_ttl() -> None:
    now = [0.0]
    seen = TtlSet(ttl_s=60, max_entries=10, clock=lambda: now[0])
    seen.add("Ev1")
    now[0] = 59.0
    assert "Ev1" in seen
    now[0] = 61.0
    assert "Ev1" not in seen and len(seen) == 0


def test_size_is_bounded_oldest_first() -> None:
    seen = TtlSet(ttl_s=3600, max_entries=3)
    for i in range(5):
        seen.add(f"Ev{i}")
    assert len(seen) == 3
    assert "Ev0" not in seen and "Ev1" not in seen and "Ev4" in seen
