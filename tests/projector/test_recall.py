"""Recall over profiles the real projector SQL wrote: similar incidents with reasons, and visibility (invariant 14)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from schemas import recall as recall_mod
from schemas.events import (
    AlertReceived,
    CompactedToolResult,
    EventBase,
    HumanMessage,
    RoundCommitted,
    SlackPostRecorded,
)
from schemas.ids import message_id, thread_key, voice_id
from schemas.recall import recall

from .helpers import apply_events

pytestmark = pytest.mark.stack

T0 = datetime(2026, 3, 14, 3, 0, tzinfo=UTC)
OOM = "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory"


def loki(lines: list[str]) -> dict[str, object]:
    values = [[str(1773457200000000000 + k), line] for k, line in enumerate(lines)]
    return {
        "status": "success",
        "data": {"resultType": "streams", "result": [{"stream": {}, "values": values}]},
    }


def incident(
    thread: str,
    at: datetime,
    *,
    service: str,
    lines: list[str],
    text: str,
    channel_type: str | None = "channel",
    root_channel: str | None = None,
    root_private: bool | None = None,
    resolved: bool = True,
) -> list[EventBase]:
    """An alert, one committed round with a Loki answer, a human message, maybe the alert's root post."""
    alert = dict(
        thread_ts=thread, service=service, alertname="KubePodOOMKilled", fingerprint="f",
        window_start=at - timedelta(minutes=30), window_end=at,
        alert={"commonLabels": {"service": service, "namespace": "shop", "severity": "critical"}},
    )  # fmt: skip
    tool_id = message_id(thread, 1, "tools", 0)
    events: list[EventBase] = [
        AlertReceived(message_id=message_id(thread, None, "alert", 0), event_time=at, status="firing", **alert),  # type: ignore[arg-type]
        CompactedToolResult(
            thread_ts=thread, message_id=tool_id, event_time=at + timedelta(seconds=5), round=1,
            tool_call_id="call_1", tool="query_loki", args={"q": "x"}, raw=loki(lines), compact={"n": len(lines)},
            tokens=5, raw_tokens=50, raw_sha256="0" * 64, compactor_version="t", budget=400,
        ),
        RoundCommitted(thread_ts=thread, message_id=message_id(thread, 1, "commit", 0),
                       event_time=at + timedelta(seconds=6), round=1, message_ids=[tool_id]),
        HumanMessage(thread_ts=thread, message_id=message_id(thread, None, "human", "1"), event_time=at + timedelta(minutes=5),
                     user="U1", ts="1", text=text, channel_type=channel_type),  # type: ignore[arg-type]
    ]  # fmt: skip
    if root_channel is not None:
        post_id = message_id(thread, None, "alert", 0)
        events.append(
            SlackPostRecorded(
                thread_ts=thread, message_id=voice_id(post_id, "posted"), event_time=at + timedelta(seconds=1),
                post_id=post_id, phase="posted", channel=root_channel, slack_ts="1800000000.000100", root=True,
                channel_private=root_private,
            )
        )  # fmt: skip
    if resolved:
        events.append(
            AlertReceived(message_id=message_id(thread, None, "alert", "resolved"), event_time=at + timedelta(hours=1),
                          status="resolved", **alert)  # type: ignore[arg-type]
        )  # fmt: skip
    return events


def oom_lines(n: int) -> list[str]:
    return [
        f"2026-03-14T03:12:{k % 60:02d}.187Z {OOM} pod=checkout-api-7d9f8b6c5-x{k:04d}" for k in range(n)
    ] + [f"GET /api/cart/{k} 200 in {k}ms" for k in range(20)]


def refused_lines(n: int) -> list[str]:
    return [f"ERROR connect ECONNREFUSED 10.0.3.{k % 250}:5432" for k in range(n)] + [
        f"GET /api/cart/{k} 200 in {k}ms" for k in range(20)
    ]


PUBLIC = "C0CHECKOUT"
PAYMENTS = "C0PAYMENTS"
SECRET = "C0SECRETS1"
QUERY = thread_key(PUBLIC, "1773500000.000100")
PAST = thread_key(PUBLIC, "1773400000.000100")
LOOKALIKE = thread_key(PUBLIC, "1773410000.000100")
PRIVATE_SAME = thread_key(SECRET, "1773420000.000100")
ALERT_KEY = "1773430000.000100"  # an alert-opened incident: no channel in its key, its root post names it
CONCURRENT_PAY = "1773499000.000100"


TEXTS = {
    PAST: "heap grows with the payload cache; rolled back to 3.13.2 and it held",
    LOOKALIKE: "database failover, connections refused; restarted the pgbouncer pods",
    PRIVATE_SAME: "secret customer escalation: heap again",
    ALERT_KEY: "same heap thing",
    CONCURRENT_PAY: "payments pods OOM",
    QUERY: "checkout OOMKilled again, heap",
}


