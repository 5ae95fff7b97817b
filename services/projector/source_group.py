"""The live source: a consumer group on the compacted topic, followed for ever.

Positions come from Postgres only: on every partition assignment the consumer is told to start
at the offsets stored with the rows (`on_assign`), and after an offset conflict it seeks there
again. Kafka's committed offsets are written afterwards for lag dashboards, never read back
for correctness: each batch only stores its offsets in the client, and librdkafka commits the
latest stored ones once a second (and on close). A commit per batch was one OffsetCommit
request per record at low rates, each a write to `__consumer_offsets`, for a figure nothing
reads within the second.
"""

from __future__ import annotations

import logging
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from services.projector.config import ProjectorConfig
from services.projector.decoding import Incoming
from services.projector.intake import take_batch, usable
from services.projector.metrics import Metrics
from services.projector.plan import WriteOutcome
from services.projector.writer import BatchWriter, OffsetConflict
from services.runtime.kafka import consumer_config
from services.runtime.logs import about

log = logging.getLogger("projector")

LAG_EVERY_S = 2.0
COMMIT_EVERY_MS = 1000


class GroupSource:
    """Partitions as the group assigns them, each read from the offset stored in Postgres."""

    def __init__(self, config: ProjectorConfig, metrics: Metrics) -> None:
        self.config = config
        self.metrics = metrics
        self._generation = 0
        self._last_lag = 0.0
        self._writer: BatchWriter | None = None
        self._consumer: Consumer | None = None
        self._stop = threading.Event()

    @property
    def generation(self) -> int:
        return self._generation

    def open(self, writer: BatchWriter, stop: threading.Event) -> None:
        cfg = self.config
        self._writer, self._stop = writer, stop
        self._consumer = Consumer(
            consumer_config(
                cfg.kafka,
                cfg.group,
                **{
                    "session.timeout.ms": cfg.session_timeout_ms,
                    "heartbeat.interval.ms": 1000,
                    # for lag dashboards only (module docstring): stored per batch, committed per second
                    "enable.auto.commit": True,
                    "enable.auto.offset.store": False,
                    "auto.commit.interval.ms": COMMIT_EVERY_MS,
                },
            )
        )
        self._consumer.subscribe([cfg.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        log.info("projecting %s into schema %s", cfg.topic, cfg.schema, extra=about(None, group=cfg.group))

    def take(self, in_hand: bool) -> list[Incoming]:
        assert self._consumer is not None and self._writer is not None
        # Block for new records only when nothing waits to be written.
        timeout = 0.0 if in_hand else self.config.poll_timeout
        messages = usable(take_batch(self._consumer, self.config.batch_size, timeout))
        received = time.time()
        owned = self._writer.expected
        return [Incoming.from_message(m, received) for m in messages if m.partition() in owned]

    def exhausted(self) -> bool:
        return False

    def reseek(self, cause: OffsetConflict | None) -> None:
        """Believe Postgres, and read on from where it says."""
        assert self._writer is not None and self._consumer is not None
        stored = self._writer.load_offsets(self._stop)
        assigned = [tp.partition for tp in self._consumer.assignment()]
        self._writer.assign(assigned, stored)
        for p in assigned:
            self._consumer.seek(TopicPartition(self.config.topic, p, stored.get(p, OFFSET_BEGINNING)))

    def committed(self, outcome: WriteOutcome) -> None:
        """Store the batch's next offsets for the client's periodic commit (no request here)."""
        assert self._consumer is not None
        try:
            self._consumer.store_offsets(
                offsets=[TopicPartition(self.config.topic, p, n) for p, n in outcome.next_offsets.items()]
            )
        except KafkaException as exc:  # a partition revoked since its batch was read: its next owner
            log.debug("offsets not stored: %s", exc)  # reads from Postgres and commits its own

    def after_batch(self) -> None:
        assert self._consumer is not None
        now = time.monotonic()
        if now - self._last_lag < LAG_EVERY_S:
            return
        self._last_lag = now
        lags = {}
        for tp in self._consumer.position(self._consumer.assignment()):
            try:
                _low, high = self._consumer.get_watermark_offsets(tp, cached=True)  # from fetches: no I/O
            except KafkaException:
                continue
            if tp.offset >= 0:
                lags[tp.partition] = max(0, high - tp.offset)
        self.metrics.set_lag(lags)

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        assert self._writer is not None
        self._generation += 1
        stored = self._writer.load_offsets(self._stop)
        for tp in partitions:
            tp.offset = stored.get(tp.partition, OFFSET_BEGINNING)
        self._writer.assign([tp.partition for tp in partitions], stored)
        consumer.assign(partitions)
        log.info(
            "assigned %s",
            {tp.partition: tp.offset for tp in partitions},
            extra=about(None, topic=self.config.topic),
        )

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        assert self._writer is not None
        self._generation += 1
        self._writer.revoke([tp.partition for tp in partitions])
        consumer.unassign()
        log.info("revoked %s", [tp.partition for tp in partitions])
