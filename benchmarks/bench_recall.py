"""Recall across incidents: quality on generated histories against a plain full-text baseline, and speed.

Quality: for each seed (a seed is a history; others are kept aside), `make_history` gives hundreds of
past incidents over many services with known causes, then new incidents, some with a concurrent
incident of the same cause and some with an unrelated one open beside them. Every profile is written
with the projector's own statement; each new incident is added, recalled through `schemas.recall`
(the SQL, the visibility filter and the scoring the agent and the CLI use), and removed again.
The baseline ranks the same rows by `ts_rank_cd` of the discussion against the new incident's words.

Speed: the profiles are cloned in SQL up to 100,000 incidents, and recall is timed end to end.

`python -m benchmarks.bench_recall` prints the section; `incident-memory bench --only recall` writes it.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import psycopg

from benchmarks.recall_histories import History, Incident, make_history
from deploy.local.pipeline import fresh_schema
from schemas.recall import recall
from services.projector.profile_store import UPSERT_PROFILE, posting_of, profile_params, write_recall_keys
from services.runtime import embeddings
from services.runtime.settings import Settings

SEEDS = (3, 5, 7, 11, 23, 37, 41, 53, 101, 202)
SEED_TIMED = 11  # the history cloned for the query time
SCALE = 100_000
TIMED_QUERIES = 200

BASELINE = """
SELECT thread_ts FROM incident_profiles
WHERE thread_ts <> %(thread)s AND opened_at < %(opened)s - interval '1 hour'
ORDER BY ts_rank_cd(discussion_tsv, to_tsquery('english', %(words)s)) DESC, thread_ts LIMIT 3
"""
RECOUNT = """
INSERT INTO incident_signature_counts
SELECT k, count(*)::int FROM (
    SELECT unnest(signatures) AS k FROM incident_profiles
    UNION ALL SELECT 'reason:' || unnest(reason_keys) FROM incident_profiles
    UNION ALL SELECT '#incidents' FROM incident_profiles
) s GROUP BY k
ON CONFLICT (key) DO UPDATE SET n = EXCLUDED.n
"""
WORDS = "SELECT array_to_string(tsvector_to_array(discussion_tsv), ' | ') FROM incident_profiles WHERE thread_ts = %s"


def _insert(conn: psycopg.Connection, incidents: Sequence[Incident]) -> None:
    rows = [profile_params(i.profile) for i in incidents]
    with conn.cursor() as cur:
        cur.executemany(UPSERT_PROFILE, rows)
        write_recall_keys(cur, {}, {r["thread_ts"]: posting_of(r) for r in rows})


def _recount(conn: psycopg.Connection) -> None:
    """The counts the projector would keep (these profiles are written here without it)."""
    conn.execute("DELETE FROM incident_signature_counts")
    conn.execute(RECOUNT)


def _delete(conn: psycopg.Connection, thread: str) -> None:
    conn.execute("DELETE FROM incident_profiles WHERE thread_ts = %s", (thread,))
    conn.execute("DELETE FROM incident_recall_keys WHERE thread_ts = %s", (thread,))


def _ranks(found: Sequence[str], relevant: set[str]) -> tuple[float, float, float]:
    """(precision@3, recall@3, reciprocal rank) of one ranked list."""
    top = list(found)[:3]
    hits = sum(1 for t in top if t in relevant)
    first = next((k for k, t in enumerate(found, 1) if t in relevant), None)
    return hits / min(3, len(relevant)), hits / len(relevant), (1.0 / first if first else 0.0)


def evaluate(conn: psycopg.Connection, history: History) -> dict[str, float]:
    causes = {i.thread_ts: i.cause for i in history.past}
    _insert(conn, history.past)
    conn.commit()
    ours, base = [], []
    found = flagged_wrong = true_total = wrong_total = lookalike_above = 0
    embed = embeddings.from_env()  # none by default
    for q in history.queries:
        _insert(conn, [q])
        _recount(conn)
        hits = recall(conn, q.thread_ts, k=10, embed=embed)
        concurrent = {h.thread_ts for h in hits if h.kind == "concurrent"}
        historical = [h.thread_ts for h in hits if h.kind == "historical"]
        relevant = {
            t for t, c in causes.items()
            if c == q.cause and t not in history.concurrent[q.thread_ts] and _opened(history, t) < q.opened_at
        }  # fmt: skip
        ours.append(_ranks(historical, relevant))
        words = conn.execute(WORDS, (q.thread_ts,)).fetchone()
        baseline = conn.execute(
            BASELINE, {"thread": q.thread_ts, "opened": q.opened_at, "words": (words or [""])[0] or "''"}
        ).fetchall()
        base.append(_ranks([r[0] for r in baseline], relevant))
        true_total += len(history.concurrent[q.thread_ts])
        found += len(concurrent & set(history.concurrent[q.thread_ts]))
        wrong_total += len(history.unrelated_open[q.thread_ts])
        flagged_wrong += len(concurrent & set(history.unrelated_open[q.thread_ts]))
        if q.profile.patterns:  # the rule holds where the pattern signatures can differ at all
            lookalike_above += _lookalike_above(historical, relevant, causes, q.cause)
        _delete(conn, q.thread_ts)
        conn.commit()
    conn.execute("DELETE FROM incident_profiles")
    conn.execute("DELETE FROM incident_recall_keys")
    conn.execute("DELETE FROM incident_signature_counts")
    conn.commit()
    return {
        "p_at_3": statistics.fmean(r[0] for r in ours),
        "r_at_3": statistics.fmean(r[1] for r in ours),
        "mrr": statistics.fmean(r[2] for r in ours),
        "baseline_p_at_3": statistics.fmean(r[0] for r in base),
        "baseline_r_at_3": statistics.fmean(r[1] for r in base),
        "baseline_mrr": statistics.fmean(r[2] for r in base),
        "concurrent_found": found / max(1, true_total),
        "concurrent_false_flags": flagged_wrong / max(1, wrong_total),
        "concurrent_true": true_total,
        "concurrent_unrelated": wrong_total,
        "lookalike_above_true": lookalike_above,
        "queries": len(history.queries),
        "past": len(history.past),
    }


def _opened(history: History, thread: str) -> Any:
    return next(i.opened_at for i in history.past if i.thread_ts == thread)


def _lookalike_above(ranked: Sequence[str], relevant: set[str], causes: dict[str, int], cause: int) -> int:
    """1 when an incident of the look-alike cause (same alert and services, other patterns) ranks above
    every true match."""
    partner = cause ^ 1
    for t in ranked:
        if t in relevant:
            return 0
        if causes.get(t) == partner:
            return 1
    return 0


def speed(conn: psycopg.Connection, history: History) -> dict[str, float]:
    """Recall's latency over SCALE profiles: the history's incidents cloned in SQL, shifted in time."""
    _insert(conn, history.past)
    copies = SCALE // len(history.past) + 1
    conn.execute(
        """
        INSERT INTO incident_profiles
        SELECT p.thread_ts || '.' || g, alertname, service, namespace, cluster, severity, channel, private,
               opened_at - g * interval '400 days', resolved_at - g * interval '400 days', patterns, signatures,
               error_patterns, reasons, reason_keys, shapes, claims, decisions, discussion, discussion_tsv,
               profile_sha256, nodes, dependencies, pod_hosts
        FROM incident_profiles p, generate_series(1, %s) g
        """,
        (copies - 1,),
    )
    conn.execute(
        """
        INSERT INTO incident_recall_keys
        SELECT k.thread_ts || '.' || g, key, channel, private, opened_at - g * interval '400 days'
        FROM incident_recall_keys k, generate_series(1, %s) g
        """,
        (copies - 1,),
    )
    _recount(conn)  # the clones bypassed the projector, which keeps these counts
    conn.execute("ANALYZE incident_profiles")
    conn.execute("ANALYZE incident_recall_keys")
    conn.commit()
    total = conn.execute("SELECT count(*) FROM incident_profiles").fetchone()[0]  # type: ignore[index]
    times, ranks = [], []
    embed = (
        embeddings.from_env()
    )  # built before the clock starts: the endpoint's client is the service's start-up
    for q in history.queries[: TIMED_QUERIES // 2] * 2:
        _insert(conn, [q])
        conn.commit()
        started = time.perf_counter()
        hits = recall(conn, q.thread_ts, k=5, embed=embed)
        times.append((time.perf_counter() - started) * 1000)
        ranks.append(_ranks_at_scale(history, q, [h.thread_ts for h in hits if h.kind == "historical"]))
        conn.rollback()
        _delete(conn, q.thread_ts)
        conn.commit()
    times.sort()
    return {
        "incidents": int(total),
        "queries": len(times),
        "p50_ms": times[len(times) // 2],
        "p99_ms": times[int(len(times) * 0.99) - 1],
        "max_ms": times[-1],
        "p_at_3": statistics.fmean(r[0] for r in ranks),
        "mrr": statistics.fmean(r[1] for r in ranks),
    }


def _ranks_at_scale(history: History, q: Incident, found: Sequence[str]) -> tuple[float, float]:
    """(precision@3, reciprocal rank) of the timed recall among the clones, which keep their original's cause,
    so the speed run also shows what a bound on the query's work does to the hits where it binds."""
    causes = {i.thread_ts: i.cause for i in history.past}
    opened = {i.thread_ts: i.opened_at for i in history.past}

    def relevant(thread: str) -> bool:
        original = thread.rsplit(".", 1)[0] if thread.count(".") == 2 else thread
        earlier = original != thread or opened[original] < q.opened_at
        return causes.get(original) == q.cause and original not in history.concurrent[q.thread_ts] and earlier

    top = list(found)[:3]
    first = next((k for k, t in enumerate(found, 1) if relevant(t)), None)
    return sum(map(relevant, top)) / 3, (1.0 / first if first else 0.0)


