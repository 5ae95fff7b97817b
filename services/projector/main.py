"""`incident-memory projector`: the projector service (Kafka `incident.compacted` -> Postgres)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from types import FrameType

import psycopg

from schemas import topics
from services.projector.config import DEFAULT_BATCH_SIZE, DEFAULT_GROUP, ProjectorConfig
from services.projector.decoding import warm_up
from services.projector.metrics import Metrics
from services.projector.projector import Projector
from services.runtime.checks import check_kafka, check_kafka_access
from services.runtime.errors import UserFacingError
from services.runtime.logs import about, configure_logging
from services.runtime.settings import Settings

log = logging.getLogger("incident_memory.projector")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--schema", default=os.environ.get("PROJECTOR_SCHEMA", "public"))
    parser.add_argument("--topic", default=topics.COMPACTED)
    parser.add_argument("--dlq-topic", default=topics.DLQ)
    parser.add_argument("--group", default=DEFAULT_GROUP)
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=int(os.environ.get("PROJECTOR_METRICS_PORT", "0")),
        help="serve Prometheus metrics on this port (0: off)",
    )
    parser.add_argument("--log-level", default=os.environ.get("LOG_LEVEL", "INFO"))


def run(args: argparse.Namespace) -> int:
    configure_logging("projector", args.log_level)
    if args.batch_size < 1:
        raise UserFacingError("--batch-size must be at least 1")
    settings = Settings.from_env()
    config = ProjectorConfig(
        kafka=settings.kafka,
        dsn=settings.database_url,
        schema=args.schema,
        topic=args.topic,
        dlq_topic=args.dlq_topic,
        group=args.group,
        batch_size=args.batch_size,
    )
    check_kafka(config.kafka)
    check_kafka_access(
        config.kafka,
        reads=(config.topic,),
        writes=(config.dlq_topic,),
        group=config.group,
        service="the projector",
    )
    spent = warm_up()  # before /healthz can say ready: the first record pays no first-use cost
    log.info("warmed up", extra=about(None, None, seconds=round(spent, 4)))
    metrics = Metrics()
    if args.metrics_port:
        metrics.serve(args.metrics_port)
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        Projector(config, metrics).run(stop)
    except psycopg.OperationalError as exc:  # only at start-up: once running, Postgres outages are retried
        raise UserFacingError(f"cannot reach Postgres: {' '.join(str(exc).split())}") from None
    return 0
