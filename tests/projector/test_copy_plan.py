"""The COPY plan of store.apply_batch against the real Postgres (and the real broker for dead letters).

The plan COPYs a batch into a temporary table and publishes a round whose marker is in the
same batch straight into agent_messages. Every test here compares it with the in-order plan
(`store.IN_ORDER` alone) or checks what it must never do.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from confluent_kafka import Producer

from deploy.local.testdata import T0, interleave, synthetic_human, synthetic_round, synthetic_thread
from schemas.events import EventBase, HumanMessage, IncidentStateChanged, ReRendered
from schemas.ids import message_id
from schemas.tokens import count_value_tokens
from services.projector import plan_copy, sql, store
from services.projector.config import ProjectorConfig
from services.projector.decoding import Incoming, prepare
from services.projector.gc_pacer import GcPacer
from services.projector.mapping import map_event
from services.projector.plan import Plan
from services.projector.writer import BatchWriter
from services.runtime.kafka import producer_config
from services.runtime.kafka_client import KafkaClient
from services.runtime.settings import Settings

from .helpers import messages, read_topic, table

T = "1710406800.000100"
U = "1710406900.000200"
TABLES = ("round_staging", "incident_state", "tool_digest_cache")


def apply(
    conn: psycopg.Connection,
    schema: str,
    batches: Sequence[Sequence[EventBase]],
    plans: Sequence[Plan] = store.PLANS,
    counted: str = "round_staging",
) -> list[int]:
    """Apply each batch in its own transaction with `plans`; returns the inserts into `counted` of each."""
    staged_inserts = []
    offset = 0
    counter = f"SELECT pg_stat_get_xact_tuples_inserted('{counted}'::regclass)"
    for batch in batches:
        with conn.transaction():
            conn.execute(sql.CREATE_BATCH_TABLE)  # so that the COPY plan's batch table can be counted
            # A difference within one transaction: the counter may still hold earlier, unflushed ones.
            before = conn.execute(counter).fetchone()
            store.apply_batch(
                conn,
                [(k, map_event(e)) for k, e in enumerate(batch)],
                group="g",
                topic="t",
                partitions=[0],
                next_offsets={0: offset + len(batch)},
                schema=schema,
                plans=plans,
            )
            after = conn.execute(counter).fetchone()
            assert before is not None and after is not None
            staged_inserts.append(int(after[0]) - int(before[0]))
        offset += len(batch)
    return staged_inserts


def snapshot(conn: psycopg.Connection) -> tuple[Any, ...]:
    return (messages(conn), *(table(conn, name) for name in TABLES))


def reset(conn: psycopg.Connection) -> None:
    conn.execute(
        "TRUNCATE agent_messages, round_staging, incident_state, tool_digest_cache, projector_offsets"
    )
    conn.commit()


def in_order(
    conn: psycopg.Connection, schema: str, batches: Sequence[Sequence[EventBase]]
) -> tuple[Any, ...]:
    reset(conn)
    apply(conn, schema, batches, plans=(store.IN_ORDER,))
    return snapshot(conn)


def test_a_round_whose_marker_is_in_the_batch_never_touches_staging(
    pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    events = interleave([synthetic_thread(T), synthetic_thread(U)])
    assert store.COPY.applies([(k, map_event(e)) for k, e in enumerate(events)])
    (staged_inserts,) = apply(pg_conn, pg_schema, [events])
    assert staged_inserts == 0  # every round completed inside the batch: straight to agent_messages
    copy_plan = snapshot(pg_conn)
    assert len(copy_plan[0]) == 40 and copy_plan[1] == []
    assert in_order(pg_conn, pg_schema, [events]) == copy_plan


def test_rounds_split_across_batches_with_duplicates_and_a_re_render_equal_the_in_order_plan(
    pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    one = synthetic_round(T, 1, T0 + timedelta(minutes=1))  # ai, 3 tools, ai, ai, judge, post, marker
    two = synthetic_round(U, 1, T0 + timedelta(minutes=2), tools=1)
    target = one[1].message_id
    compact = {"one_line": "api: 5 error lines"}
    re_render = ReRendered(
        thread_ts=T,
        message_id=message_id(T, 2, "rerender", 0),
        event_time=T0 + timedelta(minutes=30),
        round=2,
        target_id=target,
        compact=compact,
        tokens=count_value_tokens(compact),
        policy="one_line",
    )
    batches: list[list[EventBase]] = [
        [*one[:3], *two[:2]],  # staged: part of each round
        [re_render],  # re-renders a staged row (the in-order plan runs this batch)
        [one[1], *one[3:-1], *two[2:-1], one[2], two[0], one[-1], two[-1]],  # the rest, duplicates, markers
        [*one, *two],  # everything again, after the fact
    ]
    plans = [store.COPY.applies([(k, map_event(e)) for k, e in enumerate(b)]) for b in batches]
    assert plans == [True, False, True, True]
    staged_inserts = apply(pg_conn, pg_schema, batches)
    assert staged_inserts[0] == 5 and staged_inserts[2] == 0 and staged_inserts[3] == 0
    copy_plan = snapshot(pg_conn)
    rows = {r[0]: r for r in copy_plan[0]}
    assert rows[target][6] == compact  # the staged, re-rendered row was published, not the new copy
    assert copy_plan[1] == []
    assert [r[0] for r in copy_plan[0] if r[1] == T] == [e.message_id for e in one[:-1]]
    assert in_order(pg_conn, pg_schema, batches) == copy_plan


def test_visible_rows_are_copied_straight_in_unless_one_is_there_already(
    pg_conn: psycopg.Connection, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch that moves nothing out of round_staging COPYs its visible rows into agent_messages
    directly (the batch table only carries their digests); a batch repeating a visible row takes
    PUBLISH_BATCH, whose ON CONFLICT skips the repeat. Both leave what the in-order plan leaves."""
    humans = [synthetic_human(T, T0 + timedelta(minutes=n), n) for n in range(5)]
    round_ = synthetic_round(U, 1, T0 + timedelta(minutes=9), tools=1)
    batches: list[list[EventBase]] = [
        # a round with its marker; an id twice in the batch (the first one wins, as ON CONFLICT has it)
        [humans[0], *round_, humans[1], humans[1].model_copy(update={"text": "not this one"})],
        [humans[2], humans[0], humans[3]],  # humans[0] is visible already
        [humans[4], *round_],  # the round again: its marker moves nothing
    ]
    # batches this small take the batch table (a savepoint's round trips cost more than they save)...
    assert apply(pg_conn, pg_schema, batches[:1], counted="pg_temp.projector_batch") == [len(batches[0]) - 1]
    reset(pg_conn)
    monkeypatch.setattr(plan_copy, "DIRECT_MIN_ROWS", 1)  # ... unless told otherwise
    through_batch_table = apply(pg_conn, pg_schema, batches, counted="pg_temp.projector_batch")
    # 1: every row straight in, the tool row's digest through the batch table (its content null);
    # 2: the repeat sends all three through it; 3: humans[4] straight in, the round's repeated rows
    # only to the batch table, marked 'x'
    assert through_batch_table == [1, 3, len(round_) - 1]
    copy_plan = snapshot(pg_conn)
    assert [r[0] for r in copy_plan[0] if r[1] == T] == [h.message_id for h in humans[:3]] + [
        humans[3].message_id,
        humans[4].message_id,
    ]
    assert in_order(pg_conn, pg_schema, batches) == copy_plan


