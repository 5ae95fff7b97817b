"""`incident-memory replay`: re-derive the projection from the topic (invariant 8).

Replay reads partitions directly (no consumer group), from the beginning or from
the offsets stored in the target schema, up to the high watermarks captured at
start, through the same writer as the live projector: the same mapping, the same
transactions, the same offsets table. So a replay into an empty schema gives the
same rows as the live projection, and a live projector pointed at the replayed
schema afterwards carries on from where the replay stopped.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from tqdm import tqdm

from schemas import topics
from services.projector.metrics import Metrics
from services.projector.projector import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_GROUP,
    ProjectorConfig,
    make_writer,
    migrate_schema,
    take_batch,
)
from services.projector.writer import GcPacer, Incoming, Prepared, prepare
from services.runtime.errors import UserFacingError
from services.runtime.kafka import consumer_config
from services.runtime.logs import configure_logging
from services.runtime.settings import Settings


@dataclass(frozen=True)
class ReplayResult:
    events: int
    dead_letters: int
    rounds_committed: int
    seconds: float
    end_offsets: dict[int, int]

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0


def replay(config: ProjectorConfig, *, from_beginning: bool = False, progress: bool = True) -> ReplayResult:
    """Project `config.topic` into `config.schema` up to the high watermarks of now, then return."""
    try:
        migrate_schema(config.dsn, config.schema)
    except Exception as exc:  # a bad DSN or an unreachable Postgres is the user's to fix
        raise UserFacingError(f"cannot prepare schema {config.schema!r}: {str(exc).strip()}") from None
    metrics = Metrics()
    writer = make_writer(config, metrics)
    consumer = Consumer(
        consumer_config(config.kafka, f"{config.group}-replay", **{"enable.partition.eof": True})
    )
    try:
        meta = consumer.list_topics(config.topic, timeout=10).topics.get(config.topic)
        if meta is None or meta.error is not None or not meta.partitions:
            raise UserFacingError(f"topic {config.topic!r} does not exist")
        partitions = sorted(meta.partitions)
        stored = writer.load_offsets()
        writer.assign(partitions, stored)
        start: dict[int, int] = {}
        high: dict[int, int] = {}
        for p in partitions:
            low, hi = consumer.get_watermark_offsets(TopicPartition(config.topic, p), timeout=10)
            high[p] = hi
            start[p] = low if from_beginning else max(low, stored.get(p, low))
        pending = {p for p in partitions if start[p] < high[p]}
        position = dict(start)
        # Decode the next batch in a helper thread while this one commits (psycopg waits without the GIL).
        decoder = ThreadPoolExecutor(1, thread_name_prefix="replay-decode")
        began = time.monotonic()
        events = letters = rounds = 0
        bar = tqdm(
            total=sum(high[p] - start[p] for p in pending),
            unit="ev",
            unit_scale=True,
            desc=f"replay {config.topic} -> {config.schema}",
            disable=not progress,
            smoothing=0.05,
        )
        if pending:
            consumer.assign([TopicPartition(config.topic, p, start[p]) for p in sorted(pending)])
        in_flight: Future[Prepared] | None = None
        pacer = GcPacer()
        with pacer.paced():
            while pending or in_flight is not None:
                batch = _next_batch(consumer, config, pending, high) if pending else []
                upcoming = decoder.submit(prepare, batch) if batch else None
                if in_flight is not None:
                    outcome = writer.write_prepared(in_flight.result())
                    events += outcome.events
                    letters += outcome.dead_letters
                    rounds += outcome.rounds_committed
                    advanced = 0
                    for p, n in outcome.next_offsets.items():
                        advanced += n - position[p]
                        position[p] = n
                    bar.update(advanced)
                    pacer.tick(outcome.events + outcome.dead_letters)
                in_flight = upcoming
        decoder.shutdown()
        bar.close()
        return ReplayResult(events, letters, rounds, time.monotonic() - began, position)
    finally:
        consumer.close()
        writer.producer.flush(10)
        writer.close()


def _next_batch(
    consumer: Consumer, config: ProjectorConfig, pending: set[int], high: dict[int, int]
) -> list[Incoming]:
    """The next records below the captured high watermarks; a partition leaves `pending` at its end."""
    batch: list[Incoming] = []
    received = time.time()
    for m in take_batch(consumer, config.batch_size, 0.5):
        err = m.error()
        p = m.partition() or 0
        offset = m.offset() or 0
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                pending.discard(p)
                continue
            raise KafkaException(err)
        if p not in pending or offset >= high[p]:
            pending.discard(p)
            continue
        batch.append(Incoming.from_message(m, received))
        if offset + 1 >= high[p]:
            pending.discard(p)
    return batch


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from-beginning", action="store_true", help="ignore the offsets stored in the schema"
    )
    parser.add_argument("--into", default="public", metavar="SCHEMA", help="target Postgres schema (created)")
    parser.add_argument("--topic", default=topics.COMPACTED)
    parser.add_argument("--dlq-topic", default=topics.DLQ)
    parser.add_argument("--group", default=DEFAULT_GROUP, help="offsets are stored under this group name")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument("--no-progress", action="store_true")


def run(args: argparse.Namespace) -> int:
    configure_logging("replay", "WARNING")
    settings = Settings.from_env()
    config = ProjectorConfig(
        kafka=settings.kafka,
        dsn=settings.database_url,
        schema=args.into,
        topic=args.topic,
        dlq_topic=args.dlq_topic,
        group=args.group,
        batch_size=args.batch_size,
    )
    result = replay(config, from_beginning=args.from_beginning, progress=not args.no_progress)
    print(
        f"replayed {result.events:,} events into schema {args.into!r} in {result.seconds:.1f}s "
        f"({result.events_per_second:,.0f}/s); {result.rounds_committed:,} rounds published, "
        f"{result.dead_letters:,} dead letters"
    )
    return 0
