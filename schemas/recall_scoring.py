"""How alike two incidents are, and why: pure scoring over profiles (no I/O, no clock).

The score combines, with fixed weights (a look-alike's labels never outweigh different patterns):
- pattern signatures: a weighted Jaccard where each skeleton weighs its rarity across incidents
  (IDF), error-or-worse skeletons twice, so "connection refused" everywhere says little and
  `js heap out of memory` says much;
- pod-event reasons, weighted the same way; series shapes; the discussion's words (Jaccard of
  full-text lexemes); and the alert's labels (alert name, service, namespace, cluster, severity).
Each hit carries its reasons, in words a responder reads. Where an embedding endpoint is configured, the
cosine of the discussions' vectors is one more part (`EMBEDDING_WEIGHT`), present only when both have one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from schemas.recall_vectors import Embedding, cosine, embedding_reason

WEIGHTS: Final = {"patterns": 0.5, "reasons": 0.15, "shapes": 0.05, "text": 0.1, "labels": 0.2}
# The optional part: added to the total only when both discussions have a vector (`schemas/recall_vectors.py`).
EMBEDDING_WEIGHT: Final = 0.1
_PART_WEIGHTS: Final = {**WEIGHTS, "embedding": EMBEDDING_WEIGHT}
LABEL_WEIGHTS: Final = {"alertname": 0.35, "service": 0.35, "namespace": 0.1, "cluster": 0.1, "severity": 0.1}
ERROR_FACTOR: Final = 2.0
# Concurrent recall: the share of one incident's comparable cause signature (error patterns and pod
# reasons, by rarity) the other open incident must hold to be called part of the same outage. One rare
# shared error is not enough: a look-alike cause shows the same symptom (benchmarks/bench_recall.py).
CAUSE_SHARE: Final = 0.5
OTHER_SHARE: Final = 0.25
# Concurrent recall where logs cannot be compared: pod reasons both incidents show name a cause on different
# alerts and services only when an unrelated incident would show all of them by chance less often than this
# (each reason's share of incidents, as if independent). A single reason, or a pair of reasons most of the
# fleet shows (BackOff, Killing), never is; two rare ones together are.
REASON_CHANCE: Final = 0.05
# Concurrent recall through history: the query's closest past incidents (the top of its historical ranking)
# say what its cause shows beyond the random part any one incident shows; an open incident holding most of
# that signature (by information, `HISTORY_SHARE`), by more than chance (`REASON_CHANCE`), shares the cause.
HISTORY_HITS: Final = 5
HISTORY_MIN: Final = 3  # fewer closest past incidents than this vouch for nothing
HISTORY_CONSENSUS: Final = 0.5  # a key is the cause's when at least this share of them show it
HISTORY_SHARE: Final = 0.6


@dataclass(frozen=True)
class Candidate:
    """A profile as recall reads it."""

    thread_ts: str
    labels: Mapping[str, str | None]
    channel: str | None
    private: bool
    opened_at: float | None  # epoch seconds
    resolved_at: float | None
    patterns: Mapping[str, int]
    error_patterns: frozenset[str]
    reasons: Mapping[str, int]
    shapes: frozenset[str]
    lexemes: frozenset[str]
    decisions: tuple[str, ...] = ()
    claims: tuple[str, ...] = ()
    # (lexemes shared with the query, lexemes of this incident), counted by Postgres for a shortlisted
    # candidate whose words are not read (`lexemes` is then empty): the same Jaccard, none of the transfer.
    text_overlap: tuple[int, int] | None = None
    nodes: frozenset[str] = frozenset()  # troubled nodes (`schemas/incident_locus.py`)
    dependencies: frozenset[str] = frozenset()  # failing dependencies
    hosts: frozenset[str] = frozenset()  # nodes its pods ran on (not trouble by itself)
    embedding: Embedding | None = None  # its discussion's vector, only when an endpoint is configured


@dataclass(frozen=True)
class Hit:
    thread_ts: str
    kind: str  # "concurrent" | "historical"
    score: float
    reasons: tuple[str, ...]
    parts: Mapping[str, float] = field(default_factory=dict)


class Rarity:
    """IDF of signatures over all incidents: log(1 + N / df).

    A key without a count is as rare as can be (df 1). The table is computed once per query: scoring reads
    it for every key of every candidate, so it is a dict lookup, not a call."""

    def __init__(self, total: int, df: Mapping[str, int]) -> None:
        self.total = max(1, total)
        self.df = df
        self.rarest = math.log(1.0 + self.total / 1)
        self.table = {k: math.log(1.0 + self.total / max(1, n)) for k, n in df.items()}

    def idf(self, key: str) -> float:
        return self.table.get(key, self.rarest)

    def information(self, key: str) -> float:
        """How telling it is that two incidents share `key`: log((N + 1) / df), near zero for a key every
        incident of a large history has. Unlike the IDF (which ranks), it does not let a key most incidents
        show add up to a shared cause. Smoothed by one: in a young history where every incident shows a key
        (the first two incidents of a deployment, both open now), sharing it is weak evidence, not none, and
        the shares of equally weak keys still compare."""
        return math.log((self.total + 1) / min(self.total, max(1, self.df.get(key, 1))))


def signature_weight(key: str, rarity: Rarity, errors: frozenset[str]) -> float:
    """What sharing `key` says: its rarity, twice for an error-or-worse pattern."""
    return rarity.idf(key) * (ERROR_FACTOR if key in errors else 1.0)


def weighted_jaccard(a: Iterable[str], b: Iterable[str], rarity: Rarity, errors: frozenset[str]) -> float:
    """`signature_weight` summed, inlined: the hot loop of a recall (benchmarks/bench_recall.py --speed)."""
    mine, theirs = set(a), set(b)
    if not mine and not theirs:
        return 0.0
    table, rarest = rarity.table, rarity.rarest
    weights = {k: table.get(k, rarest) * (ERROR_FACTOR if k in errors else 1.0) for k in mine | theirs}
    shared = sum([weights[k] for k in mine & theirs])
    return shared / (sum([weights[k] for k in mine]) + sum([weights[k] for k in theirs]) - shared)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 0.0


def text_similarity(q: Candidate, c: Candidate) -> float:
    """Jaccard of the discussions' lexemes, from the words or from the overlap Postgres counted."""
    if c.text_overlap is None:
        return jaccard(q.lexemes, c.lexemes)
    shared, size = c.text_overlap
    union = len(q.lexemes) + size - shared
    return shared / union if union else 0.0


