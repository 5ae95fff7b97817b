"""Shared helpers of the projector tests: apply events through the real SQL, read tables back."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

from schemas.events import EventBase
from services.projector import store
from services.projector.config import ProjectorConfig
from services.projector.mapping import map_event
from services.projector.plan import Plan, Rejection
from services.projector.projector import Projector
from services.projector.row_format import COLUMN_LIST

MESSAGE_COLUMNS = COLUMN_LIST


def apply_events(
    conn: psycopg.Connection,
    events: Sequence[EventBase],
    schema: str,
    batch: int = 1000,
    plans: Sequence[Plan] = store.PLANS,
) -> list[Rejection]:
    """Apply events through store.apply_batch, `batch` events per transaction (no Kafka), with `plans`."""
    rejections: list[Rejection] = []
    for start in range(0, len(events), batch):
        chunk = events[start : start + batch]
        with conn.transaction():
            result = store.apply_batch(
                conn,
                [(start + k, map_event(e)) for k, e in enumerate(chunk)],
                group="g",
                topic="t",
                partitions=[0],
                next_offsets={0: start + len(chunk)},
                schema=schema,
                plans=plans,
            )
        rejections.extend(result.rejections)
    return rejections


def messages(
    conn: psycopg.Connection, schema: str | None = None, thread_ts: str | None = None
) -> list[tuple[Any, ...]]:
    """agent_messages in seq order, every column but seq."""
    table = f'"{schema}".agent_messages' if schema else "agent_messages"
    where = " WHERE thread_ts = %s" if thread_ts else ""
    params = (thread_ts,) if thread_ts else ()
    rows = conn.execute(f"SELECT {MESSAGE_COLUMNS} FROM {table}{where} ORDER BY seq", params).fetchall()
    conn.commit()
    return rows


def table(
    conn: psycopg.Connection, name: str, schema: str | None = None, order: str = "1"
) -> list[tuple[Any, ...]]:
    qualified = f'"{schema}".{name}' if schema else name
    rows = conn.execute(f"SELECT * FROM {qualified} ORDER BY {order}").fetchall()
    conn.commit()
    return rows


def produce_raw(bootstrap: str, topic: str, records: Sequence[tuple[bytes, bytes]]) -> None:
    """Produce (key, value) records, in order, and wait until all are acknowledged."""
    from confluent_kafka import Producer

    from services.runtime.kafka import producer_config

    producer = Producer(producer_config(bootstrap))
    for key, value in records:
        producer.produce(topic, key=key, value=value)
        producer.poll(0)
    assert producer.flush(30) == 0


def produce_events(bootstrap: str, topic: str, events: Sequence[EventBase]) -> None:
    produce_raw(bootstrap, topic, [(e.key(), e.to_bytes()) for e in events])


def high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
    finally:
        consumer.close()


def stored_offsets(conn: psycopg.Connection, group: str, topic: str) -> dict[int, int]:
    rows = conn.execute(
        "SELECT partition, next_offset FROM projector_offsets WHERE consumer_group = %s AND topic = %s",
        (group, topic),
    ).fetchall()
    conn.commit()
    return {int(p): int(n) for p, n in rows}


def wait_until(condition: Any, timeout: float, what: str, every: float = 0.05) -> None:
    """Poll `condition()` until true, failing with `what` at the deadline."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def caught_up(conn: psycopg.Connection, group: str, topic: str, high: dict[int, int]) -> bool:
    stored = stored_offsets(conn, group, topic)
    return all(stored.get(p, 0) >= h for p, h in high.items() if h > 0)


def read_topic(bootstrap: str, topic: str, expect: int, timeout: float = 20) -> list[Any]:
    """Read `expect` records from the start of `topic` (e.g. the DLQ)."""
    import time
    import uuid

    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([topic])
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expect and time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m)
    finally:
        consumer.close()
    return got


def replay_cli(
    bootstrap: str, dsn: str, *, into: str, topic: str, group: str, dlq_topic: str
) -> subprocess.CompletedProcess[str]:
    """`incident-memory replay --from-beginning` of `topic` into the schema `into`, as a user runs it."""
    cli = str(Path(sys.executable).parent / "incident-memory")
    return subprocess.run(
        [cli, "replay", "--from-beginning", "--into", into, "--topic", topic, "--group", group,
         "--dlq-topic", dlq_topic, "--batch-size", "1000"],
        env={**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "DATABASE_URL": dsn},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def project_until_caught_up(conn: psycopg.Connection, config: ProjectorConfig, high: dict[int, int]) -> None:
    """Run the live projector on its own thread until its stored offsets reach `high`, then stop it."""
    stop = threading.Event()
    live = threading.Thread(target=Projector(config).run, args=(stop,))
    live.start()
    try:
        wait_until(lambda: caught_up(conn, config.group, config.topic, high), 30, "live projection")
    finally:
        stop.set()
        live.join(30)
