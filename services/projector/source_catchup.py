"""The catch-up source: every partition read directly (no group), up to the high watermarks of now.

It starts from the beginning or from the offsets stored in the target schema, and ends. Through
the runner it uses the same writer as the live projector: the same mapping, the same transactions,
the same offsets table, so a catch-up into an empty schema gives the same rows as the live
projection, and a live projector pointed at that schema afterwards carries on where it stopped.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from tqdm import tqdm

from services.projector.config import ProjectorConfig
from services.projector.decoding import Incoming
from services.projector.intake import take_batch
from services.projector.plan import WriteOutcome
from services.projector.writer import BatchWriter, OffsetConflict
from services.runtime.errors import UserFacingError
from services.runtime.kafka import consumer_config

POLL_TIMEOUT = 0.5


class CatchUpSource:
    """The range [start, high watermark at open) of every partition; `position` is how far it got."""

    def __init__(
        self, config: ProjectorConfig, *, from_beginning: bool = False, progress: bool = True
    ) -> None:
        self.config = config
        self.from_beginning = from_beginning
        self.progress = progress
        self.position: dict[int, int] = {}
        self._high: dict[int, int] = {}
        self._pending: set[int] = set()
        self._consumer: Consumer | None = None
        self._bar: tqdm[None] | None = None

    @property
    def generation(self) -> int:
        return 0  # no group, no rebalances

    def open(self, writer: BatchWriter, stop: threading.Event) -> None:
        cfg = self.config
        self._consumer = consumer = Consumer(
            consumer_config(cfg.kafka, f"{cfg.group}-replay", **{"enable.partition.eof": True})
        )
        meta = consumer.list_topics(cfg.topic, timeout=10).topics.get(cfg.topic)
        if meta is None or meta.error is not None or not meta.partitions:
            raise UserFacingError(f"topic {cfg.topic!r} does not exist")
        partitions = sorted(meta.partitions)
        stored = writer.load_offsets(stop)
        writer.assign(partitions, stored)
        start: dict[int, int] = {}
        for p in partitions:
            low, self._high[p] = consumer.get_watermark_offsets(TopicPartition(cfg.topic, p), timeout=10)
            start[p] = low if self.from_beginning else max(low, stored.get(p, low))
        self._pending = {p for p in partitions if start[p] < self._high[p]}
        self.position = dict(start)
        self._bar = tqdm(
            total=sum(self._high[p] - start[p] for p in self._pending),
            unit="ev",
            unit_scale=True,
            desc=f"replay {cfg.topic} -> {cfg.schema}",
            disable=not self.progress,
            smoothing=0.05,
        )
        if self._pending:
            consumer.assign([TopicPartition(cfg.topic, p, start[p]) for p in sorted(self._pending)])

    def take(self, in_hand: bool) -> list[Incoming]:
        """The next records below the high watermarks; a partition leaves `pending` at its end."""
        assert self._consumer is not None
        batch: list[Incoming] = []
        received = time.time()
        for m in take_batch(self._consumer, self.config.batch_size, POLL_TIMEOUT):
            err = m.error()
            p = m.partition() or 0
            offset = m.offset() or 0
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    self._pending.discard(p)
                    continue
                raise KafkaException(err)
            if p not in self._pending or offset >= self._high[p]:
                self._pending.discard(p)
                continue
            batch.append(Incoming.from_message(m, received))
            if offset + 1 >= self._high[p]:
                self._pending.discard(p)
        return batch

    def exhausted(self) -> bool:
        return not self._pending

    def reseek(self, cause: OffsetConflict | None) -> None:
        """Someone else writes this schema's offsets: a catch-up cannot know what to believe, so it stops."""
        raise cause or RuntimeError("a catch-up has no rebalances to re-seek after")

    def committed(self, outcome: WriteOutcome) -> None:
        advanced = 0
        for p, n in outcome.next_offsets.items():
            advanced += n - self.position[p]
            self.position[p] = n
        if self._bar is not None:
            self._bar.update(advanced)

    def after_batch(self) -> None:
        pass

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._consumer is not None:
            self._consumer.close()
