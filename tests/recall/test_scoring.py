"""Similarity that says why, and the visibility rule (pure)."""

from __future__ import annotations

import math

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from schemas.recall import may_see, visible_channels
from schemas.recall_scoring import Candidate, Hit, Rarity, explained, pick, weighted_jaccard

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


def rank(q: Candidate, candidates: list[Candidate], rarity: Rarity, k: int = 5) -> list[Hit]:
    """What recall does after its reads: pick, then explain the picked (from their own profiles)."""
    return explained(q, pick(q, candidates, rarity, k=k), rarity)


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


def test_the_first_two_incidents_of_a_deployment_open_together_on_one_error_are_concurrent() -> None:
    """A young history where every incident shows the key: sharing it is weak evidence, not none (a weight of
    log(N/df) is zero there, and the first outage a deployment sees would never be flagged)."""
    now = 100 * HOUR
    query = profile("q", patterns={OOM: 3}, errors=(OOM,), opened=now)
    pay = profile(
        "pay", service="payments", patterns={OOM: 5}, errors=(OOM,), opened=now - 1200, resolved=None
    )
    hits = rank(query, [pay], Rarity(2, {OOM: 2}))
    assert [(h.thread_ts, h.kind) for h in hits] == [("pay", "concurrent")]


def test_concurrent_without_comparable_logs_needs_the_reasons_on_the_same_alert_or_service() -> None:
    """One side has no logs: pod reasons most of the fleet shows (a pair of them shared by chance) flag only
    on the same alert or service, and only when most of each side's reasons are the other's."""
    now = 100 * HOUR
    two = {"FailedMount": 2, "BackOff": 1}
    query = profile("q", reasons=two, opened=now, resolved=None)  # no logs asked
    same_alert = profile("pay", service="payments", patterns={OOM: 5}, errors=(OOM,),
                         reasons={"FailedMount": 4, "BackOff": 3}, opened=now - 1200, resolved=None)  # fmt: skip
    elsewhere = profile("db", service="db", alert="TargetDown", reasons={"FailedMount": 1, "BackOff": 2},
                        opened=now - 600, resolved=None)  # fmt: skip
    rarity = Rarity(100, {OOM: 2, "reason:FailedMount": 30, "reason:BackOff": 60})  # together by chance: 18%
    hits = rank(query, [same_alert, elsewhere], rarity)
    assert [(h.thread_ts, h.kind) for h in hits] == [("pay", "concurrent")]


def test_concurrent_without_comparable_logs_by_reasons_rare_together_on_any_alert_or_service() -> None:
    """Pod reasons an unrelated incident shows together by chance less often than REASON_CHANCE (a registry
    down: ImagePullBackOff with FailedScheduling on two services) name a shared cause whatever the labels;
    one of them alone, however rare, does not."""
    now = 100 * HOUR
    query = profile("q", reasons={"ImagePullBackOff": 3, "FailedScheduling": 2}, opened=now, resolved=None)
    both = profile("pay", service="payments", alert="TargetDown", opened=now - 1200, resolved=None,
                   reasons={"ImagePullBackOff": 5, "FailedScheduling": 1})  # fmt: skip
    one = profile("db", service="db", alert="TargetDown", opened=now - 600, resolved=None,
                  reasons={"ImagePullBackOff": 4})  # fmt: skip
    rarity = Rarity(100, {"reason:ImagePullBackOff": 15, "reason:FailedScheduling": 20})  # together: 3%
    hits = rank(query, [both, one], rarity)
    assert [(h.thread_ts, h.kind) for h in hits] == [("pay", "concurrent")]


def test_concurrent_without_comparable_logs_when_one_sides_reasons_are_all_the_others() -> None:
    """The side that saw fewer pod reasons may have missed one: all of its reasons held by the other (and a
    quarter of the other's by it) is enough on the same alert, though the other's own reason is rarer; a
    reason of its own that the other lacks is a difference."""
    now = 100 * HOUR
    query = profile("q", reasons={"FailedMount": 2}, opened=now, resolved=None)  # no logs asked
    more = profile("pay", service="payments", patterns={OOM: 5}, errors=(OOM,), opened=now - 1200, resolved=None,
                   reasons={"FailedMount": 4, "FailedCreatePodSandBox": 1})  # fmt: skip
    rarity = Rarity(
        100, {OOM: 2, "reason:FailedMount": 20, "reason:FailedCreatePodSandBox": 8, "reason:Evicted": 9}
    )
    assert [(h.thread_ts, h.kind) for h in rank(query, [more], rarity)] == [("pay", "concurrent")]
    own = at(query, reasons={"FailedMount": 2, "Evicted": 1})  # neither side's reasons all the other's
    assert rank(own, [more], rarity) == []


