"""Similarity that says why, and the visibility rule (pure)."""

from __future__ import annotations

from schemas.recall import may_see, visible_channels
from schemas.recall_scoring import Candidate, Rarity, rank

HOUR = 3600.0


def profile(thread: str, *, service: str = "checkout-api", alert: str = "KubePodOOMKilled",
            patterns: dict[str, int] | None = None, errors: tuple[str, ...] = (), reasons: dict[str, int] | None = None,
            opened: float = 0.0, resolved: float | None = 10.0, decisions: tuple[str, ...] = ()) -> Candidate:  # fmt: skip
    return Candidate(
        thread_ts=thread, labels={"alertname": alert, "service": service, "namespace": "shop"}, channel="C0INC",
        private=False, opened_at=opened, resolved_at=resolved, patterns=patterns or {}, error_patterns=frozenset(errors),
        reasons=reasons or {}, shapes=frozenset(), lexemes=frozenset(), decisions=decisions,
    )  # fmt: skip


OOM = "fatal error: js heap out of memory"
REFUSED = "connect econnrefused <ip>"
COMMON = "get /health <n>"


def test_a_look_alike_with_other_patterns_never_ranks_above_the_true_match() -> None:
    now = 100 * HOUR
    query = profile(
        "q", patterns={OOM: 198, COMMON: 50}, errors=(OOM,), reasons={"OOMKilling": 3}, opened=now
    )
    true = profile("true", service="payments-api", alert="ContainerRestarts", patterns={OOM: 212, COMMON: 9},
                   errors=(OOM,), reasons={"OOMKilling": 2}, decisions=("rolled back to 3.13.2",))  # fmt: skip
    alike = profile("alike", patterns={REFUSED: 300, COMMON: 40}, errors=(REFUSED,), reasons={"BackOff": 4})
    rarity = Rarity(100, {OOM: 3, REFUSED: 20, COMMON: 90, "reason:OOMKilling": 4, "reason:BackOff": 30})
    hits = rank(query, [alike, true], rarity)
    assert [h.thread_ts for h in hits] == ["true", "alike"]
    assert hits[0].kind == "historical"
    assert any(f"`{OOM}` x198 here, x212 there" in r for r in hits[0].reasons)
    assert "resolved by: rolled back to 3.13.2" in hits[0].reasons


def test_concurrent_needs_the_window_and_a_shared_cause() -> None:
    now = 100 * HOUR
    query = profile("q", patterns={OOM: 1}, errors=(OOM,), opened=now)
    same_cause = profile(
        "pay", service="payments", patterns={OOM: 5}, errors=(OOM,), opened=now - 1200, resolved=None
    )
    other_cause = profile(
        "db", service="db", patterns={REFUSED: 5}, errors=(REFUSED,), opened=now - 600, resolved=None
    )
    old = profile("old", patterns={OOM: 5}, errors=(OOM,), opened=now - 30 * HOUR, resolved=now - 29 * HOUR)
    hits = rank(query, [same_cause, other_cause, old], Rarity(10, {OOM: 2, REFUSED: 2}))
    assert [(h.thread_ts, h.kind) for h in hits] == [("pay", "concurrent"), ("old", "historical")]


def test_visibility_same_channel_or_mapped_public_never_another_private() -> None:
    groups = (frozenset({"C0PAY", "C0CHECKOUT"}),)
    assert may_see("C0CHECKOUT", "C0CHECKOUT", True, ())
    assert not may_see("C0CHECKOUT", "C0PAY", False, ())  # not mapped together: not seen
    assert may_see("C0CHECKOUT", "C0PAY", False, groups)
    assert not may_see("C0CHECKOUT", "C0PAY", True, groups)  # private: its own channel only
    assert not may_see("C0CHECKOUT", None, False, groups)  # channel unknown: fails closed
    assert not may_see(None, "C0PAY", False, groups)
    assert visible_channels("C0CHECKOUT", groups) == ["C0CHECKOUT", "C0PAY"]