def label_score(q: Mapping[str, str | None], c: Mapping[str, str | None]) -> float:
    return sum(w for k, w in LABEL_WEIGHTS.items() if q.get(k) and q.get(k) == c.get(k))


def score(
    q: Candidate, c: Candidate, rarity: Rarity, q_reasons: Sequence[str] | None = None
) -> dict[str, float]:
    """The parts of the similarity; `q_reasons` is the query's `_reason_keys`, when the caller holds them."""
    errors = q.error_patterns | c.error_patterns
    mine = _reason_keys(q) if q_reasons is None else q_reasons
    parts = {
        "patterns": weighted_jaccard(q.patterns, c.patterns, rarity, errors),
        "reasons": weighted_jaccard(mine, _reason_keys(c), rarity, frozenset()),
        "shapes": jaccard(q.shapes, c.shapes),
        "text": text_similarity(q, c),
        "labels": label_score(q.labels, c.labels),
    }
    alike = cosine(q.embedding, c.embedding)
    if alike is not None:  # absent, not zero, unless both have a vector: the default scores as before
        parts["embedding"] = alike
    return parts


def _reason_keys(c: Candidate) -> list[str]:
    return [f"reason:{r}" for r in c.reasons]  # the rarity of a reason is counted under this key


def total(parts: Mapping[str, float]) -> float:
    return round(sum(_PART_WEIGHTS[k] * v for k, v in parts.items()), 4)


def _cause_keys(c: Candidate, other: Candidate) -> set[str]:
    """`c`'s cause signature as far as `other` can confirm or deny it: error patterns only when both
    looked at logs, pod reasons only when both saw pod events (absent evidence is not a difference)."""
    keys: set[str] = set()
    if c.patterns and other.patterns:
        keys |= c.error_patterns
    if c.reasons and other.reasons:
        keys |= set(_reason_keys(c))
    return keys


def weighed_keys(c: Candidate) -> set[str]:
    """Every key `shares_cause` may weigh of an incident: its error patterns and its pod reasons."""
    return set(c.error_patterns) | set(_reason_keys(c))


