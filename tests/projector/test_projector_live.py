"""The projector's Kafka loop against the real broker and Postgres (in-process)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest

from deploy.local.testdata import T0, interleave, synthetic_human, synthetic_thread
from services.projector.config import ProjectorConfig
from services.projector.metrics import Metrics
from services.projector.projector import Projector
from services.runtime.kafka_client import KafkaClient

from .helpers import (
    apply_events,
    caught_up,
    high_watermarks,
    messages,
    produce_events,
    produce_raw,
    read_topic,
    stored_offsets,
    wait_until,
)

T = "1710406800.000100"


@pytest.fixture
def running(
    kafka_bootstrap: str, pg_dsn: str, pg_schema: str, topic_names: dict[str, str]
) -> Iterator[tuple[ProjectorConfig, Metrics]]:
    config = ProjectorConfig(
        kafka=KafkaClient.plaintext(kafka_bootstrap),
        dsn=pg_dsn,
        schema=pg_schema,
        topic=topic_names["compacted"],
        dlq_topic=topic_names["dlq"],
        group=f"g-{pg_schema}",
        batch_size=50,
    )
    metrics = Metrics()
    stop = threading.Event()
    thread = threading.Thread(target=Projector(config, metrics).run, args=(stop,))
    thread.start()
    yield config, metrics
    stop.set()
    thread.join(30)
    assert not thread.is_alive()


def test_duplicates_project_once_and_match_a_direct_projection(
    running: tuple[ProjectorConfig, Metrics], pg_dsn: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    config, metrics = running
    threads = [synthetic_thread(f"171040{k:04d}.000100") for k in range(6)]
    events = interleave(threads)
    produce_events(config.kafka.bootstrap_servers, config.topic, events)
    produce_events(config.kafka.bootstrap_servers, config.topic, events)  # every event delivered twice
    high = high_watermarks(config.kafka.bootstrap_servers, config.topic)
    wait_until(lambda: caught_up(pg_conn, config.group, config.topic, high), 30, "projector to catch up")
    live = {t[0].thread_ts: messages(pg_conn, thread_ts=t[0].thread_ts) for t in threads}
    assert all(len(rows) == 20 for rows in live.values())
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        from schemas.migrate import apply_migrations

        apply_migrations(conn, f"{pg_schema}_direct")
    try:
        direct_conn = psycopg.connect(pg_dsn, options=f"-c search_path={pg_schema}_direct")
        for t in threads:
            apply_events(direct_conn, t, f"{pg_schema}_direct")
        for t in threads:
            assert messages(direct_conn, thread_ts=t[0].thread_ts) == live[t[0].thread_ts]
        direct_conn.close()
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{pg_schema}_direct" CASCADE')
    # Metrics move just after the commit that the offsets reveal: wait for them, briefly.
    wait_until(lambda: metrics.value("projector_events_projected_total") == 2 * len(events), 5, "metrics")
    assert (
        metrics.value("projector_rounds_committed_total") == len(threads) * 2
    )  # 2 rounds each; duplicates publish nothing
    assert metrics.value("projector_dead_letters_total") == 0


def test_poison_events_go_to_the_dlq_and_the_partition_keeps_flowing(
    running: tuple[ProjectorConfig, Metrics], pg_conn: psycopg.Connection
) -> None:
    config, metrics = running
    key = T.encode()
    good = synthetic_human(T, T0, 1)
    after = synthetic_human(T, T0 + timedelta(minutes=1), 2)
    wrong_version = json.loads(good.to_bytes())
    wrong_version["schema_version"] = 99
    nul = json.loads(synthetic_human(T, T0, 3).to_bytes())
    nul["text"] = "bad \u0000 byte"  # valid JSON and a valid event, but jsonb cannot store U+0000
    records = [
        (key, good.to_bytes()),
        (key, good.to_bytes()[:40]),  # truncated JSON
        (key, json.dumps(wrong_version).encode()),
        (key, json.dumps(nul).encode()),
        (key, after.to_bytes()),
    ]
    produce_raw(config.kafka.bootstrap_servers, config.topic, records)
    high = high_watermarks(config.kafka.bootstrap_servers, config.topic)
    wait_until(
        lambda: caught_up(pg_conn, config.group, config.topic, high), 30, "projector to pass the poison"
    )
    assert [r[0] for r in messages(pg_conn)] == [good.message_id, after.message_id]
    letters = [json.loads(m.value()) for m in read_topic(config.kafka.bootstrap_servers, config.dlq_topic, 3)]
    assert len(letters) == 3
    reasons = [letter["reason"] for letter in letters]
    assert reasons[0].startswith("not JSON")
    assert "schema_version 99" in reasons[1]
    assert "database refused the row" in reasons[2]
    (partition,) = {p for p, h in high.items() if h}
    assert [letter["offset"] for letter in letters] == [1, 2, 3]
    assert {letter["partition"] for letter in letters} == {partition}
    assert all(letter["source_topic"] == config.topic for letter in letters)
    wait_until(lambda: metrics.value("projector_dead_letters_total") == 3, 5, "dead-letter metric")


def kafka_committed(bootstrap: str, group: str, topic: str, partitions: list[int]) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = reader.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
        return {tp.partition: tp.offset for tp in found}
    finally:
        reader.close()


def test_kafka_offsets_follow_postgres_for_lag_dashboards_while_running(
    running: tuple[ProjectorConfig, Metrics], pg_conn: psycopg.Connection
) -> None:
    """Positions are Postgres's; the group's offsets in Kafka are only for lag dashboards. They are
    stored per batch and committed by the client once a second: within a few seconds of catching up,
    and while the projector still runs, Kafka has the very offsets Postgres has."""
    config, _metrics = running
    threads = [synthetic_thread(f"171050{k:04d}.000100") for k in range(4)]
    produce_events(config.kafka.bootstrap_servers, config.topic, interleave(threads))
    high = high_watermarks(config.kafka.bootstrap_servers, config.topic)
    wait_until(lambda: caught_up(pg_conn, config.group, config.topic, high), 30, "projector to catch up")
    stored = stored_offsets(pg_conn, config.group, config.topic)
    written = sorted(p for p, h in high.items() if h)
    assert {p: stored[p] for p in written} == {p: high[p] for p in written}
    wait_until(
        lambda: (
            kafka_committed(config.kafka.bootstrap_servers, config.group, config.topic, written)
            == {p: high[p] for p in written}
        ),
        10,
        "the group's offsets in Kafka to reach Postgres's",
        every=0.25,
    )
