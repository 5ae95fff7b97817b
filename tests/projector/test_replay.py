"""Replay re-derives the live projection from the topic (invariant 8): row by row, in the same order."""

from __future__ import annotations

import json
from datetime import timedelta

import psycopg
from confluent_kafka import Producer

from deploy.local.testdata import T0, synthetic_round, synthetic_thread
from schemas.events import EventBase, IncidentStateChanged, RecalledIncident, RecallRecorded, ReRendered
from schemas.ids import message_id
from schemas.tokens import count_value_tokens
from services.projector.config import ProjectorConfig
from services.runtime.kafka import producer_config
from services.runtime.kafka_client import KafkaClient
from services.runtime.settings import Settings

from .helpers import MESSAGE_COLUMNS, high_watermarks, project_until_caught_up, replay_cli


def history() -> list[EventBase]:
    a, b = "1710500001.000100", "1710500002.000100"
    thread_a, thread_b = synthetic_thread(a), synthetic_thread(b)
    compact = {"headline": "api heap exhausted", "evidence_id": message_id(a, 1, "tools", 0)}
    extras: list[EventBase] = [
        *synthetic_round(a, 3, T0 + timedelta(hours=1), marker=False),  # a round that died
        ReRendered(
            thread_ts=a,
            message_id=message_id(a, 4, "rerender", 0),
            event_time=T0 + timedelta(hours=2),
            round=4,
            target_id=message_id(a, 1, "tools", 0),
            compact=compact,
            tokens=count_value_tokens(compact),
            policy="headline",
        ),
        IncidentStateChanged(
            thread_ts=b,
            message_id=message_id(b, None, "state", 0),
            event_time=T0 + timedelta(hours=3),
            status="resolved",
            service="checkout-api",
            window_start=T0,
            window_end=T0 + timedelta(hours=1),
            opened_at=T0,
        ),
        RecallRecorded(  # the agent's recall at b's open (issue 37): a row the replay re-derives as it was
            thread_ts=b,
            message_id=message_id(b, None, "recall", 0),
            event_time=T0 + timedelta(minutes=1),
            channel="C0INCIDENT",
            hits=[RecalledIncident(thread=a, kind="concurrent", score_milli=612, reasons=["same service"])],
        ),
    ]
    mixed = [e for pair in zip(thread_a, thread_b, strict=False) for e in pair]
    return [*mixed, *thread_a[len(thread_b) :], *extras, *thread_a[:5]]  # and some late duplicates


def snapshot(conn: psycopg.Connection, schema: str) -> dict[str, list[tuple[object, ...]]]:
    q = {
        "agent_messages": f"SELECT {MESSAGE_COLUMNS} FROM {{}}.agent_messages ORDER BY seq",
        "round_staging": "SELECT * FROM {}.round_staging ORDER BY id",
        "incident_state": "SELECT * FROM {}.incident_state ORDER BY thread_ts",
        "tool_digest_cache": "SELECT * FROM {}.tool_digest_cache ORDER BY 1, 2, 3",
        "projector_offsets": "SELECT * FROM {}.projector_offsets ORDER BY 1, 2, 3",
        "incident_profile_facts": "SELECT * FROM {}.incident_profile_facts ORDER BY 1, 2",
        "incident_profiles": "SELECT * FROM {}.incident_profiles ORDER BY thread_ts",
        "incident_signature_counts": "SELECT * FROM {}.incident_signature_counts WHERE n <> 0 ORDER BY key",
        "incident_recall_keys": "SELECT * FROM {}.incident_recall_keys ORDER BY 1, 2",
    }
    out = {name: conn.execute(sql.format(f'"{schema}"')).fetchall() for name, sql in q.items()}
    conn.commit()
    return out


def test_replay_into_a_fresh_schema_equals_the_live_projection(
    stack: Settings, pg_dsn: str, pg_conn: psycopg.Connection, pg_schema: str, topic_names: dict[str, str]
) -> None:
    topic, group = topic_names["compacted"], f"g-{pg_schema}"
    events = history()
    producer = Producer(producer_config(stack.kafka_bootstrap_servers))
    # One partition: then even the global seq order is determined by the topic. (Across partitions
    # only each thread's order is: Kafka fixes no order between partitions.)
    for e in events:
        producer.produce(topic, key=e.key(), value=e.to_bytes(), partition=0)
    producer.produce(topic, key=b"x", value=b'{"truncated', partition=0)  # and a poison record
    assert producer.flush(30) == 0
    high = high_watermarks(stack.kafka_bootstrap_servers, topic)
    config = ProjectorConfig(
        kafka=KafkaClient.plaintext(stack.kafka_bootstrap_servers),
        dsn=pg_dsn,
        schema=pg_schema,
        topic=topic,
        dlq_topic=topic_names["dlq"],
        group=group,
        batch_size=9,
    )
    project_until_caught_up(pg_conn, config, high)
    into = f"{pg_schema}_replay"
    try:
        done = replay_cli(stack.kafka_bootstrap_servers, pg_dsn, into=into, topic=topic, group=group,
                          dlq_topic=topic_names["dlq"])  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "ev/s" in done.stderr  # the progress bar, with its rate
        assert f"replayed {len(events):,} events" in done.stdout
        replayed, original = snapshot(pg_conn, into), snapshot(pg_conn, pg_schema)
        assert len(original["agent_messages"]) == 41  # 40 and the recall row
        assert original["round_staging"]  # the dead round stays staged, in both
        for name in original:
            assert replayed[name] == original[name], name
        profiles = {p[0]: p for p in original["incident_profiles"]}
        assert set(profiles) == {"1710500001.000100", "1710500002.000100"}  # and rebuilt identically
        assert profiles["1710500001.000100"][1] == "HighErrorRate"
        recalled = {r[0]: r for r in replayed["agent_messages"]}[
            message_id("1710500002.000100", None, "recall", 0)
        ]
        content = json.loads(json.dumps(recalled[5]))
        assert recalled[3] == "alert" and content["recall"][0]["thread"] == "1710500001.000100"
        rerendered = {r[0]: r for r in replayed["agent_messages"]}[
            message_id("1710500001.000100", 1, "tools", 0)
        ]
        assert json.loads(json.dumps(rerendered[6]))["headline"] == "api heap exhausted"
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{into}" CASCADE')
