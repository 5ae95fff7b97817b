"""The projector's Kafka loop: config, wiring, loop.

Positions come from Postgres only: on every partition assignment the consumer is
told to start at the offsets stored with the rows (`on_assign`), and after an
offset conflict it seeks there again. Kafka's committed offsets are written
afterwards for lag dashboards, never read back for correctness.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from schemas import topics
from schemas.migrate import apply_migrations
from services.projector import store
from services.projector.metrics import Metrics
from services.projector.writer import (
    BatchWriter,
    GcPacer,
    Incoming,
    OffsetConflict,
    Prepared,
    Stopped,
    prepare,
)
from services.runtime.kafka import consumer_config, producer_config
from services.runtime.kafka_client import KafkaClient
from services.runtime.logs import about

log = logging.getLogger("projector")

DEFAULT_GROUP = "incident-memory-projector"
# A batch is one transaction. Big batches matter when catching up (more rounds whose marker is in
# the same batch skip round_staging; fewer round trips per event): 20,000 records projected ~20%
# faster than 5,000 on the benchmark. At low load a batch is whatever is buffered, so no latency.
DEFAULT_BATCH_SIZE = 20_000
DEFAULT_BATCH_BYTES = 32 * 1024 * 1024
DRAIN_STEP = 500  # records per drain call: a batch passes max_bytes by less than one step
LAG_EVERY_S = 2.0


# --- config ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProjectorConfig:
    kafka: KafkaClient
    dsn: str
    schema: str = "public"
    topic: str = topics.COMPACTED
    dlq_topic: str = topics.DLQ
    group: str = DEFAULT_GROUP
    batch_size: int = DEFAULT_BATCH_SIZE
    poll_timeout: float = 0.2
    migrate: bool = True
    # A projector killed hard is replaced after this long (the broker's minimum is 6 s by default);
    # processing time is bounded by max.poll.interval.ms, not by this.
    session_timeout_ms: int = 6000


# --- wiring ------------------------------------------------------------------------------


def migrate_schema(dsn: str, schema: str) -> list[str]:
    import psycopg

    with psycopg.connect(dsn, autocommit=False) as conn:
        return apply_migrations(conn, schema)


def make_writer(config: ProjectorConfig, metrics: Metrics | None, *, notify: bool = True) -> BatchWriter:
    producer = Producer(producer_config(config.kafka, **{"linger.ms": 0}))
    return BatchWriter(
        dsn=config.dsn,
        schema=config.schema,
        group=config.group,
        topic=config.topic,
        dlq_topic=config.dlq_topic,
        producer=producer,
        metrics=metrics,
        notify=notify,
    )


def take_batch(
    consumer: Consumer, size: int, timeout: float, max_bytes: int = DEFAULT_BATCH_BYTES
) -> list[Message]:
    """Block for the first record only, then drain what is already buffered: low latency, big batches.

    A batch stops at `size` records or once its values pass `max_bytes` (so a backlog of large
    tool results does not hold tens of thousands of raws in memory at once, twice over).
    """
    messages = consumer.consume(num_messages=min(size, DRAIN_STEP), timeout=0)
    if not messages:
        messages = consumer.consume(num_messages=1, timeout=timeout)
    held = sum(len(m.value() or b"") for m in messages)
    while messages and len(messages) < size and held < max_bytes:
        more = consumer.consume(num_messages=min(size - len(messages), DRAIN_STEP), timeout=0)
        if not more:
            break
        messages += more
        held += sum(len(m.value() or b"") for m in more)
    return messages


def usable(messages: list[Message]) -> list[Message]:
    """Records with data; end-of-partition notices are dropped and real errors raised."""
    kept = []
    for m in messages:
        err = m.error()
        if err is None:
            kept.append(m)
        elif err.code() == KafkaError._PARTITION_EOF:
            continue
        elif err.fatal():
            raise KafkaException(err)
        else:
            log.warning("consumer error: %s", err)
    return kept


# --- loop --------------------------------------------------------------------------------


class Projector:
    """Consumes the compacted topic in a consumer group and projects it, batch by batch."""

    def __init__(self, config: ProjectorConfig, metrics: Metrics | None = None) -> None:
        self.config = config
        self.metrics = metrics or Metrics()
        self.writer: BatchWriter | None = None
        self.consumer: Consumer | None = None
        self._stop: threading.Event = threading.Event()
        self._last_lag = 0.0
        self._generation = 0  # bumped by every assignment change: a batch polled before it is stale

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        assert self.writer is not None
        self._generation += 1
        stored = self.writer.load_offsets(self._stop)
        for tp in partitions:
            tp.offset = stored.get(tp.partition, OFFSET_BEGINNING)
        self.writer.assign([tp.partition for tp in partitions], stored)
        consumer.assign(partitions)
        log.info(
            "assigned %s",
            {tp.partition: tp.offset for tp in partitions},
            extra=about(None, topic=self.config.topic),
        )

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        assert self.writer is not None
        self._generation += 1
        self.writer.revoke([tp.partition for tp in partitions])
        consumer.unassign()
        log.info("revoked %s", [tp.partition for tp in partitions])

    def _reseek(self) -> None:
        """After an offset conflict: believe Postgres, and read on from where it says."""
        assert self.writer is not None and self.consumer is not None
        stored = self.writer.load_offsets(self._stop)
        assigned = [tp.partition for tp in self.consumer.assignment()]
        self.writer.assign(assigned, stored)
        for p in assigned:
            self.consumer.seek(TopicPartition(self.config.topic, p, stored.get(p, OFFSET_BEGINNING)))

    def _update_lag(self) -> None:
        assert self.consumer is not None
        now = time.monotonic()
        if now - self._last_lag < LAG_EVERY_S:
            return
        self._last_lag = now
        lags = {}
        for tp in self.consumer.position(self.consumer.assignment()):
            try:
                _low, high = self.consumer.get_watermark_offsets(tp, cached=True)  # from fetches: no I/O
            except KafkaException:
                continue
            if tp.offset >= 0:
                lags[tp.partition] = max(0, high - tp.offset)
        self.metrics.set_lag(lags)

    def run(self, stop: threading.Event | None = None, on_commit: Callable[[], None] | None = None) -> None:
        """Project until `stop` is set (SIGTERM in the service). A stop never leaves a half batch.

        Two batches are in hand at once: the next one is decoded in a helper thread while this
        one commits (psycopg waits for Postgres without the GIL), as replay does. A batch is only
        ever written if no rebalance happened since it was polled; otherwise both are dropped
        and every partition is read again from the offsets in Postgres.
        """
        self._stop = stop or threading.Event()
        cfg = self.config
        if cfg.migrate:
            migrate_schema(cfg.dsn, cfg.schema)
        self.writer = make_writer(cfg, self.metrics)
        self.consumer = Consumer(
            consumer_config(
                cfg.kafka,
                cfg.group,
                **{"session.timeout.ms": cfg.session_timeout_ms, "heartbeat.interval.ms": 1000},
            )
        )
        self.consumer.subscribe([cfg.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        log.info("projecting %s into schema %s", cfg.topic, cfg.schema, extra=about(None, group=cfg.group))
        decoder = ThreadPoolExecutor(1, thread_name_prefix="projector-decode")
        in_flight: InFlight | None = None
        pacer = GcPacer()
        try:
            with pacer.paced():
                while not self._stop.is_set():
                    # Block for new records only when nothing waits to be written.
                    timeout = 0.0 if in_flight is not None else cfg.poll_timeout
                    messages = usable(take_batch(self.consumer, cfg.batch_size, timeout))
                    self.metrics.heartbeat.beat()
                    if in_flight is not None and in_flight.generation != self._generation:
                        log.info("rebalanced while a batch was in hand: dropped, re-reading from Postgres")
                        in_flight = None
                        self._reseek()
                        continue
                    received = time.time()
                    batch = [
                        Incoming.from_message(m, received)
                        for m in messages
                        if m.partition() in self.writer.expected
                    ]
                    upcoming = InFlight(decoder.submit(prepare, batch), self._generation) if batch else None
                    if in_flight is not None:
                        try:
                            outcome = self.writer.write_prepared(in_flight.prepared.result(), self._stop)
                        except OffsetConflict as exc:
                            log.warning("offset conflict, re-seeking from Postgres: %s", exc)
                            in_flight = None
                            self._reseek()
                            continue
                        except Stopped:
                            break
                        self.consumer.commit(
                            offsets=[
                                TopicPartition(cfg.topic, p, n) for p, n in outcome.next_offsets.items()
                            ],
                            asynchronous=True,
                        )
                        if on_commit is not None:
                            on_commit()
                        pacer.tick(outcome.events + outcome.dead_letters)
                    in_flight = upcoming
                    self._update_lag()
        finally:
            decoder.shutdown(wait=True, cancel_futures=True)
            self.consumer.close()
            self.writer.producer.flush(10)
            self.writer.close()
            log.info("projector stopped")


@dataclass(frozen=True)
class InFlight:
    """A batch being decoded, and the assignment generation it was polled under."""

    prepared: Future[Prepared]
    generation: int


def store_offsets(dsn: str, schema: str, group: str, topic: str) -> dict[int, int]:
    """The offsets a projector would resume from (tests, replay)."""
    conn = store.connect(dsn, schema)
    try:
        return store.load_offsets(conn, group, topic)
    finally:
        conn.close()