def cause_share(q: Candidate, c: Candidate, rarity: Rarity) -> float:
    """How much of the query's comparable cause signature (error patterns, pod reasons) the other holds, each
    key weighed by its information (`Rarity.information`): a generic error half the fleet logs ("connection
    reset by peer") beside a look-alike's symptom is not most of a cause."""
    mine = _cause_keys(q, c)
    return weighted_share(mine, mine & _cause_keys(c, q), rarity.information)


def weighted_share(keys: Iterable[str], held: Iterable[str], weigh: Callable[[str], float]) -> float:
    """The weight of `held` over the weight of `keys` (0 when they weigh nothing)."""
    whole = sum(weigh(k) for k in keys)
    return sum(weigh(k) for k in held) / whole if whole > 0 else 0.0


def error_share(q: Candidate, c: Candidate, rarity: Rarity) -> float:
    """The share (by rarity) of the query's error patterns the other incident shows (0 unless both have logs)."""
    if not (q.error_patterns and c.patterns):
        return 0.0
    return weighted_share(q.error_patterns, q.error_patterns & c.error_patterns, rarity.idf)


def shares_cause(q: Candidate, c: Candidate, rarity: Rarity) -> bool:
    """Same cause, for two incidents already open together (the caller checks the time).

    - Both report the same place in trouble: a troubled node or a failing dependency, or a node one reports
      in trouble where the other's pods ran.
    - Or both looked at logs, most (by information) of one's comparable error patterns and pod reasons are
      the other's, and at least `OTHER_SHARE` of the other's are the one's (a symptom one incident shows among
      many of its own is not a shared cause).
    - Or, where logs cannot be compared (one side has none), by pod reasons (`_reasons_share_cause`).
    """
    if shared_locus(q, c):
        return True
    if not (q.patterns and c.patterns and (q.error_patterns or c.error_patterns)):
        return _reasons_share_cause(q, c, rarity)
    mutual = min(cause_share(q, c, rarity), cause_share(c, q, rarity))
    return cause_share_either(q, c, rarity) >= CAUSE_SHARE and mutual >= OTHER_SHARE


def _reasons_share_cause(q: Candidate, c: Candidate, rarity: Rarity) -> bool:
    """Pod reasons name a shared cause when every comparable reason of one side is the other's (the side that
    saw fewer may have missed one: events age out, a pod is asked about once) and at least `OTHER_SHARE` of
    the other's are the one's; AND either both fire the same alert or on the same service, or the reasons they
    share are rare together (`REASON_CHANCE`). Reasons come from a small vocabulary, so a common one or a
    common pair is shared by chance across a fleet, and a look-alike cause has the same alert on the same
    services: neither alone is a cause. Never when each names a place in trouble and the places differ
    (`shared_locus` found none in common): that is two outages, whatever reasons they both show."""
    if _elsewhere(q, c):
        return False
    mine, theirs = _cause_keys(q, c), _cause_keys(c, q)
    if not (mine and theirs and (mine <= theirs or theirs <= mine)):
        return False
    if min(cause_share(q, c, rarity), cause_share(c, q, rarity)) < OTHER_SHARE:
        return False
    return _same_source(q, c) or _reasons_by_chance(q, c, rarity) < REASON_CHANCE


def _elsewhere(q: Candidate, c: Candidate) -> bool:
    """Each names a place in trouble (a node, a failing dependency): by then none is shared."""
    return bool(q.nodes or q.dependencies) and bool(c.nodes or c.dependencies)


def cause_share_either(q: Candidate, c: Candidate, rarity: Rarity) -> float:
    """The larger share: one incident's comparable cause signature held by the other (either way round)."""
    return max(cause_share(q, c, rarity), cause_share(c, q, rarity))


def _reasons_by_chance(q: Candidate, c: Candidate, rarity: Rarity) -> float:
    """The chance an unrelated incident shows every pod reason the two share (1.0 when they share none)."""
    return by_chance([r for r in _reason_keys(q) if r[len("reason:") :] in c.reasons], rarity)


def by_chance(keys: Iterable[str], rarity: Rarity) -> float:
    """The chance an unrelated incident shows every one of `keys`: the product of each key's share of all
    incidents, as if independent (1.0 for none)."""
    chance = 1.0
    for key in keys:
        chance *= min(1.0, max(1, rarity.df.get(key, 1)) / rarity.total)
    return chance


