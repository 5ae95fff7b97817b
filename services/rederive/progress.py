"""How far a re-derivation is: positions against a target, per partition, and an ETA.

The compactor's position is what its consumer group committed on the events topic (faust commits
after the outputs are flushed, so a committed offset means its output is on the compacted topic);
the projector's is `projector_offsets` in the target schema (written in the same transaction as
the rows). The target is the high watermarks taken at start: records produced later are the live
tail, which the run follows only with `--follow`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from schemas import projections
from services.runtime.kafka import consumer_config
from services.runtime.kafka_client import KafkaClient

Offsets = dict[int, int]  # partition -> next offset


def remaining(target: Mapping[int, int], position: Mapping[int, int]) -> int:
    """Records between `position` and `target`, summed over the target's partitions."""
    return sum(max(0, high - max(position.get(p, 0), 0)) for p, high in target.items())


def high_watermarks(kafka: KafkaClient, topic: str, timeout: float = 10.0) -> Offsets:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(consumer_config(kafka, "incident-memory-rederive-meta"))
    try:
        meta = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            return {}
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
            for p in sorted(meta.partitions)
        }
    finally:
        consumer.close()


def committed(
    kafka: KafkaClient, group: str, topic: str, partitions: list[int], timeout: float = 10.0
) -> Offsets:
    """What `group` committed on `topic` (0 where it committed nothing). Never joins the group."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(consumer_config(kafka, group))
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=timeout)
        return {tp.partition: max(tp.offset, 0) for tp in found}
    finally:
        consumer.close()


def projected(conn: psycopg.Connection, schema: str, group: str, topic: str) -> Offsets:
    """The projector's stored next offsets in `schema` (empty if the table is not there yet)."""
    if not projections.table_exists(conn, schema, "projector_offsets"):
        return {}
    query = sql.SQL(
        "SELECT partition, next_offset FROM {}.projector_offsets WHERE consumer_group = %s AND topic = %s"
    ).format(sql.Identifier(schema))
    return {int(p): int(n) for p, n in conn.execute(query, (group, topic)).fetchall()}


@dataclass
class Eta:
    """Throughput over a sliding window of samples, and the time left at that rate. Pure: tested."""

    window: float = 15.0
    samples: list[tuple[float, int]] = field(default_factory=list)

    def add(self, t: float, done: int) -> None:
        self.samples.append((t, done))
        while len(self.samples) > 2 and t - self.samples[0][0] > self.window:
            self.samples.pop(0)

    def rate(self) -> float:
        if len(self.samples) < 2:
            return 0.0
        (t0, d0), (t1, d1) = self.samples[0], self.samples[-1]
        return (d1 - d0) / (t1 - t0) if t1 > t0 else 0.0

    def seconds_left(self, left: int) -> float | None:
        rate = self.rate()
        if left <= 0:
            return 0.0
        return left / rate if rate > 0 else None


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA ?"
    s = round(seconds)
    return f"ETA {s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"ETA {s // 60}m{s % 60:02d}s"


def progress_line(stage: str, done: int, total: int, eta: Eta) -> str:
    """`compactor 1,200/5,000 (24%) 410/s ETA 0m09s`."""
    pct = 100.0 * done / total if total else 100.0
    left = max(0, total - done)
    return f"{stage} {done:,}/{total:,} ({pct:.0f}%) {eta.rate():,.0f}/s {format_eta(eta.seconds_left(left))}"


def now() -> float:
    return time.monotonic()
