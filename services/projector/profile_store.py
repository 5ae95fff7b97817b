"""Incident profiles in Postgres: facts stored with the rows, each touched profile rebuilt from them.

Called by `store.apply_batch` inside the batch's transaction, after the plan has written the rows,
so a profile changes with the rows that explain it and never ahead of them; the rebuild reads only
facts whose event is visible (a round's facts wait for its marker, invariant 3).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg

from schemas.canonical import canonical_json
from schemas.incident_profile import Fact, Profile, build_profile
from schemas.recall_keys import Posting, posting, posting_changes
from services.projector.mapping import CommitRound, Op
from services.projector.profile_facts import ProfileFact

INSERT_FACTS = """
INSERT INTO incident_profile_facts (thread_ts, source_id, kind, in_round, at, facts)
SELECT f.thread_ts, f.source_id, f.kind, f.in_round, f.at, f.facts
FROM jsonb_to_recordset(%s::jsonb) AS f(thread_ts text, source_id text, kind text, in_round boolean,
    at timestamptz, facts jsonb)
ON CONFLICT (thread_ts, source_id) DO NOTHING
"""


def facts_document(facts: Sequence[ProfileFact]) -> str:
    """The batch's facts as the one JSON array INSERT_FACTS reads; each fact's canonical JSON is embedded as is."""
    items = []
    for f in facts:
        head = [f.thread_ts, f.source_id, f.kind, f.in_round, f.at.isoformat()]
        thread, source, kind, in_round, at = map(canonical_json, head)
        items.append(
            f'{{"thread_ts":{thread},"source_id":{source},"kind":{kind},"in_round":{in_round},"at":{at},"facts":{f.facts}}}'
        )
    return "[" + ",".join(items) + "]"


VISIBLE_FACTS = """
SELECT f.thread_ts, f.source_id, f.kind, f.at, f.facts
FROM incident_profile_facts f LEFT JOIN agent_messages m ON f.in_round AND m.id = f.source_id
WHERE f.thread_ts = ANY(%s::text[]) AND (NOT f.in_round OR m.id IS NOT NULL)
ORDER BY f.thread_ts, f.source_id
"""

UPSERT_PROFILE = """
INSERT INTO incident_profiles (thread_ts, alertname, service, namespace, cluster, severity, channel, private,
    opened_at, resolved_at, patterns, signatures, error_patterns, reasons, reason_keys, shapes, claims,
    decisions, discussion, discussion_tsv, nodes, dependencies, pod_hosts, profile_sha256)
VALUES (%(thread_ts)s, %(alertname)s, %(service)s, %(namespace)s, %(cluster)s, %(severity)s, %(channel)s,
    %(private)s, %(opened_at)s, %(resolved_at)s, %(patterns)s::jsonb, %(signatures)s, %(error_patterns)s,
    %(reasons)s::jsonb, %(reason_keys)s, %(shapes)s, %(claims)s, %(decisions)s, %(discussion)s,
    to_tsvector('english', %(discussion)s), %(nodes)s, %(dependencies)s, %(pod_hosts)s, %(sha)s)
ON CONFLICT (thread_ts) DO UPDATE SET
    alertname = EXCLUDED.alertname, service = EXCLUDED.service, namespace = EXCLUDED.namespace,
    cluster = EXCLUDED.cluster, severity = EXCLUDED.severity, channel = EXCLUDED.channel,
    private = EXCLUDED.private, opened_at = EXCLUDED.opened_at, resolved_at = EXCLUDED.resolved_at,
    patterns = EXCLUDED.patterns, signatures = EXCLUDED.signatures, error_patterns = EXCLUDED.error_patterns,
    reasons = EXCLUDED.reasons, reason_keys = EXCLUDED.reason_keys, shapes = EXCLUDED.shapes,
    claims = EXCLUDED.claims, decisions = EXCLUDED.decisions, discussion = EXCLUDED.discussion,
    discussion_tsv = EXCLUDED.discussion_tsv, nodes = EXCLUDED.nodes, dependencies = EXCLUDED.dependencies,
    pod_hosts = EXCLUDED.pod_hosts, profile_sha256 = EXCLUDED.profile_sha256