def test_copy_text_escapes_round_trip(pg_conn: psycopg.Connection, pg_schema: str) -> None:
    odd = 'tab\there, newline\nthere, cr\r, backslash \\ and \\N, quote " é 🚀 \\t'
    human = HumanMessage(
        thread_ts=T,
        message_id=message_id(T, None, "human", "17104\\N\t.1"),
        event_time=T0,
        user="U\\1\t",
        ts="17104\\N\t.1",
        text=odd,
    )
    (tool_round,) = [synthetic_round(T, 1, T0, tools=1)]
    tool = tool_round[1].model_copy(update={"raw": {"line": odd, odd: [odd, 1.5, None, True]}})
    apply(pg_conn, pg_schema, [[human, tool_round[0], tool, *tool_round[2:]]])
    rows = {r[0]: r for r in messages(pg_conn)}
    assert rows[human.message_id][5] == {
        "user": "U\\1\t",
        "ts": "17104\\N\t.1",
        "text": odd,
        "mention": False,
        "edit_of": None,
    }
    assert rows[tool.message_id][5] == tool.raw  # type: ignore[attr-defined]


def test_state_waves_equal_the_in_order_plan(pg_conn: psycopg.Connection, pg_schema: str) -> None:
    alert = synthetic_thread(T)[0]

    def state(at: timedelta, status: str) -> IncidentStateChanged:
        return IncidentStateChanged(
            thread_ts=T,
            message_id=message_id(T, None, "state", int(at.total_seconds())),
            event_time=T0 + at,
            status=status,  # type: ignore[arg-type]
            service="checkout-api",
            window_start=T0 - at,
            window_end=T0 + at,
            opened_at=T0 - timedelta(minutes=5),
        )

    refire = alert.model_copy(update={"event_time": T0 + timedelta(hours=2), "message_id": f"{T}:-:alert:1"})
    other = synthetic_thread(U)[0]
    batch = [
        alert,
        other,
        state(timedelta(hours=1), "investigating"),
        refire,
        state(timedelta(minutes=30), "open"),
    ]
    apply(pg_conn, pg_schema, [batch])
    copy_plan = snapshot(pg_conn)
    (t_state,) = [s for s in copy_plan[2] if s[0] == T]
    assert t_state[2] == "open" and t_state[6] == T0 - timedelta(minutes=5)  # re-fire keeps opened_at
    assert in_order(pg_conn, pg_schema, [[e] for e in batch]) == copy_plan


