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

from services.projector.config import ProjectorConfig, add_source_arguments
from services.projector.decoding import warm_up
from services.projector.metrics import Metrics
from services.projector.projector import Projector
from services.runtime.checks import check_kafka, check_kafka_access
from services.runtime.errors import UserFacingError
from services.runtime.follow_switch import SwitchFollower, add_follow_switch_argument, reexec
from services.runtime.logs import about, configure_logging

log = logging.getLogger("incident_memory.projector")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--schema", default=os.environ.get("PROJECTOR_SCHEMA", "public"))
    add_source_arguments(parser)
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
    config = ProjectorConfig.from_args(args, args.schema)
    follower, placement = None, None
    if args.follow_switch:
        follower = SwitchFollower(config.dsn, args.follow_switch, config.schema, None, "projector")
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