def history_signature(closest: Sequence[Candidate]) -> frozenset[str]:
    """The keys (error patterns, pod reasons) most of the query's closest past incidents show: its cause's
    signature as history knows it. One incident shows a random part of its cause's errors and reasons, so
    two incidents of one outage may share little directly; their cause's past incidents show the whole.
    Empty when fewer than `HISTORY_MIN` vouch for it (a young history, a cause never seen)."""
    if len(closest) < HISTORY_MIN:
        return frozenset()
    seen: dict[str, int] = {}
    for c in closest:
        for key in weighed_keys(c):
            seen[key] = seen.get(key, 0) + 1
    return frozenset(k for k, n in seen.items() if n >= HISTORY_CONSENSUS * len(closest))


def history_share(c: Candidate, signature: frozenset[str], rarity: Rarity) -> float:
    """The share (by information) of `c`'s error patterns and pod reasons that `signature` holds; 0 when what it
    holds would be shown together by an unrelated incident `REASON_CHANCE` of the time or more."""
    mine = weighed_keys(c)
    held = mine & signature
    if not held or by_chance(held, rarity) >= REASON_CHANCE:
        return 0.0
    return weighted_share(mine, held, rarity.information)


def _same_source(q: Candidate, c: Candidate) -> bool:
    return any(q.labels.get(k) and q.labels.get(k) == c.labels.get(k) for k in ("alertname", "service"))


def shared_locus(q: Candidate, c: Candidate) -> bool:
    """A troubled node or a failing dependency both report, or a node one reports in trouble that the other's
    pods ran on (`schemas/incident_locus.py`)."""
    return bool(q.nodes & c.nodes or q.dependencies & c.dependencies or troubled_hosts(q, c))


def troubled_hosts(q: Candidate, c: Candidate) -> frozenset[str]:
    """Nodes one incident reports in trouble that the other's pods ran on (either way round)."""
    return (q.nodes & c.hosts) | (c.nodes & q.hosts)


def overlaps(q: Candidate, c: Candidate, window_s: float) -> bool:
    """Whether `c` was open at any time in the hour before `q` opened (or is open still)."""
    if q.opened_at is None or c.opened_at is None:
        return False
    start = q.opened_at - window_s
    end_c = c.resolved_at if c.resolved_at is not None else math.inf
    return c.opened_at <= q.opened_at + window_s and end_c >= start


def explain(q: Candidate, c: Candidate, parts: Mapping[str, float], rarity: Rarity) -> tuple[str, ...]:
    """The reasons of a hit, most telling first (a place both report in trouble right after the shared
    error patterns, so a hit found by it alone names it among its first two)."""
    out: list[str] = []
    same = [
        k
        for k in ("alertname", "service", "namespace", "cluster")
        if q.labels.get(k) and q.labels.get(k) == c.labels.get(k)
    ]
    if same:
        out.append("same " + ", ".join(same))
    if parts.get("history", 0.0) > 0:
        out.append(f"shows the signature of this incident's closest past incidents ({parts['history']:.0%})")
    shared_err = sorted(q.error_patterns & c.error_patterns, key=lambda k: (-rarity.idf(k), k))
    if shared_err:
        top = shared_err[0]
        out.append(
            f"{len(shared_err)} of {len(q.error_patterns)} error patterns shared "
            f"(`{top}` x{q.patterns.get(top, 0)} here, x{c.patterns.get(top, 0)} there)"
        )
    nodes, dependencies = sorted(q.nodes & c.nodes), sorted(q.dependencies & c.dependencies)
    hosted = sorted(troubled_hosts(q, c) - set(nodes))
    if nodes:
        out.append("same node in trouble: " + ", ".join(nodes[:2]))
    if hosted:
        out.append("pods on the node in trouble: " + ", ".join(hosted[:2]))
    if dependencies:
        out.append("same failing dependency: " + ", ".join(dependencies[:2]))
    shared = set(q.patterns) & set(c.patterns)
    if len(shared) > len(shared_err):
        out.append(f"{len(shared)} of {len(q.patterns)} log patterns shared")
    reasons = sorted(set(q.reasons) & set(c.reasons))
    if reasons:
        out.append("pod events: " + ", ".join(f"{r} x{c.reasons[r]}" for r in reasons[:3]))
    shapes = sorted(q.shapes & c.shapes)
    if shapes:
        out.append("series: " + ", ".join(shapes[:3]))
    if parts.get("text", 0.0) >= 0.2:
        out.append(f"discussion alike ({parts['text']:.2f})")
    if "embedding" in parts and c.embedding is not None:
        out.append(embedding_reason(c.embedding.model, parts["embedding"]))
    if c.decisions:
        out.append("resolved by: " + c.decisions[-1])
    return tuple(out)