def partition_0_writer(
    stack: Settings, pg_dsn: str, pg_schema: str, topic_names: dict[str, str]
) -> BatchWriter:
    """A writer (no NOTIFY) that owns partition 0 of the test's compacted topic, nothing stored yet."""
    config = ProjectorConfig(
        kafka=KafkaClient.plaintext(stack.kafka_bootstrap_servers), dsn=pg_dsn, schema=pg_schema, group="g",
        topic=topic_names["compacted"], dlq_topic=topic_names["dlq"],
    )  # fmt: skip
    writer = BatchWriter(
        config=config, producer=Producer(producer_config(stack.kafka_bootstrap_servers)), notify=False
    )
    writer.assign([0], {})
    return writer


def test_a_bad_row_in_a_copied_round_is_dead_lettered_and_its_round_stays_invisible(
    stack: Settings, pg_dsn: str, pg_conn: psycopg.Connection, pg_schema: str, topic_names: dict[str, str]
) -> None:
    good = synthetic_thread(U)
    bad_round = synthetic_round(T, 1, T0)
    bad_tool = json.loads(bad_round[2].to_bytes())
    bad_tool["raw"] = {"line": "NUL \u0000 here"}  # a valid event; jsonb cannot store U+0000
    records = [e.to_bytes() for e in good] + [e.to_bytes() for e in bad_round]
    records[len(good) + 2] = json.dumps(bad_tool).encode()
    writer = partition_0_writer(stack, pg_dsn, pg_schema, topic_names)
    try:
        outcome = writer.write([Incoming(0, k, b"k", value, 0.0) for k, value in enumerate(records)])
    finally:
        writer.close()
    assert outcome.dead_letters == 2 and outcome.next_offsets == {0: len(records)}
    letters = [
        json.loads(m.value()) for m in read_topic(stack.kafka_bootstrap_servers, topic_names["dlq"], 2)
    ]
    assert [letter["offset"] for letter in letters] == [len(good) + 2, len(records) - 1]
    assert "database refused the row" in letters[0]["reason"]
    assert "cannot be published" in letters[1]["reason"] and bad_round[2].message_id in letters[1]["reason"]
    rows = messages(pg_conn)
    assert [r[0] for r in rows] == [e.message_id for e in good if e.type != "round_committed"]  # type: ignore[attr-defined]
    staged = {r[0] for r in table(pg_conn, "round_staging")}
    assert staged == {e.message_id for e in bad_round[:-1]} - {bad_round[2].message_id}
    assert table(pg_conn, "projector_offsets") == [("g", topic_names["compacted"], 0, len(records))]


def test_gc_pacer_turns_collection_off_while_in_use_and_restores_it() -> None:
    assert gc.isenabled()
    outer, inner = GcPacer(every_events=10), GcPacer()
    collections: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        with outer.paced():
            assert not gc.isenabled()
            with inner.paced():
                assert not gc.isenabled()
            assert not gc.isenabled()  # the outer pacer is still in use
            garbage: list[object] = [[[]] for _ in range(5000)]  # would have triggered automatic collections
            del garbage
            outer.tick(9)
            assert collections == []
            outer.tick(1)  # every_events reached: one full collection
            assert collections == [2]
        assert gc.isenabled()
    finally:
        gc.callbacks.remove(seen)


def test_a_wrong_token_count_on_an_event_is_logged_and_the_projections_own_count_stored(
    stack: Settings,
    pg_dsn: str,
    pg_conn: psycopg.Connection,
    pg_schema: str,
    topic_names: dict[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Decoding only notes the mismatch (it may run in a helper thread); the writer logs it."""
    round_ = synthetic_round(T, 1, T0)
    target = round_[1].message_id
    compact = {"headline": "heap exhausted"}
    wrong = ReRendered(
        thread_ts=T,
        message_id=message_id(T, 2, "rerender", 0),
        event_time=T0 + timedelta(minutes=30),
        round=2,
        target_id=target,
        compact=compact,
        tokens=count_value_tokens(compact) + 40,
        policy="headline",
    )
    records = [e.to_bytes() for e in [*round_, wrong]]
    writer = partition_0_writer(stack, pg_dsn, pg_schema, topic_names)
    try:
        prepared = prepare([Incoming(0, k, b"k", v, 0.0) for k, v in enumerate(records)])
        with caplog.at_level("WARNING", logger="projector.writer"):
            outcome = writer.write_prepared(prepared)
    finally:
        writer.close()
    assert outcome.dead_letters == 0
    warned = [r for r in caplog.records if "event carries tokens" in r.getMessage()]
    assert len(warned) == 1
    assert f"tokens={count_value_tokens(compact) + 40}" in warned[0].getMessage()
    assert warned[0].__dict__.get("message_id") == wrong.message_id
    row = {r[0]: r for r in messages(pg_conn)}[target]
    assert json.loads(json.dumps(row[6])) == compact and row[7] == count_value_tokens(compact)