def six_incidents(texts: dict[str, str]) -> list[EventBase]:
    """The query, its true match, a look-alike, two private incidents, a concurrent one; each thread's human
    message is `texts[thread]` (the embedding tests give the private ones words of their own)."""
    return [
        *incident(PAST, T0 - timedelta(days=9), service="checkout-api", lines=oom_lines(212), text=texts[PAST]),
        *incident(LOOKALIKE, T0 - timedelta(days=8), service="checkout-api", lines=refused_lines(300),
                  text=texts[LOOKALIKE]),
        *incident(PRIVATE_SAME, T0 - timedelta(days=7), service="checkout-api", lines=oom_lines(150),
                  text=texts[PRIVATE_SAME], channel_type="group"),
        *incident(ALERT_KEY, T0 - timedelta(days=6), service="checkout-api", lines=oom_lines(90),
                  text=texts[ALERT_KEY], channel_type=None, root_channel=SECRET, root_private=True),
        *incident(CONCURRENT_PAY, T0 - timedelta(minutes=20), service="payments-api", lines=oom_lines(40),
                  text=texts[CONCURRENT_PAY], channel_type=None, root_channel=PAYMENTS, root_private=False,
                  resolved=False),
        *incident(QUERY, T0, service="checkout-api", lines=oom_lines(198), text=texts[QUERY], resolved=False),
    ]  # fmt: skip


@pytest.fixture
def projected(pg_conn: psycopg.Connection, pg_schema: str) -> Iterator[psycopg.Connection]:
    assert apply_events(pg_conn, six_incidents(TEXTS), pg_schema, batch=7) == []
    yield pg_conn


def test_the_true_match_ranks_first_with_its_reasons_and_how_it_was_resolved(
    projected: psycopg.Connection,
) -> None:
    hits = recall(projected, QUERY, k=3)
    assert [h.thread_ts for h in hits] == [PAST, LOOKALIKE]  # same labels, other patterns: ranked below
    best = hits[0]
    assert best.kind == "historical"
    assert any("error patterns shared" in r and "x198 here, x212 there" in r for r in best.reasons)
    assert "resolved by: rolled back to 3.13.2 and it held" in best.reasons


def test_a_private_channels_incident_never_reaches_another_channel(projected: psycopg.Connection) -> None:
    groups = (frozenset({PUBLIC, SECRET, PAYMENTS}),)  # even when the operator maps the channels together
    seen = {h.thread_ts for h in recall(projected, QUERY, k=10, groups=groups)}
    assert PRIVATE_SAME not in seen and ALERT_KEY not in seen
    assert {PAST, LOOKALIKE, CONCURRENT_PAY} <= seen  # the public ones of mapped channels are seen
    assert PRIVATE_SAME in {
        h.thread_ts for h in recall(projected, ALERT_KEY, k=10, groups=groups)
    }  # own channel