def test_reasons_never_tie_two_incidents_that_each_name_another_place_in_trouble() -> None:
    """Pod reasons both show, on the same alert, flag a concurrent incident; not when one reports its node
    NotReady and the other fails to reach its database: two places in trouble, two outages."""
    now = 100 * HOUR
    two = {"ImagePullBackOff": 2, "FailedScheduling": 1}
    query = profile("q", reasons=two, opened=now, resolved=None)
    other = profile("pay", service="payments", patterns={OOM: 5}, errors=(OOM,), reasons=two,
                    opened=now - 1200, resolved=None)  # fmt: skip
    rarity = Rarity(100, {OOM: 2, "reason:ImagePullBackOff": 15, "reason:FailedScheduling": 20})
    assert [h.kind for h in rank(query, [other], rarity)] == ["concurrent"]
    node, db = frozenset({"ip-10-0-3-17.ec2.internal"}), frozenset({"pg-orders"})
    assert [h.kind for h in rank(at(query, nodes=node), [other], rarity)] == ["concurrent"]  # one place only
    assert rank(at(query, nodes=node), [at(other, dependencies=db)], rarity) == []


def at(c: Candidate, **changes: object) -> Candidate:
    return Candidate(**{**c.__dict__, **changes})


def test_concurrent_by_a_shared_troubled_node_or_failing_dependency_whatever_the_patterns() -> None:
    """Two services failing on one dead node, or against one dead database, log different errors: the shared
    locus is the shared cause. Absent a shared locus, the same incidents are not flagged."""
    now = 100 * HOUR
    query = profile("q", patterns={OOM: 9}, errors=(OOM,), opened=now, resolved=None)
    other = profile("pay", service="payments", alert="TargetDown", patterns={REFUSED: 30}, errors=(REFUSED,),
                    opened=now - 1200, resolved=None)  # fmt: skip
    rarity = Rarity(100, {OOM: 2, REFUSED: 2})
    assert rank(query, [other], rarity) == []
    node = "ip-10-0-3-17.ec2.internal"
    on_node = rank(at(query, nodes=frozenset({node})), [at(other, nodes=frozenset({node}))], rarity)
    assert [(h.thread_ts, h.kind) for h in on_node] == [("pay", "concurrent")]
    assert any(node in r for r in on_node[0].reasons)
    db = frozenset({"pg-orders"})
    on_db = rank(at(query, dependencies=db), [at(other, dependencies=db)], rarity)
    assert [(h.thread_ts, h.kind) for h in on_db] == [("pay", "concurrent")]
    assert any("pg-orders" in r for r in on_db[0].reasons)
    elsewhere = rank(
        at(query, nodes=frozenset({node})), [at(other, nodes=frozenset({"ip-10-0-4-17"}))], rarity
    )
    assert elsewhere == []


def test_concurrent_by_a_node_in_trouble_where_the_others_pods_ran() -> None:
    """One incident reports the node NotReady; the other's pods ran there but it asked for no node events: the
    same place in trouble. Pods merely on one (healthy) node, or on another node, say nothing."""
    now = 100 * HOUR
    node = "ip-10-0-3-17.ec2.internal"
    query = profile("q", patterns={OOM: 9}, errors=(OOM,), opened=now, resolved=None)
    other = profile("pay", service="payments", alert="TargetDown", patterns={REFUSED: 30}, errors=(REFUSED,),
                    opened=now - 1200, resolved=None)  # fmt: skip
    rarity = Rarity(100, {OOM: 2, REFUSED: 2})
    troubled = at(query, nodes=frozenset({node}), hosts=frozenset({node}))
    hits = rank(troubled, [at(other, hosts=frozenset({node}))], rarity)
    assert [(h.thread_ts, h.kind) for h in hits] == [("pay", "concurrent")]
    assert any(r == f"pods on the node in trouble: {node}" for r in hits[0].reasons[:2])
    assert [
        h.kind for h in rank(at(query, hosts=frozenset({node})), [at(other, nodes=frozenset({node}))], rarity)
    ] == ["concurrent"]  # either way round
    assert rank(at(query, hosts=frozenset({node})), [at(other, hosts=frozenset({node}))], rarity) == []
    assert rank(troubled, [at(other, hosts=frozenset({"ip-10-0-4-17.ec2.internal"}))], rarity) == []