def run(settings: Settings, seeds: Sequence[int] = SEEDS, *, timed: bool = True) -> dict[str, Any]:
    per_seed = {}
    with (
        fresh_schema(settings.database_url) as schema,
        psycopg.connect(settings.database_url, options=f"-c search_path={schema}") as conn,
    ):
        for seed in seeds:
            per_seed[seed] = evaluate(conn, make_history(seed))
            print(f"[bench recall] seed {seed}: {per_seed[seed]}", file=sys.stderr, flush=True)
        timing = speed(conn, make_history(SEED_TIMED, n_past=1000, n_queries=100)) if timed else None
    return {
        "title": "Recall across incidents",
        "seeds": per_seed,
        "speed": timing,
        "markdown": _markdown(per_seed, timing),
    }


def _markdown(per_seed: dict[int, dict[str, float]], timing: dict[str, float] | None) -> str:
    lines = [
        "Historical and concurrent recall on generated histories (`benchmarks/recall_histories.py`: causes with",
        "their own error templates, look-alike causes sharing alert and services, noisy labels, common and generic",
        "log noise), through `schemas.recall` over profiles written by the projector's statement, against a plain",
        "full-text baseline (`ts_rank_cd` of the discussion) over the same rows in the same run. P@3 divides by",
        "min(3, relevant); R@3 by all relevant past incidents (many per cause, so it is bounded well below 1).",
        "",
        "| seed | past | queries | P@3 | baseline P@3 | MRR | baseline MRR | R@3 | baseline R@3 | concurrent found | false flags | look-alike above true |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for seed, m in per_seed.items():
        lines.append(
            f"| {seed} | {m['past']} | {m['queries']} | {m['p_at_3']:.3f} | {m['baseline_p_at_3']:.3f} | {m['mrr']:.3f} "
            f"| {m['baseline_mrr']:.3f} | {m['r_at_3']:.3f} | {m['baseline_r_at_3']:.3f} "
            f"| {m['concurrent_found']:.1%} of {m['concurrent_true']} | {m['concurrent_false_flags']:.1%} of "
            f"{m['concurrent_unrelated']} | {m['lookalike_above_true']} |"
        )
    for label, pick in (("mean", statistics.fmean), ("worst", None)):
        lines.append(_summary_row(label, per_seed, pick))
    if timing is None:
        return "\n".join(lines) + "\n"
    lines += [
        "",
        f"Query time: `recall` (profile, rarity, candidates, scoring) over {timing['incidents']:,} profiles, "
        f"{timing['queries']} queries: p50 {timing['p50_ms']:.1f} ms, p99 {timing['p99_ms']:.1f} ms, "
        f"max {timing['max_ms']:.1f} ms (target p99 < 50 ms); at that scale P@3 {timing['p_at_3']:.3f}, "
        f"MRR {timing['mrr']:.3f} (of the top 5; clones keep their original's cause).",
    ]
    return "\n".join(lines) + "\n"


def _summary_row(label: str, per_seed: dict[int, dict[str, float]], mean: Any) -> str:
    """Mean over seeds, or the worst seed's value per column (lowest rate; highest false flags)."""
    rows = list(per_seed.values())

    def col(key: str, *, high_is_bad: bool = False) -> float:
        values = [float(m[key]) for m in rows]
        if mean is not None:
            return float(mean(values))
        return max(values) if high_is_bad else min(values)

    return (
        f"| {label} | | | {col('p_at_3'):.3f} | {col('baseline_p_at_3'):.3f} | {col('mrr'):.3f} "
        f"| {col('baseline_mrr'):.3f} | {col('r_at_3'):.3f} | {col('baseline_r_at_3'):.3f} "
        f"| {col('concurrent_found'):.1%} | {col('concurrent_false_flags', high_is_bad=True):.1%} "
        f"| {col('lookalike_above_true', high_is_bad=True):.0f} |"
    )


def run_speed(settings: Settings) -> dict[str, float]:
    """Only the query time at SCALE (`--speed`): a re-measurement without the quality seeds before it."""
    with (
        fresh_schema(settings.database_url) as schema,
        psycopg.connect(settings.database_url, options=f"-c search_path={schema}") as conn,
    ):
        return speed(conn, make_history(SEED_TIMED, n_past=1000, n_queries=100))


def _main(argv: Sequence[str]) -> int:
    """`--speed`: the query time alone; `--quality [SEED,SEED...]`: the seeds' table alone (default SEEDS)."""
    if list(argv) == ["--speed"]:
        print(run_speed(Settings.from_env()))
        return 0
    if argv[:1] == ["--quality"] and len(argv) <= 2:
        try:
            seeds = [int(s) for s in argv[1].split(",")] if len(argv) == 2 else list(SEEDS)
        except ValueError:
            print("bench_recall: --quality takes seeds like 3,5,7", file=sys.stderr)
            return 2
        print(run(Settings.from_env(), seeds, timed=False)["markdown"])
        return 0
    if argv:
        print("usage: python -m benchmarks.bench_recall [--speed | --quality [SEEDS]]", file=sys.stderr)
        return 2
    print(run(Settings.from_env())["markdown"])
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
