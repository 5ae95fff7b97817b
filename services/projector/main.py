"""`incident-memory projector`: the projector service (Kafka `incident.compacted` -> Postgres)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from dataclasses import replace
from types import FrameType

import psycopg

from schemas import topics
from services.projector.config import DEFAULT_BATCH_SIZE, DEFAULT_GROUP, ProjectorConfig
from services.projector.decoding import warm_up
from services.projector.metrics import Metrics
from services.projector.projector import Projector
from services.runtime.checks import check_kafka, check_kafka_access
from services.runtime.errors import UserFacingError
from services.runtime.follow_switch import SwitchFollower, add_follow_switch_argument, reexec
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
    add_follow_switch_argument(parser, "PROJECTOR_FOLLOW_SWITCH")
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
    follower, placement = None, None
    if args.follow_switch:
        follower = SwitchFollower(settings.database_url, args.follow_switch, config.schema, None, "projector")
        placement = follower.start()
        if placement.writers is not None:
            w = placement.writers
            config = replace(config, schema=w.schema, topic=w.compacted_topic, dlq_topic=w.dlq_topic,
                             group=w.projector_group)  # fmt: skip
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
    moved = threading.Event()
    if follower is not None and placement is not None:
        moved = follower.watch(placement, stop.set, stop)
    log.info(
        "projecting", extra=about(None, None, schema=config.schema, topic=config.topic, group=config.group)
    )
    try:
        Projector(config, metrics).run(stop)
    except psycopg.OperationalError as exc:  # only at start-up: once running, Postgres outages are retried
        raise UserFacingError(f"cannot reach Postgres: {' '.join(str(exc).split())}") from None
    if moved.is_set():  # the offsets of what it wrote are committed with its rows: start over, moved
        reexec()
    return 0
