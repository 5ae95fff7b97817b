"""Concurrent recall through history: an open incident holding most of what the query's closest past incidents
show shares its cause, though the two share little directly (pure; `schemas.recall_scoring.same_cause`)."""

from __future__ import annotations

from schemas.recall_scoring import (
    HISTORY_MIN,
    Candidate,
    Rarity,
    explained,
    history_signature,
    pick,
    shares_cause,
)

HOUR = 3600.0
NOW = 1000 * HOUR
SYMPTOM = "error request to heap failed: deadline exceeded after <n>"  # the look-alike cause shows it too
A, B, C = ("error quota stale in module m8 after <n>", "fatal c8 quota invariant broken at <hex>",
           "error worker <pod> gave up on quota batch <n>")  # fmt: skip
LOOK_ALIKE = "error lock expired in module m9 after <n>"
RARITY = Rarity(100, {SYMPTOM: 6, A: 4, B: 4, C: 4, LOOK_ALIKE: 1, "reason:BackOff": 40})


def incident(thread: str, errors: tuple[str, ...], *, opened: float, resolved: float | None = None,
             service: str = "svc-048", reasons: dict[str, int] | None = None) -> Candidate:  # fmt: skip
    return Candidate(
        thread_ts=thread, labels={"alertname": "HighErrorRate", "service": service}, channel="C0INC",
        private=False, opened_at=opened, resolved_at=resolved, patterns=dict.fromkeys(errors, 3),
        error_patterns=frozenset(errors), reasons=reasons or {}, shapes=frozenset(), lexemes=frozenset(),
    )  # fmt: skip


def past(thread: str, errors: tuple[str, ...], days_ago: int, **kw: object) -> Candidate:
    opened = NOW - days_ago * 24 * HOUR
    return incident(thread, errors, opened=opened, resolved=opened + HOUR, **kw)  # type: ignore[arg-type]


HISTORY = [  # the cause's past incidents each show a part of its errors; the look-alike's shows the symptom
    past("p1", (SYMPTOM, A, B), 9), past("p2", (SYMPTOM, B, C), 8), past("p3", (SYMPTOM, A, C), 7),
    past("p4", (A, B, C), 6), past("p5", (SYMPTOM, LOOK_ALIKE), 5),
]  # fmt: skip


def concurrent(q: Candidate, candidates: list[Candidate]) -> list[str]:
    hits = explained(q, pick(q, candidates, RARITY), RARITY)
    return [h.thread_ts for h in hits if h.kind == "concurrent"]


def test_two_parts_of_one_causes_errors_are_one_outage_through_its_past_incidents() -> None:
    query = incident("q", (SYMPTOM, A), opened=NOW)
    other = incident("pay", (SYMPTOM, C), opened=NOW - 1200, service="svc-052")
    assert not shares_cause(query, other, RARITY)  # directly: one symptom a look-alike shows too
    hits = explained(query, pick(query, [*HISTORY, other], RARITY), RARITY)
    assert [(h.thread_ts, h.kind) for h in hits][:1] == [("pay", "concurrent")]
    assert any("closest past incidents" in r for r in hits[0].reasons)


def test_a_look_alike_open_beside_it_holds_only_the_symptom_and_is_not_flagged() -> None:
    query = incident("q", (SYMPTOM, A), opened=NOW)
    look_alike = incident("other", (SYMPTOM, LOOK_ALIKE), opened=NOW - 600)
    assert concurrent(query, [*HISTORY, look_alike]) == []


def test_a_young_history_vouches_for_nothing() -> None:
    query = incident("q", (SYMPTOM, A), opened=NOW)
    other = incident("pay", (SYMPTOM, C), opened=NOW - 1200, service="svc-052")
    assert history_signature(HISTORY[: HISTORY_MIN - 1]) == frozenset()
    assert concurrent(query, [*HISTORY[: HISTORY_MIN - 1], other]) == []


def test_what_the_signature_holds_of_it_must_be_more_than_chance() -> None:
    """A pod reason most past incidents show (BackOff, in 40% of the fleet) is in the signature; an open
    incident showing only it is not part of the outage."""
    reasons = {"BackOff": 2}
    history = [
        past(p.thread_ts, tuple(p.error_patterns), 9 - k, reasons=reasons) for k, p in enumerate(HISTORY)
    ]
    query = incident("q", (SYMPTOM, A), opened=NOW)  # asked no pod events: only history ties the two
    backoff_only = Candidate(
        **{**incident("db", (), opened=NOW - 600, service="db").__dict__, "reasons": reasons}
    )
    assert "reason:BackOff" in history_signature(history)
    assert concurrent(query, [*history, backoff_only]) == []
    rare = Rarity(100, {**RARITY.df, "reason:BackOff": 3})  # the same reason, were it rare, would tie them
    assert [h.kind for h in explained(query, pick(query, [*history, backoff_only], rare), rare)][:1] == [
        "concurrent"
    ]
