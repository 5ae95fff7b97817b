"""What a projection run needs to know, the flags it is read from, and the schema both modes migrate."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import psycopg

from schemas import topics
from schemas.migrate import apply_migrations
from services.runtime.kafka_client import KafkaClient
from services.runtime.settings import Settings

DEFAULT_GROUP = "incident-memory-projector"
# A batch is one transaction. Big batches matter when catching up (more rounds whose marker is in
# the same batch skip round_staging; fewer round trips per event): benchmarks/bench_replay.py compares
# batch sizes. At low load a batch is whatever is buffered, so no latency.
DEFAULT_BATCH_SIZE = 20_000


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

    @classmethod
    def from_args(cls, args: argparse.Namespace, schema: str) -> ProjectorConfig:
        """The environment's Kafka and database with the flags `projector` and `replay` share
        (`add_source_arguments`), into `schema`."""
        settings = Settings.from_env()
        return cls(kafka=settings.kafka, dsn=settings.database_url, schema=schema, topic=args.topic,
                   dlq_topic=args.dlq_topic, group=args.group, batch_size=args.batch_size)  # fmt: skip


def add_source_arguments(parser: argparse.ArgumentParser, group_help: str | None = None) -> None:
    """What both `projector` and `replay` read, under which group, in batches of what size."""
    parser.add_argument("--topic", default=topics.COMPACTED)
    parser.add_argument("--dlq-topic", default=topics.DLQ)
    parser.add_argument("--group", default=DEFAULT_GROUP, help=group_help)
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)


def migrate_schema(dsn: str, schema: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=False) as conn:
        return apply_migrations(conn, schema)
