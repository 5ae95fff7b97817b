"""Slack deletes and edits, from Slack's payloads through the real Kafka and Postgres to the ONE context
query: a deleted message never reaches the model (its raw stays in the row), an edit is the only text
the model sees of that message, and redelivery and replay give the same rows (invariants 2 and 8)."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from confluent_kafka import Producer

from schemas.events import EventBase, HumanMessage
from schemas.ids import message_id
from services.compactor.turns import with_turn_compact
from services.context_render.context import load_context
from services.ingest.slack_events import Callback, map_payload
from services.projector.config import ProjectorConfig
from services.runtime.kafka import producer_config
from services.runtime.kafka_client import KafkaClient
from services.runtime.settings import Settings

from .helpers import MESSAGE_COLUMNS, apply_events, high_watermarks, project_until_caught_up, replay_cli

TS = "1710600000.000100"  # the Slack thread
T = f"C123ABC456-{TS}"
PASTE, NOTE = "1710600100.000200", "1710600200.000300"
LEAK = "db password is hunter2-Xq9"  # a paste the redactor cannot tell from prose: only deletion hides it
BOT = "U0LAN0Z89"


def envelope(event: dict[str, Any]) -> dict[str, Any]:
    return {"type": "event_callback", "team_id": "T123ABC456", "api_app_id": "A123ABC456", "event": event,
            "event_id": f"Ev{event['ts']}", "event_time": 1710600000}  # fmt: skip


def message(thread_ts: str, ts: str, text: str) -> dict[str, Any]:
    """A thread reply as Slack sends it (tests/ingest/helpers.py has the full envelope)."""
    return {"type": "message", "channel": "C123ABC456", "user": "U123ABC456", "text": text, "ts": ts,
            "thread_ts": thread_ts, "event_ts": ts, "channel_type": "channel"}  # fmt: skip


def deleted(ts: str, at: str, previous: dict[str, Any]) -> dict[str, Any]:
    """A `message_deleted` event as Slack sends it for a thread reply."""
    return {"type": "message", "subtype": "message_deleted", "hidden": True, "channel": "C123ABC456",
            "channel_type": "channel", "ts": at, "event_ts": at, "deleted_ts": ts,
            "previous_message": previous}  # fmt: skip


def changed(at: str, new: dict[str, Any], previous: dict[str, Any]) -> dict[str, Any]:
    """A `message_changed` event: `message` is the message as edited, with the original's ts."""
    return {"type": "message", "subtype": "message_changed", "hidden": True, "channel": "C123ABC456",
            "channel_type": "channel", "ts": at, "event_ts": at, "message": new,
            "previous_message": previous}  # fmt: skip


def pipeline_events(slack_events: list[dict[str, Any]]) -> list[EventBase]:
    """Slack events as ingest maps them and the compactor forwards them (a human turn redacted)."""
    out: list[EventBase] = []
    for event in slack_events:
        result = map_payload(envelope(event), BOT)
        assert isinstance(result, Callback)
        for planned in result.planned:
            turn = with_turn_compact(planned.event)
            out.append(planned.event if turn is None else turn)
    return out


def thread_history() -> list[EventBase]:
    paste = message(TS, PASTE, LEAK)
    note = message(TS, NOTE, "p99 went up at 09:26")
    note_edited = {**note, "text": "p99 went up at 09:27, password=Sup3rS3cret!x", "edited": {"ts": "1"}}
    return pipeline_events([
        paste,
        note,
        message(TS, "1710600300.000400", "rolling back now"),
        deleted(PASTE, "1710600400.000500", paste),
        changed("1710600500.000600", note_edited, note),
    ])  # fmt: skip


def context_text(conn: psycopg.Connection) -> dict[str, str]:
    return {row.id: json.dumps(row.value) for row in load_context(conn, T).rows}


def test_a_deleted_paste_never_reaches_the_context_and_an_edit_is_all_the_model_sees(
    stack: Settings, pg_dsn: str, pg_conn: psycopg.Connection, pg_schema: str, topic_names: dict[str, str]
) -> None:
    events = thread_history()
    assert [type(e).__name__ for e in events][-2:] == ["MessageDeleted", "HumanMessage"]
    edit = events[-1]
    assert isinstance(edit, HumanMessage) and edit.compact is not None  # the compactor redacted the edit
    topic, group = topic_names["compacted"], f"g-{pg_schema}"
    producer = Producer(producer_config(stack.kafka_bootstrap_servers))
    for e in [*events, *events[-2:]]:  # the delete and the edit delivered twice
        producer.produce(topic, key=e.key(), value=e.to_bytes())
    assert producer.flush(30) == 0
    high = high_watermarks(stack.kafka_bootstrap_servers, topic)
    config = ProjectorConfig(
        kafka=KafkaClient.plaintext(stack.kafka_bootstrap_servers), dsn=pg_dsn, schema=pg_schema,
        topic=topic, dlq_topic=topic_names["dlq"], group=group, batch_size=2,
    )  # fmt: skip
    project_until_caught_up(pg_conn, config, high)

    seen = context_text(pg_conn)
    paste_id, note_id = message_id(T, None, "human", PASTE), message_id(T, None, "human", NOTE)
    assert len(seen) == 3  # the three messages; neither the deletion nor the edit adds a row
    assert "hunter2" not in "".join(seen.values())
    assert json.loads(seen[paste_id]) == {"deleted": True, "user": "U123ABC456", "ts": PASTE}
    assert "09:27" in seen[note_id] and "09:26" not in seen[note_id]  # the edited text only
    assert "Sup3rS3cret" not in seen[note_id] and "[REDACTED:password]" in seen[note_id]
    raw: dict[str, str] = dict(pg_conn.execute("SELECT id, content->>'text' FROM agent_messages").fetchall())
    pg_conn.commit()
    assert raw[paste_id] == LEAK and raw[note_id] == "p99 went up at 09:26"  # the raw is kept

    into = f"{pg_schema}_replay"
    try:
        done = replay_cli(stack.kafka_bootstrap_servers, pg_dsn, into=into, topic=topic, group=group,
                          dlq_topic=topic_names["dlq"])  # fmt: skip
        assert done.returncode == 0, done.stderr
        rows = [
            pg_conn.execute(f'SELECT {MESSAGE_COLUMNS} FROM "{s}".agent_messages ORDER BY seq').fetchall()
            for s in (pg_schema, into)
        ]
        pg_conn.commit()
        assert rows[0] == rows[1]
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{into}" CASCADE')


def test_a_deletion_of_a_row_not_yet_projected_is_rejected_with_its_reason(
    pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    """The thread's partition orders a message before its deletion; a deletion that finds no row (its
    message was never projected, e.g. not in a thread) is dead-lettered with the reason, never applied
    to another row, and a message projected later is not hidden (documented in RELIABILITY.md)."""
    deletion = pipeline_events([deleted(PASTE, "1710600400.000500", message(TS, PASTE, LEAK))])
    [rejection] = apply_events(pg_conn, deletion, pg_schema)
    assert "is not projected" in rejection.reason
    assert context_text(pg_conn) == {}