def test_a_generic_error_half_the_fleet_logs_does_not_make_a_look_alikes_symptom_a_shared_cause() -> None:
    """Shares of a cause weigh each key by its information (log N/df), not its IDF: an error most incidents log
    adds (almost) nothing, so a look-alike's symptom beside it is not half of the query's cause. The incident of
    the same cause, showing the query's own error, still is."""
    now = 100 * HOUR
    generic, symptom, mine, theirs, theirs2 = (
        f"error {w} <n>" for w in ("reset", "deadline", "m1", "m2", "m3")
    )
    query = profile("q", patterns=dict.fromkeys((generic, symptom, mine), 5), errors=(generic, symptom, mine),
                    opened=now, resolved=None)  # fmt: skip
    alike = profile("alike", service="x", alert="Other", patterns=dict.fromkeys((generic, symptom, theirs, theirs2), 5),
                    errors=(generic, symptom, theirs, theirs2), opened=now - 600, resolved=None)  # fmt: skip
    rarity = Rarity(100, {generic: 60, symptom: 6, mine: 3, theirs: 3, theirs2: 3})
    assert rank(query, [alike], rarity) == []
    same = at(alike, thread_ts="same", patterns=dict.fromkeys((generic, symptom, mine), 2),
              error_patterns=frozenset({generic, symptom, mine}))  # fmt: skip
    assert [h.kind for h in rank(query, [same], rarity)] == ["concurrent"]


def test_concurrent_by_patterns_needs_the_other_to_hold_a_share_of_its_own_too() -> None:
    """A symptom one incident shows among many errors of its own is not a shared cause."""
    now = 100 * HOUR
    errs = [f"error e{k} failed" for k in range(5)]
    query = profile("q", patterns={OOM: 9}, errors=(OOM,), opened=now, resolved=None)
    many = profile("x", service="x", alert="Other", patterns={OOM: 2, **dict.fromkeys(errs, 3)},
                   errors=(OOM, *errs), opened=now - 600, resolved=None)  # fmt: skip
    rarity = Rarity(100, {OOM: 5, **dict.fromkeys(errs, 5)})
    assert rank(query, [many], rarity) == []
    few = at(many, patterns={OOM: 2, errs[0]: 3}, error_patterns=frozenset({OOM, errs[0]}))
    assert [h.kind for h in rank(query, [few], rarity)] == ["concurrent"]


def test_visibility_same_channel_or_mapped_public_never_another_private() -> None:
    groups = (frozenset({"C0PAY", "C0CHECKOUT"}),)
    assert may_see("C0CHECKOUT", "C0CHECKOUT", True, ())
    assert not may_see("C0CHECKOUT", "C0PAY", False, ())  # not mapped together: not seen
    assert may_see("C0CHECKOUT", "C0PAY", False, groups)
    assert not may_see("C0CHECKOUT", "C0PAY", True, groups)  # private: its own channel only
    assert not may_see("C0CHECKOUT", None, False, groups)  # channel unknown: fails closed
    assert not may_see(None, "C0PAY", False, groups)
    assert visible_channels("C0CHECKOUT", groups) == ["C0CHECKOUT", "C0PAY"]


ERRORS = [f"error {w} failed after <n>ms" for w in ("heap", "pool", "lock", "dns", "disk", "quota")]
PLAIN = [f"get /api/{w} 200 in <n>ms" for w in ("items", "orders", "health", "cart")]
REASONS = ["OOMKilling", "BackOff", "Unhealthy", "Evicted"]


