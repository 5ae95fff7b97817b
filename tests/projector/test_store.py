"""The projection SQL against the real Postgres: rounds, idempotence, re-renders, state."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta

import psycopg

from deploy.local.testdata import T0, interleave, synthetic_human, synthetic_round, synthetic_thread
from schemas.events import IncidentStateChanged, ReRendered, RoundCommitted, SlackPostRecorded
from schemas.ids import message_id, voice_id
from schemas.tokens import count_value_tokens
from services.projector import store
from services.projector.plan import Plan

from .helpers import apply_events, messages, table

T = "1710406800.000100"
U = "1710406900.000200"


def test_seed_thread_lands_whole_in_order(
    pg_conn: psycopg.Connection, pg_schema: str, plans: Sequence[Plan]
) -> None:
    events = synthetic_thread(T)
    assert apply_events(pg_conn, events, pg_schema, plans=plans) == []
    rows = messages(pg_conn, thread_ts=T)
    assert len(rows) == 20
    expected = [e.message_id for e in events if e.type not in ("round_committed",)]  # type: ignore[attr-defined]
    assert [r[0] for r in rows] == expected
    assert table(pg_conn, "round_staging") == []
    state = table(pg_conn, "incident_state")
    assert [(s[0], s[2], s[5]) for s in state] == [(T, "open", 2)]
    digests = {(d[1], d[2]): d[3] for d in table(pg_conn, "tool_digest_cache")}
    assert len(digests) == 3  # round 2 repeats one of round 1's calls: same key, the first digest stays
    assert all(":1:tools:" in mid for mid in digests.values())


def test_batch_boundaries_do_not_change_the_projection(
    pg_dsn: str, pg_conn: psycopg.Connection, pg_schema: str, plans: Sequence[Plan]
) -> None:
    events = interleave([synthetic_thread(T), synthetic_thread(U)])
    apply_events(pg_conn, events, pg_schema, batch=len(events), plans=plans)
    whole = messages(pg_conn)
    pg_conn.execute("TRUNCATE agent_messages, round_staging, incident_state, tool_digest_cache")
    pg_conn.commit()
    apply_events(pg_conn, events, pg_schema, batch=1, plans=plans)
    assert messages(pg_conn) == whole
    pg_conn.execute("TRUNCATE agent_messages, round_staging, incident_state, tool_digest_cache")
    pg_conn.commit()
    apply_events(pg_conn, events, pg_schema, batch=7, plans=plans)
    assert messages(pg_conn) == whole


def test_copy_plan_equals_the_in_order_plan(pg_conn: psycopg.Connection, pg_schema: str) -> None:
    events = interleave([synthetic_thread(T), synthetic_thread(U)])
    dead = synthetic_round(T, 3, T0 + timedelta(hours=1), marker=False)
    early = synthetic_round(U, 5, T0 + timedelta(hours=2))
    early = [*early[:-2], early[-1], early[-2]]  # a marker that arrives before one of its rows
    events = [*events, *dead, *early, *events[:9]]  # a dead round and late duplicates, too
    apply_events(pg_conn, events, pg_schema, batch=len(events))
    fast = (messages(pg_conn), table(pg_conn, "round_staging"), table(pg_conn, "incident_state"))
    pg_conn.execute("TRUNCATE agent_messages, round_staging, incident_state, tool_digest_cache")
    pg_conn.commit()
    apply_events(pg_conn, events, pg_schema, batch=len(events), plans=(store.IN_ORDER,))
    assert (messages(pg_conn), table(pg_conn, "round_staging"), table(pg_conn, "incident_state")) == fast


def test_every_event_twice_changes_nothing(
    pg_conn: psycopg.Connection, pg_schema: str, plans: Sequence[Plan]
) -> None:
    events = synthetic_thread(T)
    apply_events(pg_conn, events, pg_schema, plans=plans)
    once = (messages(pg_conn), table(pg_conn, "incident_state"), table(pg_conn, "tool_digest_cache"))
    doubled = [e for e in events for _ in (0, 1)]
    apply_events(pg_conn, doubled, pg_schema, batch=5, plans=plans)
    # and the whole thread again, after the fact
    apply_events(pg_conn, events, pg_schema, batch=3, plans=plans)
    assert (messages(pg_conn), table(pg_conn, "incident_state"), table(pg_conn, "tool_digest_cache")) == once
    assert table(pg_conn, "round_staging") == []  # duplicates of published rows are not re-staged


def test_round_without_marker_is_invisible_and_next_round_lands(
    pg_conn: psycopg.Connection, pg_schema: str, plans: Sequence[Plan]
) -> None:
    thread = synthetic_thread(T)
    alert = thread[0]
    dead = synthetic_round(T, 1, T0 + timedelta(minutes=1), marker=False)
    after = synthetic_round(T, 2, T0 + timedelta(minutes=5), tools=1)
    apply_events(pg_conn, [alert, *dead], pg_schema, plans=plans)
    assert [r[3] for r in messages(pg_conn)] == ["alert"]
    assert {r[0] for r in table(pg_conn, "round_staging")} == {e.message_id for e in dead}
    apply_events(pg_conn, after, pg_schema, plans=plans)
    rows = messages(pg_conn)
    assert [r[0] for r in rows] == [alert.message_id] + [e.message_id for e in after[:-1]]
    assert not any(r[2] == 1 for r in rows)


def test_marker_with_a_missing_row_is_refused_and_staging_kept(
    pg_conn: psycopg.Connection, pg_schema: str, plans: Sequence[Plan]
) -> None:
    round_events = synthetic_round(T, 1, T0)
    tool = next(e for e in round_events if e.type == "tool_result_compacted")  # type: ignore[attr-defined]
    without_tool = [e for e in round_events if e is not tool]
    rejections = apply_events(pg_conn, without_tool, pg_schema, plans=plans)
    assert len(rejections) == 1
    assert tool.message_id in rejections[0].reason
    assert messages(pg_conn) == []
    assert len(table(pg_conn, "round_staging")) == len(without_tool) - 1


def test_marker_not_listing_a_tool_row_of_an_ai_call_is_refused(
    pg_conn: psycopg.Connection, pg_schema: str, plans: Sequence[Plan]
) -> None:
    round_events = synthetic_round(T, 1, T0, marker=False)
    tool = next(e for e in round_events if e.type == "tool_result_compacted")  # type: ignore[attr-defined]
    marker = RoundCommitted(
        thread_ts=T,
        message_id=message_id(T, 1, "commit", 0),
        event_time=T0 + timedelta(minutes=1),
        round=1,
        message_ids=[e.message_id for e in round_events if e is not tool],
    )
    rejections = apply_events(pg_conn, [*round_events, marker], pg_schema, plans=plans)
    assert len(rejections) == 1 and "tool calls without a listed tool row" in rejections[0].reason
    assert messages(pg_conn) == []


def test_round_is_published_in_marker_order(
    pg_conn: psycopg.Connection, pg_schema: str, plans: Sequence[Plan]
) -> None:
    round_events = synthetic_round(T, 1, T0, marker=False)
    listed = [e.message_id for e in reversed(round_events)]
    marker = RoundCommitted(
        thread_ts=T,
        message_id=message_id(T, 1, "commit", 0),
        event_time=T0 + timedelta(minutes=1),
        round=1,
        message_ids=listed,
    )
    apply_events(pg_conn, [*round_events, marker], pg_schema, plans=plans)
    assert [r[0] for r in messages(pg_conn)] == listed


def test_re_render_touches_compact_and_tokens_only(
    pg_conn: psycopg.Connection, pg_schema: str, plans: Sequence[Plan]
) -> None:
    events = synthetic_thread(T)
    apply_events(pg_conn, events, pg_schema, plans=plans)
    target = message_id(T, 1, "tools", 0)
    before = {r[0]: r for r in messages(pg_conn)}[target]
    compact = {"headline": "api: 5 error lines, boom", "evidence_id": target}
    rr = ReRendered(
        thread_ts=T,
        message_id=message_id(T, 3, "rerender", 0),
        event_time=T0 + timedelta(hours=2),
        round=3,
        target_id=target,
        compact=compact,
        tokens=count_value_tokens(compact),
        policy="headline",
    )
    assert apply_events(pg_conn, [rr], pg_schema, plans=plans) == []
    after = {r[0]: r for r in messages(pg_conn)}[target]
    assert after[5] == before[5]  # content untouched
    assert after[6] == compact and after[7] == count_value_tokens(compact)
    missing = rr.model_copy(update={"target_id": message_id(T, 9, "tools", 0)})
    (rejection,) = apply_events(pg_conn, [missing], pg_schema, plans=plans)
    assert "not projected" in rejection.reason


def test_re_render_of_a_staged_row_updates_staging(
    pg_conn: psycopg.Connection, pg_schema: str, plans: Sequence[Plan]
) -> None:
    staged = synthetic_round(T, 1, T0, marker=False)
    target = message_id(T, 1, "tools", 1)
    rr = ReRendered(
        thread_ts=T,
        message_id=message_id(T, 2, "rerender", 0),
        event_time=T0 + timedelta(hours=1),
        round=2,
        target_id=target,
        compact={"one_line": "x"},
        tokens=1,
        policy="one_line",
    )
    assert apply_events(pg_conn, [*staged, rr], pg_schema, plans=plans) == []
    row = {r[0]: r for r in table(pg_conn, "round_staging")}[target]
    assert row[6] == {"one_line": "x"}


def test_state_newest_fact_wins_and_rounds_only_grow(
    pg_conn: psycopg.Connection, pg_schema: str, plans: Sequence[Plan]
) -> None:
    events = synthetic_thread(T)
    alert = events[0]
    change = IncidentStateChanged(
        thread_ts=T,
        message_id=message_id(T, None, "state", 1),
        event_time=T0 + timedelta(hours=1),
        status="investigating",
        service="checkout-api",
        window_start=T0 - timedelta(minutes=45),
        window_end=T0 + timedelta(minutes=5),
        opened_at=T0,
    )
    late = [*events, change, alert]  # the old alert arrives again, late
    apply_events(pg_conn, late, pg_schema, plans=plans)
    (state,) = table(pg_conn, "incident_state")
    assert state[2] == "investigating" and state[5] == 2
    assert state[3] == T0 - timedelta(minutes=45)


def test_human_turns_are_visible_at_once(
    pg_conn: psycopg.Connection, pg_schema: str, plans: Sequence[Plan]
) -> None:
    human = synthetic_human(T, T0, 1)
    apply_events(pg_conn, [human], pg_schema, plans=plans)
    (row,) = messages(pg_conn)
    assert row[2] is None and row[3] == "human"
    assert json.dumps(row[5], sort_keys=True) == json.dumps(
        {"user": human.user, "ts": human.ts, "text": human.text, "mention": False, "edit_of": None},
        sort_keys=True,
    )


def test_offsets_are_saved_with_the_rows(
    pg_conn: psycopg.Connection, pg_schema: str, plans: Sequence[Plan]
) -> None:
    apply_events(pg_conn, synthetic_thread(T), pg_schema, batch=10, plans=plans)
    assert table(pg_conn, "projector_offsets") == [("g", "t", 0, 22)]


def _voice(thread: str, phase: str, ts: str | None, root: bool = False) -> SlackPostRecorded:
    post = message_id(thread, None if root else 1, "alert" if root else "post", 0)
    return SlackPostRecorded(
        thread_ts=thread, message_id=voice_id(post, phase), event_time=T0, round=None if root else 1,
        post_id=post, phase=phase, channel="C0INC", slack_ts=ts, root=root,  # type: ignore[arg-type]
    )  # fmt: skip


def test_the_voices_records_project_once_whatever_the_plan(
    pg_conn: psycopg.Connection, pg_schema: str, plans: Sequence[Plan]
) -> None:
    records = [
        _voice(T, "intent", None, root=True),
        _voice(T, "posted", "1700000000.000100", root=True),
        _voice(T, "intent", None),
        _voice(T, "found", "1700000000.000200"),
    ]
    thread = synthetic_thread(T)
    apply_events(pg_conn, [*thread, *records], pg_schema, plans=plans)
    once = table(pg_conn, "slack_posts", order="post_id, phase")
    assert [(r[0].split(":", 1)[1], r[1], r[4], r[5]) for r in once] == [
        ("-:alert:0", "intent", None, True),
        ("-:alert:0", "posted", "1700000000.000100", True),
        ("1:post:0", "found", "1700000000.000200", False),
        ("1:post:0", "intent", None, False),
    ]
    apply_events(pg_conn, [e for e in [*records, *thread] for _ in (0, 1)], pg_schema, batch=3, plans=plans)
    assert table(pg_conn, "slack_posts", order="post_id, phase") == once
    assert not [r for r in messages(pg_conn) if ":voice:" in r[0]]  # the voice's records are not context


def test_each_re_rendering_is_kept_in_order_once(pg_conn: psycopg.Connection, pg_schema: str) -> None:
    """Migration 011: a row re-rendered twice keeps both renderings in rendering_history, in the order
    applied, with the round each was made for; a redelivery adds nothing (invariant 2)."""
    assert apply_events(pg_conn, synthetic_thread(T, T0), pg_schema) == []
    target = message_id(T, 1, "tools", 0)

    def rr(round_: int, policy: str, compact: dict) -> ReRendered:
        return ReRendered(
            thread_ts=T, message_id=message_id(T, None, "rerender", f"r{round_}-1-tools-0"),
            event_time=T0 + timedelta(hours=round_), target_id=target, compact=compact,
            tokens=count_value_tokens(compact), policy=policy,  # type: ignore[arg-type]
        )  # fmt: skip

    events = [rr(2, "headline", {"headline": "h", "re_rendered": "headline"}),
              rr(3, "one_line", {"line": "l", "re_rendered": "one_line"})]  # fmt: skip
    assert apply_events(pg_conn, [*events, *events], pg_schema) == []
    history = pg_conn.execute(
        "SELECT target_id, made_round, policy, compact FROM rendering_history ORDER BY seq"
    ).fetchall()
    assert history == [
        (target, 2, "headline", {"headline": "h", "re_rendered": "headline"}),
        (target, 3, "one_line", {"line": "l", "re_rendered": "one_line"}),
    ]