def test_the_sql_alone_confines_recall_to_visible_channels(
    projected: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the second check (may_see) removed, the query itself still never reads another's private incident."""
    monkeypatch.setattr(recall_mod, "may_see", lambda *_args: True)
    groups = (frozenset({PUBLIC, SECRET, PAYMENTS}),)
    seen = {h.thread_ts for h in recall(projected, QUERY, k=10, groups=groups)}
    assert PRIVATE_SAME not in seen and ALERT_KEY not in seen
    assert CONCURRENT_PAY not in {h.thread_ts for h in recall(projected, QUERY, k=10)}  # unmapped: unseen


def test_a_concurrent_incident_with_the_same_cause_is_flagged(projected: psycopg.Connection) -> None:
    groups = (frozenset({PUBLIC, PAYMENTS}),)
    hits = recall(projected, QUERY, k=3, groups=groups)
    assert (hits[0].thread_ts, hits[0].kind) == (CONCURRENT_PAY, "concurrent")
    assert any("error patterns shared" in r for r in hits[0].reasons)


def test_profiles_know_channels_and_privacy(projected: psycopg.Connection) -> None:
    rows: dict[str, str] = dict(
        projected.execute("SELECT thread_ts, (channel, private)::text FROM incident_profiles").fetchall()
    )
    assert rows[QUERY] == f"({PUBLIC},f)" and rows[PRIVATE_SAME] == f"({SECRET},t)"
    assert rows[ALERT_KEY] == f"({SECRET},t)" and rows[CONCURRENT_PAY] == f"({PAYMENTS},f)"


def test_a_rounds_facts_count_only_once_its_marker_published_it(
    pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    thread = thread_key(PUBLIC, "1773600000.000100")
    events = incident(thread, T0, service="checkout-api", lines=oom_lines(5), text="heap", resolved=False)
    marker = next(e for e in events if isinstance(e, RoundCommitted))
    before = [e for e in events if e is not marker]
    assert apply_events(pg_conn, before, pg_schema) == []
    patterns = "SELECT signatures FROM incident_profiles WHERE thread_ts = %s"
    assert pg_conn.execute(patterns, (thread,)).fetchone() == ([],)  # the round died so far: it says nothing
    pg_conn.commit()
    assert apply_events(pg_conn, [marker], pg_schema) == []
    (signatures,) = pg_conn.execute(patterns, (thread,)).fetchone()  # type: ignore[misc]
    assert any("heap out of memory" in s for s in signatures)


def test_the_command_prints_hits_as_json_and_a_bad_thread_exits_2(
    projected: psycopg.Connection, pg_schema: str, pg_dsn: str
) -> None:
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    cli = str(Path(sys.executable).parent / "incident-memory")
    env = {**os.environ, "DATABASE_URL": pg_dsn, "RECALL_CHANNEL_GROUPS": json.dumps([[PUBLIC, PAYMENTS]])}
    done = subprocess.run(
        [cli, "recall", QUERY, "--k", "1", "--json", "--schema", pg_schema],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    hits = json.loads(done.stdout)
    assert [(h["thread"], h["kind"]) for h in hits] == [(CONCURRENT_PAY, "concurrent"), (PAST, "historical")]
    assert all(set(h) == {"thread", "kind", "score", "reasons"} and h["reasons"] for h in hits)
    bad = subprocess.run(
        [cli, "recall", "nope", "--schema", pg_schema], env=env, capture_output=True, text=True
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no incident profile" in bad.stderr


def test_the_signature_counts_equal_a_recount_of_the_profiles(projected: psycopg.Connection) -> None:
    """Recall's rarity reads counts the projector keeps as profiles change; they must equal a full recount."""
    recount = projected.execute(
        "SELECT k, count(*)::int FROM (SELECT unnest(signatures) AS k FROM incident_profiles"
        " UNION ALL SELECT 'reason:' || unnest(reason_keys) FROM incident_profiles"
        " UNION ALL SELECT '#incidents' FROM incident_profiles) s GROUP BY k ORDER BY k"
    ).fetchall()
    kept = projected.execute(
        "SELECT key, n FROM incident_signature_counts WHERE n <> 0 ORDER BY key"
    ).fetchall()
    assert kept == recount and len(kept) >= 4


RECALL_KEYS_FROM_PROFILES = """
SELECT p.thread_ts, k.key, p.channel, p.private, p.opened_at FROM incident_profiles p, LATERAL (
    SELECT unnest(p.signatures) AS key UNION SELECT 'reason:' || unnest(p.reason_keys)
    UNION SELECT 'label:' || p.alertname || '/' || p.service WHERE p.alertname IS NOT NULL AND p.service IS NOT NULL
) k WHERE p.channel IS NOT NULL AND p.opened_at IS NOT NULL ORDER BY 1, 2
"""


def test_the_recall_index_equals_the_profiles_keys(projected: psycopg.Connection) -> None:
    """Recall's candidates come from incident_recall_keys, kept by diffs batch by batch; it must equal the
    keys of the profiles as they now are (batch=7 made every profile change several times)."""
    kept = projected.execute("SELECT * FROM incident_recall_keys ORDER BY 1, 2").fetchall()
    assert kept == projected.execute(RECALL_KEYS_FROM_PROFILES).fetchall()
    assert {r[0] for r in kept} >= {QUERY, PAST, CONCURRENT_PAY} and len(kept) >= 12


def test_the_batch_upsert_writes_what_the_row_upsert_writes(pg_conn: psycopg.Connection) -> None:
    """The projector upserts a batch's profiles as one JSON document; every column, array order included,
    must be what the one-row statement writes (the benchmarks write with that one)."""
    from schemas.incident_profile import Profile
    from services.projector.profile_store import (
        UPSERT_PROFILE,
        UPSERT_PROFILES,
        profile_params,
        profiles_document,
    )

    profile = Profile(
        thread_ts="a", alertname="KubePodOOMKilled", labels={"service": "checkout", "severity": "critical"},
        channel="C0X", private=False, opened_at="2026-03-14T03:00:00+00:00", patterns={OOM.lower(): 3, "b": 1},
        error_patterns=(OOM.lower(),), reasons={"OOMKilling": 2}, shapes=("mem:rising",),
        claims=("z claim", "a claim"), decisions=("rolled back to 3.13.2", "raised the limit"),
        discussion="heap grows; 'quoted' \"text\" \\ ünïcode", nodes=("ip-10-0-9-3", "ip-10-0-1-2"),
        dependencies=("pg-orders", "mq"),
    )  # fmt: skip
    one, many = profile_params(profile), profile_params(Profile(**{**profile.__dict__, "thread_ts": "b"}))
    pg_conn.execute(UPSERT_PROFILE, one)
    pg_conn.execute(UPSERT_PROFILES, (profiles_document([many]),))
    cur = pg_conn.execute("SELECT * FROM incident_profiles ORDER BY thread_ts")
    names = [d.name for d in cur.description or ()]
    rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    assert rows[0].pop("profile_sha256") != rows[1].pop("profile_sha256")
    assert [rows[0].pop("thread_ts"), rows[1].pop("thread_ts")] == ["a", "b"]
    assert rows[0] == rows[1]
    assert rows[0]["claims"] == ["z claim", "a claim"]
    assert (rows[0]["nodes"], rows[0]["dependencies"]) == (
        ["ip-10-0-9-3", "ip-10-0-1-2"],
        ["pg-orders", "mq"],
    )