@st.composite
def look_alike_case(draw: st.DrawFn) -> tuple[Candidate, Candidate, Candidate, Rarity]:
    """A query, its true match (holding all of the query's error patterns), and a look-alike that copies the
    query's labels, pod reasons, series and words but whose error signature differs (a minority of the query's
    errors by rarity at most); rarity drawn freely."""
    keys = ERRORS + PLAIN + [f"reason:{r}" for r in REASONS]
    total = draw(st.integers(10, 100_000))
    rarity = Rarity(total, {k: draw(st.integers(1, total)) for k in keys})
    q_errors = draw(st.sets(st.sampled_from(ERRORS), min_size=1, max_size=4))
    a_errors = draw(st.sets(st.sampled_from(ERRORS), max_size=4))
    shared = sum(rarity.idf(k) for k in q_errors & a_errors) / sum(rarity.idf(k) for k in q_errors)
    assume(shared < 0.5)
    plain = lambda: {k: draw(st.integers(1, 500)) for k in draw(st.sets(st.sampled_from(PLAIN)))}  # noqa: E731
    reasons = {r: 1 for r in draw(st.sets(st.sampled_from(REASONS)))}
    words = frozenset(draw(st.sets(st.sampled_from(["heap", "oom", "deploy", "rollback", "pager"]))))
    labels = {
        "alertname": "KubePodOOMKilled",
        "service": "checkout-api",
        "namespace": "shop",
        "cluster": "eu-1",
    }

    def make(thread: str, errors: set[str], extra: dict[str, int], **kw: object) -> Candidate:
        base = dict(thread_ts=thread, labels=labels, channel="C0INC", private=False, opened_at=0.0,
                    resolved_at=10.0, patterns={**extra, **dict.fromkeys(errors, 5)}, error_patterns=frozenset(errors),
                    reasons=reasons, shapes=frozenset({"mem:rising"}), lexemes=words)  # fmt: skip
        return Candidate(**{**base, **kw})  # type: ignore[arg-type]

    query = make("q", q_errors, plain(), opened_at=100 * HOUR, resolved_at=None)
    other_errors = draw(st.sets(st.sampled_from(ERRORS)))
    true = make("true", q_errors | other_errors, plain(), labels={"alertname": "X", "service": "payments"},
                reasons={}, shapes=frozenset(), lexemes=frozenset())  # fmt: skip
    alike = make("alike", a_errors, {**plain(), **{k: 1 for k in query.patterns if k in PLAIN}})
    return query, true, alike, rarity


@settings(max_examples=150, deadline=None)
@given(look_alike_case())
def test_property_a_look_alike_with_another_error_signature_never_ranks_above_the_true_match(
    case: tuple[Candidate, Candidate, Candidate, Rarity],
) -> None:
    query, true, alike, rarity = case
    ranked = [h.thread_ts for h in rank(query, [alike, true], rarity, k=5)]
    assert "true" in ranked
    assert "alike" not in ranked or ranked.index("true") < ranked.index("alike")


@given(
    total=st.integers(1, 100_000),
    counted=st.dictionaries(st.sampled_from(ERRORS + PLAIN), st.integers(0, 100_000)),
    mine=st.lists(st.sampled_from(ERRORS + PLAIN + ["never counted"])),
    theirs=st.lists(st.sampled_from(ERRORS + PLAIN + ["never counted"])),
    errors=st.frozensets(st.sampled_from(ERRORS)),
)
@settings(max_examples=200)
def test_the_inlined_weighted_jaccard_is_the_definition_bit_for_bit(
    total: int, counted: dict[str, int], mine: list[str], theirs: list[str], errors: frozenset[str]
) -> None:
    """The per-query IDF table (speed: benchmarks/bench_recall.py --speed) changes no score: each key weighs
    log(1 + N / max(1, df)) (an uncounted key as df 1), twice when an error, summed in the same order."""
    rarity = Rarity(total, counted)
    n = max(1, total)
    idf = lambda k: math.log(1.0 + n / max(1, counted.get(k, 1)))  # noqa: E731
    weigh = lambda k: idf(k) * (2.0 if k in errors else 1.0)  # noqa: E731
    a, b = set(mine), set(theirs)
    expected = 0.0
    if a or b:
        shared = sum(map(weigh, a & b))
        expected = shared / (sum(map(weigh, a)) + sum(map(weigh, b)) - shared)
    assert weighted_jaccard(mine, theirs, rarity, errors) == expected
    assert all(rarity.idf(k) == idf(k) for k in [*a, *b])