Picked = tuple[str, float, Candidate, dict[str, float]]  # kind, score, candidate, parts


def pick(
    q: Candidate,
    candidates: Sequence[Candidate],
    rarity: Rarity,
    *,
    k: int = 5,
    window_s: float = 3600.0,
    cause_rarity: Rarity | None = None,
) -> list[Picked]:
    """Concurrent hits (open within the window, sharing the cause) first, then the k most similar past ones.

    `cause_rarity` also counts the open candidates' own keys (`shares_cause` weighs both sides' signatures;
    `rarity` may count only the query's, enough to rank history)."""
    open_now: list[tuple[float, Candidate, dict[str, float]]] = []
    historical: list[tuple[float, Candidate, dict[str, float]]] = []
    q_reasons = _reason_keys(q)
    for c in candidates:
        if c.thread_ts == q.thread_ts:
            continue
        parts = score(q, c, rarity, q_reasons)
        value = total(parts)
        if overlaps(q, c, window_s):
            open_now.append((value, c, parts))  # an open incident is not history yet
        elif value > 0 and (c.opened_at is None or q.opened_at is None or c.opened_at < q.opened_at):
            historical.append((value, c, parts))
    # Most of the query's error signature shown ranks first, whatever the labels, words or reasons say: a
    # look-alike on the same alert and service with other errors is never above the true match.
    tier = {c.thread_ts: error_share(q, c, rarity) >= CAUSE_SHARE for _v, c, _p in historical}
    order = lambda h: (-tier.get(h[1].thread_ts, False), -h[0], h[1].thread_ts)  # noqa: E731
    ranked = sorted(historical, key=order)
    signature = history_signature(closest(q, ranked[:HISTORY_HITS], tier))
    concurrent = same_cause(q, open_now, signature, cause_rarity or rarity)
    return [
        (kind, value, c, parts)
        for kind, picked in (("concurrent", sorted(concurrent, key=order)), ("historical", ranked[:k]))
        for value, c, parts in picked
    ]


def closest(
    q: Candidate, ranked: Sequence[tuple[float, Candidate, dict[str, float]]], tier: Mapping[str, bool]
) -> list[Candidate]:
    """The past incidents that vouch for the query's cause: of the top of its ranking, those showing most of
    its error patterns when it has any (one incident's labels and words also bring a look-alike's past), else
    all of them."""
    top = [c for _v, c, _p in ranked]
    return [c for c in top if tier.get(c.thread_ts, False)] if q.error_patterns else top


def same_cause(
    q: Candidate,
    open_now: Sequence[tuple[float, Candidate, dict[str, float]]],
    signature: frozenset[str],
    rarity: Rarity,
) -> list[tuple[float, Candidate, dict[str, float]]]:
    """The open incidents that share the query's cause: directly (`shares_cause`), or by holding most of its
    cause's signature as its closest past incidents show it (`history_share`, then a part of the hit)."""
    found = []
    for value, c, parts in open_now:
        if shares_cause(q, c, rarity):
            found.append((value, c, parts))
        elif (share := history_share(c, signature, rarity)) >= HISTORY_SHARE:
            found.append((value, c, {**parts, "history": round(share, 4)}))
    return found


def explained(
    q: Candidate, picked: Sequence[Picked], rarity: Rarity, full: Mapping[str, Candidate] | None = None
) -> list[Hit]:
    """The picked candidates as hits with their reasons, written for these only (explaining every candidate
    would cost more than scoring). Reasons come from `full`'s profile where given (scoring may have read a
    short one), and a hit missing from `full` is left out."""
    profiles = full if full is not None else {c.thread_ts: c for _k, _v, c, _p in picked}
    return [
        Hit(c.thread_ts, kind, value, explain(q, profiles[c.thread_ts], parts, rarity), parts)
        for kind, value, c, parts in picked
        if c.thread_ts in profiles
    ]
