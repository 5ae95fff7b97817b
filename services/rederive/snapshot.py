"""Read a projection (and a run's dead letters) into a `diff.Snapshot`: the I/O half of the diff."""

from __future__ import annotations

import json
from collections.abc import Sequence

import psycopg
from psycopg import sql

from schemas.compact_diff import Row, Snapshot
from services.rederive.progress import high_watermarks
from services.runtime.kafka import consumer_config
from services.runtime.kafka_client import KafkaClient

ROWS = "SELECT id, thread_ts, role, compact, tokens FROM {}.agent_messages"


def read_rows(conn: psycopg.Connection, schema: str, threads: Sequence[str] = ()) -> dict[str, Row]:
    """Every visible row of `schema` (of `threads` only, when given), by id."""
    query = sql.SQL(ROWS).format(sql.Identifier(schema))
    if threads:
        query = query + sql.SQL(" WHERE thread_ts = ANY(%s)")
        records = conn.execute(query, (list(threads),)).fetchall()
    else:
        records = conn.execute(query).fetchall()
    return {r[0]: Row(r[0], r[1], r[2], r[3], int(r[4])) for r in records}


def read_dead_letters(kafka: KafkaClient, topic: str, timeout: float = 60.0) -> dict[str, str]:
    """message_id -> reason, for every dead letter on `topic` whose payload names its message."""
    from confluent_kafka import Consumer, TopicPartition

    highs = high_watermarks(kafka, topic)
    if not any(highs.values()):
        return {}
    consumer = Consumer(consumer_config(kafka, "incident-memory-rederive-meta"))
    out: dict[str, str] = {}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in highs])
        left = {p: h for p, h in highs.items() if h > 0}
        import time

        deadline = time.monotonic() + timeout
        while left and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=1.0):
                if msg.error() is not None:
                    continue
                p, offset = msg.partition(), msg.offset()
                if p is not None and offset is not None and offset + 1 >= left.get(p, 0):
                    left.pop(p, None)
                try:
                    letter = json.loads(msg.value() or b"{}")
                    payload = json.loads(letter.get("payload") or "{}")
                except (ValueError, TypeError):
                    continue
                mid = payload.get("message_id") if isinstance(payload, dict) else None
                if isinstance(mid, str):
                    out[mid] = str(letter.get("reason", "?"))
        return out
    finally:
        consumer.close()


def snapshot(
    conn: psycopg.Connection,
    schema: str,
    *,
    kafka: KafkaClient | None = None,
    dlq_topic: str | None = None,
    threads: Sequence[str] = (),
) -> Snapshot:
    dead = read_dead_letters(kafka, dlq_topic) if kafka is not None and dlq_topic else {}
    return Snapshot(schema, read_rows(conn, schema, threads), dead)