WHERE incident_profiles.profile_sha256 <> EXCLUDED.profile_sha256
"""

# The same upsert for a whole batch's profiles in one statement and one parameter (a JSON array), so the
# driver neither round-trips per profile nor dumps six Python lists per row (benchmarks/profile_cost.py).
_TEXT_ARRAY = "ARRAY(SELECT e FROM jsonb_array_elements_text(p.{0}) WITH ORDINALITY AS a(e, n) ORDER BY n)"
UPSERT_PROFILES = (
    UPSERT_PROFILE.split("VALUES")[0]
    + f"""SELECT p.thread_ts, p.alertname, p.service, p.namespace, p.cluster, p.severity, p.channel, p.private,
    p.opened_at, p.resolved_at, p.patterns, {_TEXT_ARRAY.format("signatures")}, {_TEXT_ARRAY.format("error_patterns")},
    p.reasons, {_TEXT_ARRAY.format("reason_keys")}, {_TEXT_ARRAY.format("shapes")}, {_TEXT_ARRAY.format("claims")},
    {_TEXT_ARRAY.format("decisions")}, p.discussion, to_tsvector('english', p.discussion),
    {_TEXT_ARRAY.format("nodes")}, {_TEXT_ARRAY.format("dependencies")}, {_TEXT_ARRAY.format("pod_hosts")}, p.sha
FROM jsonb_to_recordset(%s::jsonb) AS p(thread_ts text, alertname text, service text, namespace text,
    cluster text, severity text, channel text, private boolean, opened_at timestamptz, resolved_at timestamptz,
    patterns jsonb, signatures jsonb, error_patterns jsonb, reasons jsonb, reason_keys jsonb, shapes jsonb,
    claims jsonb, decisions jsonb, discussion text, nodes jsonb, dependencies jsonb, pod_hosts jsonb, sha text)
ORDER BY p.thread_ts
ON CONFLICT"""
    + UPSERT_PROFILE.split("ON CONFLICT", 1)[1]
)


def profiles_document(rows: Sequence[Mapping[str, Any]]) -> str:
    """`profile_params` rows as the one JSON array UPSERT_PROFILES reads (patterns and reasons as objects)."""
    return canonical_json(
        [{**r, "patterns": json.loads(r["patterns"]), "reasons": json.loads(r["reasons"])} for r in rows]
    )


OLD_KEYS = """
SELECT thread_ts, signatures, reason_keys, alertname, service, channel, private, opened_at
FROM incident_profiles WHERE thread_ts = ANY(%s::text[])
"""

DELETE_RECALL_KEYS = """
DELETE FROM incident_recall_keys k USING unnest(%s::text[], %s::text[]) AS d(thread_ts, key)
WHERE k.thread_ts = d.thread_ts AND k.key = d.key
"""

INSERT_RECALL_KEYS = """
INSERT INTO incident_recall_keys (thread_ts, key, channel, private, opened_at)
SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::boolean[], %s::timestamptz[])
ON CONFLICT (thread_ts, key) DO NOTHING
"""

BUMP_COUNTS = """
INSERT INTO incident_signature_counts (key, n) SELECT * FROM unnest(%s::text[], %s::int[]) ORDER BY 1
ON CONFLICT (key) DO UPDATE SET n = incident_signature_counts.n + EXCLUDED.n
"""

TOTAL_KEY = "#incidents"


def signature_keys(signatures: Sequence[str], reasons: Sequence[str]) -> set[str]:
    """The keys whose incident counts recall's rarity reads (a reason under `reason:`)."""
    return {*signatures, *(f"reason:{r}" for r in reasons)}


def count_deltas(old: dict[str, set[str]], new: dict[str, set[str]]) -> dict[str, int]:
    """How the per-key incident counts change when the profiles `old` become `new` (a new profile counts once)."""
    delta: dict[str, int] = {}
    for thread, keys in new.items():
        before = old.get(thread)
        if before is None:
            delta[TOTAL_KEY] = delta.get(TOTAL_KEY, 0) + 1
            before = set()
        for key in keys - before:
            delta[key] = delta.get(key, 0) + 1
        for key in before - keys:
            delta[key] = delta.get(key, 0) - 1
    return {k: v for k, v in delta.items() if v}


def split_profile_ops(ops: Sequence[Op]) -> tuple[list[Op], list[ProfileFact]]:
    """The plan's operations and the profile's facts, apart (the plans know nothing of profiles)."""
    rest: list[Op] = [op for op in ops if not isinstance(op, ProfileFact)]
    facts = [op for op in ops if isinstance(op, ProfileFact)]
    return rest, facts


