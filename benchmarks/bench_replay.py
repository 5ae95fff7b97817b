"""Replay rate: events/s to re-derive 1,000,000 events from a topic into an empty schema.

The events are human turns spread over 10,000 threads (round NULL, so they land directly),
produced once onto a topic of their own, then replayed with the same code path as
`incident-memory replay --from-beginning --into SCHEMA`. The live projector (`Projector.run`,
a consumer group) then projects the same topic into a schema of its own, and a plain `COPY` of
the replayed rows into an empty table in the same run gives the physical limit for both.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from confluent_kafka import Producer
from psycopg import sql

from benchmarks.bench_projector import measure_live
from deploy.local.pipeline import delete_topics
from schemas.events import HumanMessage
from schemas.ids import message_id
from schemas.topics import COMPACTED, TOPICS, TopicSpec, ensure_topics
from services.projector import plan_copy
from services.projector.config import ProjectorConfig
from services.projector.replay import replay
from services.runtime.kafka import producer_config
from services.runtime.settings import Settings

EVENTS = int(os.environ.get("BENCH_REPLAY_EVENTS", "1000000"))
THREADS = 10_000


def _produce(bootstrap: str, topic: str, n: int) -> float:
    producer = Producer(producer_config(bootstrap, **{"linger.ms": 50, "batch.size": 1_000_000}))
    t0 = datetime(2026, 3, 14, 3, 0, tzinfo=UTC)
    started = time.perf_counter()
    for i in range(n):
        thread_ts = f"1773{i % THREADS:06d}.000100"
        ts = f"1773{i:09d}.000200"
        event = HumanMessage(
            thread_ts=thread_ts,
            message_id=message_id(thread_ts, None, "human", ts),
            event_time=t0 + timedelta(milliseconds=i),
            user=f"U{i % 97:03d}",
            ts=ts,
            text=f"checkout pods restarting again, heap at {i % 512}Mi",
        )
        while True:
            try:
                producer.produce(topic, key=event.key(), value=event.to_bytes())
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(120)
    return time.perf_counter() - started


def _copy_limit(dsn: str, schema: str) -> float:
    """COPY the replayed rows into an empty copy of the table: what Postgres itself can take.

    The rows are first read out with a binary COPY, so only the COPY into the table is timed;
    the best of three runs is the limit.
    """
    columns = "id, thread_ts, round, role, tool_call_id, content, compact, tokens, created_at"
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        conn.execute("CREATE TABLE copy_target (LIKE agent_messages INCLUDING ALL)")
        conn.commit()
        chunks: list[bytes] = []
        with (
            conn.cursor() as cur,
            cur.copy(f"COPY (SELECT {columns} FROM agent_messages) TO STDOUT (FORMAT binary)") as out,
        ):
            chunks.extend(bytes(chunk) for chunk in out)
        runs = []
        for _attempt in range(3):  # best of three: one shot on a shared box swings widely
            conn.execute("TRUNCATE copy_target")
            conn.commit()
            started = time.perf_counter()
            with (
                conn.cursor() as cur,
                cur.copy(f"COPY copy_target ({columns}) FROM STDIN (FORMAT binary)") as copy,
            ):
                for chunk in chunks:
                    copy.write(chunk)
            conn.commit()
            runs.append(time.perf_counter() - started)
        return min(runs)


def _replay_through_the_batch_table(config: ProjectorConfig) -> float:
    """events/s of the same replay into a second empty schema with the direct COPY turned off:
    what the direct COPY of visible rows (plan_copy) gains, measured beside it."""
    schema = f"bench_replay_{uuid.uuid4().hex[:8]}"
    saved = plan_copy.DIRECT_MIN_ROWS
    plan_copy.DIRECT_MIN_ROWS = 1 << 62
    try:
        result = replay(replace(config, schema=schema), from_beginning=True, progress=False)
    finally:
        plan_copy.DIRECT_MIN_ROWS = saved
        with psycopg.connect(config.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    return result.events_per_second


def run(settings: Settings) -> dict[str, Any]:
    topic = f"bench.replay.{uuid.uuid4().hex[:8]}"
    schema = f"bench_replay_{uuid.uuid4().hex[:8]}"
    partitions = next(s.partitions for s in TOPICS if s.name == COMPACTED)
    ensure_topics(settings.kafka_bootstrap_servers, (TopicSpec(topic, partitions),))
    produce_s = _produce(settings.kafka_bootstrap_servers, topic, EVENTS)
    config = ProjectorConfig(
        kafka=settings.kafka,
        dsn=settings.database_url,
        schema=schema,
        topic=topic,
        group=f"bench-replay-{uuid.uuid4().hex[:6]}",
    )
    load_before = os.getloadavg()[0]
    result = replay(config, from_beginning=True, progress=False)
    load_after = os.getloadavg()[0]
    batch_table_only = _replay_through_the_batch_table(config)
    live = measure_live(settings, topic, config)
    with psycopg.connect(settings.database_url) as conn:
        found = conn.execute(
            sql.SQL("SELECT count(*) FROM {}.agent_messages").format(sql.Identifier(schema))
        ).fetchone()
    rows = int(found[0]) if found else 0
    copy_s = _copy_limit(settings.database_url, schema)
    with psycopg.connect(settings.database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    delete_topics(settings.kafka_bootstrap_servers, [topic])
    copy_rate = rows / copy_s if copy_s else 0.0
    live_rate = float(live["events_per_s"])  # one row per event
    md = (
        f"Replayed {result.events:,} events ({THREADS:,} threads, {partitions} partitions) from the beginning of a "
        f"topic into an empty schema through the projector's own writer (exactly-once: rows and offsets per "
        f"transaction).\n\n"
        f"| figure | value |\n|---|---:|\n"
        f"| events replayed | {result.events:,} |\n"
        f"| rows in agent_messages afterwards | {rows:,} |\n"
        f"| replay time | {result.seconds:.1f} s |\n"
        f"| **replay rate** | **{result.events_per_second:,.0f} events/s** |\n"
        f"| plain COPY of the same rows (limit, best of 3) | {copy_rate:,.0f} rows/s |\n"
        f"| replay / COPY | {result.events_per_second / copy_rate if copy_rate else 0:.2f} |\n"
        f"| the same replay, every row through the COPY plan's batch table (no direct COPY: "
        f"`plan_copy.DIRECT_MIN_ROWS` out of reach), same run | {batch_table_only:,.0f} events/s |\n"
        f"| live projector on the same topic (`Projector.run`; {live['events_timed']:,} events from its first "
        f"commit to its last) | {live_rate:,.0f} events/s |\n"
        f"| live projector / COPY | {live_rate / copy_rate if copy_rate else 0:.2f} |\n"
        f"| time to produce the events (setup) | {produce_s:.1f} s |\n"
        f"| load average before / after the replay (2 cores, shared) | {load_before:.2f} / {load_after:.2f} |\n"
    )
    return {
        "title": "Replay: re-deriving 1,000,000 events into an empty schema",
        "markdown": md,
        "events": result.events,
        "rows": rows,
        "events_per_second": result.events_per_second,
        "copy_rows_per_second": copy_rate,
        "replay_fraction_of_copy": round(result.events_per_second / copy_rate, 3) if copy_rate else 0.0,
        "replay_through_batch_table_events_per_second": round(batch_table_only),
        "live": live,
        "live_fraction_of_copy": round(live_rate / copy_rate, 3) if copy_rate else 0.0,
        "load_average_before_after": [round(load_before, 2), round(load_after, 2)],
    }