def profile_threads(items: Sequence[tuple[int, Sequence[Op]]]) -> list[str]:
    """Threads whose profile may change: a fact arrived, or a round (whose facts now count) was published."""
    return sorted(
        {op.thread_ts for _k, ops in items for op in ops if isinstance(op, ProfileFact | CommitRound)}
    )


def write_profiles(conn: psycopg.Connection, facts: Sequence[ProfileFact], threads: Sequence[str]) -> None:
    """Store the facts and rebuild the profiles of `threads`, inside the caller's transaction."""
    cur = conn.cursor()
    if facts:
        cur.execute(INSERT_FACTS, (facts_document(facts),))
    if not threads:
        return
    grouped: dict[str, list[Fact]] = {}
    for thread, source_id, kind, at, body in cur.execute(VISIBLE_FACTS, (list(threads),)).fetchall():
        grouped.setdefault(thread, []).append(Fact(source_id, kind, at.astimezone(UTC).isoformat(), body))
    rows = [profile_params(build_profile(t, grouped[t])) for t in sorted(grouped)]
    if not rows:
        return
    old_rows = cur.execute(OLD_KEYS, (sorted(grouped),)).fetchall()
    old = {r[0]: signature_keys(r[1], r[2]) for r in old_rows}
    delta = count_deltas(
        old, {r["thread_ts"]: signature_keys(r["signatures"], r["reason_keys"]) for r in rows}
    )
    cur.execute(UPSERT_PROFILES, (profiles_document(rows),))
    if delta:
        keys = sorted(delta)
        cur.execute(BUMP_COUNTS, (keys, [delta[k] for k in keys]))
    write_recall_keys(
        cur, {r[0]: _stored_posting(r) for r in old_rows}, {r["thread_ts"]: posting_of(r) for r in rows}
    )


def _stored_posting(row: Sequence[Any]) -> Posting:
    _thread, signatures, reasons, alertname, service, channel, private, opened_at = row
    return posting(
        signatures, reasons, alertname, service, channel=channel, private=private, opened_at=opened_at
    )


def posting_of(params: Mapping[str, Any]) -> Posting:
    opened = params["opened_at"]
    return posting(
        params["signatures"], params["reason_keys"], params["alertname"], params["service"],
        channel=params["channel"], private=params["private"],
        opened_at=None if opened is None else datetime.fromisoformat(opened),
    )  # fmt: skip


def write_recall_keys(
    cur: psycopg.Cursor[Any], old: Mapping[str, Posting], new: Mapping[str, Posting]
) -> None:
    """Recall's index rows follow the profiles in the same transaction (only the keys that changed)."""
    deletes, inserts = posting_changes(old, new)
    if deletes:
        cur.execute(DELETE_RECALL_KEYS, ([t for t, _ in deletes], [k for _, k in deletes]))
    if inserts:
        cur.execute(INSERT_RECALL_KEYS, [list(column) for column in zip(*inserts, strict=True)])


def profile_params(profile: Profile) -> dict[str, Any]:
    labels = profile.labels
    params: dict[str, Any] = {
        "thread_ts": profile.thread_ts,
        "alertname": profile.alertname,
        "service": labels.get("service"),
        "namespace": labels.get("namespace"),
        "cluster": labels.get("cluster"),
        "severity": labels.get("severity"),
        "channel": profile.channel,
        "private": profile.private,
        "opened_at": profile.opened_at,
        "resolved_at": profile.resolved_at,
        "patterns": canonical_json(dict(profile.patterns)),
        "signatures": sorted(profile.patterns),
        "error_patterns": list(profile.error_patterns),
        "reasons": canonical_json(dict(profile.reasons)),
        "reason_keys": sorted(profile.reasons),
        "shapes": list(profile.shapes),
        "claims": list(profile.claims),
        "decisions": list(profile.decisions),
        "discussion": profile.discussion,
        "nodes": list(profile.nodes),
        "dependencies": list(profile.dependencies),
        "pod_hosts": list(profile.hosts),
    }
    params["sha"] = hashlib.sha256(canonical_json(params).encode()).hexdigest()  # every column, canonically
    return params
