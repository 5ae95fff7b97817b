"""`incident-memory compactor`: run one compactor worker (faust-streaming).

Config first (arguments and environment, checked against the broker), then wiring
(metrics, selector, the faust app), then the loop (a faust Worker until SIGTERM/SIGINT).
Start more processes with the same --app-id to split the partitions between them.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
from dataclasses import replace
from pathlib import Path

from schemas import topics
from schemas.projections import Writers
from services.compaction.config import load_config
from services.compactor.stream_config import (
    DEFAULT_APP_ID,
    GUARANTEES,
    StreamConfig,
)
from services.runtime.errors import UserFacingError
from services.runtime.follow_switch import Placement, SwitchFollower, add_follow_switch_argument, reexec
from services.runtime.kafka import admin_config
from services.runtime.settings import Settings, state_dir

log = logging.getLogger("incident_memory.compactor")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--broker", default=None, help="Kafka bootstrap servers (default: KAFKA_BOOTSTRAP_SERVERS)"
    )
    parser.add_argument(
        "--app-id", default=DEFAULT_APP_ID, help="faust app id = consumer group (default: %(default)s)"
    )
    parser.add_argument("--events-topic", default=topics.EVENTS, help="input topic (default: %(default)s)")
    parser.add_argument(
        "--compacted-topic", default=topics.COMPACTED, help="output topic (default: %(default)s)"
    )
    parser.add_argument("--dlq-topic", default=topics.DLQ, help="dead-letter topic (default: %(default)s)")
    parser.add_argument(
        "--selections-topic",
        default=topics.SELECTIONS,
        help="changelog of recorded selector choices, shared across app ids (default: %(default)s)",
    )
    parser.add_argument("--workers-dir", default=None, help="faust data dirs (default: <state dir>/faust)")
    parser.add_argument("--worker-name", default=None, help="this worker's data dir name (default: host-pid)")
    parser.add_argument("--web-port", type=int, default=None, help="faust web port (default: web disabled)")
    parser.add_argument(
        "--metrics-port", type=int, default=None, help="Prometheus metrics port (default: none)"
    )
    parser.add_argument(
        "--selector",
        default=os.environ.get("COMPACTOR_SELECTOR", "local"),
        help="local | openai | package.module:Class (default: COMPACTOR_SELECTOR or local)",
    )
    parser.add_argument(
        "--budget", type=int, default=None, help="token budget for every tool (default: per tool)"
    )
    parser.add_argument("--processing-guarantee", choices=GUARANTEES, default="at_least_once")
    add_follow_switch_argument(parser, "COMPACTOR_FOLLOW_SWITCH")
    parser.add_argument(
        "--base-projection",
        default=os.environ.get("PROJECTOR_SCHEMA", "public"),
        help="with --follow-switch: the schema this command line's own topics and app id feed "
        "(default: PROJECTOR_SCHEMA or public)",
    )
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))


def config_from_args(args: argparse.Namespace) -> StreamConfig:
    """Resolve and check the configuration; UserFacingError names what is wrong."""
    if args.budget is not None and args.budget < 1:
        raise UserFacingError(f"--budget must be a positive integer, got {args.budget}")
    for name in ("web_port", "metrics_port"):
        port = getattr(args, name)
        if port is not None and not 0 < port < 65536:
            raise UserFacingError(f"--{name.replace('_', '-')} must be a TCP port, got {port}")
    kafka = Settings.from_env().kafka.with_bootstrap(args.broker)
    workers_dir = os.path.abspath(args.workers_dir) if args.workers_dir else str(state_dir() / "faust")
    return StreamConfig(
        kafka=kafka,
        app_id=args.app_id,
        events_topic=args.events_topic,
        compacted_topic=args.compacted_topic,
        dlq_topic=args.dlq_topic,
        selections_topic=args.selections_topic,
        worker_name=args.worker_name or f"{args.app_id}-{socket.gethostname()}-{os.getpid()}",
        workers_dir=Path(workers_dir),
        web_port=args.web_port,
        metrics_port=args.metrics_port,
        selector=args.selector,
        budget=args.budget,
        compactors=load_config(),
        processing_guarantee=args.processing_guarantee,
        log_level=args.log_level,
    )


def check_topics(config: StreamConfig) -> int:
    """The input/output/DLQ topics must exist, and output must have the input's partition count.

    Creates the selection changelog (compacted) if missing. Returns the partition count.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from services.runtime.checks import check_kafka, check_kafka_access

    check_kafka(config.kafka)
    check_kafka_access(
        config.kafka,
        reads=(config.events_topic, config.selections_topic),
        writes=(config.compacted_topic, config.dlq_topic, config.selections_topic),
        group=config.app_id,
        service="the compactor",
    )
    admin = AdminClient(admin_config(config.kafka))
    metadata = admin.list_topics(timeout=10).topics
    for name in (config.events_topic, config.compacted_topic, config.dlq_topic):
        if name not in metadata:
            raise UserFacingError(f"topic {name!r} does not exist (run `incident-memory migrate`)")
    source = len(metadata[config.events_topic].partitions)
    sink = len(metadata[config.compacted_topic].partitions)
    if source != sink:
        raise UserFacingError(
            f"{config.compacted_topic} has {sink} partitions but {config.events_topic} has {source}: "
            "they must be equal so every thread keeps its partition"
        )
    spec = topics.TopicSpec(config.selections_topic, source, {"cleanup.policy": "compact"})
    # As many replicas as the events topic (-1: the broker's default): a changelog with one replica
    # on a three-broker cluster would stop every worker's writes with the one broker holding it.
    replication = max(
        (len(p.replicas) for p in metadata[config.events_topic].partitions.values()), default=-1
    )
    try:
        topics.ensure_topics(admin_config(config.kafka), (spec,), replication_factor=replication)
    except KafkaException as exc:
        raise UserFacingError(f"could not create {spec.name}: {exc.args[0].str()}") from None
    existing = topics.partitions_once_visible(admin, spec.name)
    if existing != source:
        raise UserFacingError(f"{config.selections_topic} has {existing} partitions, expected {source}")
    return source


def follow(args: argparse.Namespace, config: StreamConfig) -> tuple[StreamConfig, SwitchFollower, Placement]:
    """With --follow-switch: the app id, topics and compactor settings of the projection readers see."""

    def refuse(writers: Writers) -> str | None:
        if args.budget is not None:
            return "this compactor has --budget, which the re-derivation did not"
        try:
            versions = load_config(writers.compactor_settings).versions()
        except UserFacingError as exc:
            return f"its compactor settings do not load here ({exc})"
        if versions != writers.compactor_versions:
            return (
                f"it was made by compactor versions {writers.compactor_versions} and this code makes "
                f"{versions} (deploy the image that made it)"
            )
        return None

    follower = SwitchFollower(
        Settings.from_env().database_url, args.follow_switch, args.base_projection, config.events_topic,
        "compactor", refuse,
    )  # fmt: skip
    placement = follower.start()
    w = placement.writers
    if w is not None:
        config = replace(
            config,
            app_id=w.compactor_app_id,
            compacted_topic=w.compacted_topic,
            dlq_topic=w.dlq_topic,
            compactors=load_config(w.compactor_settings),
            # a data dir of its own per projection (faust keeps the app's table state there)
            worker_name=f"{args.worker_name}.{w.schema}"
            if args.worker_name
            else f"{w.compactor_app_id}-{socket.gethostname()}-{os.getpid()}",
        )
    return config, follower, placement


def run(args: argparse.Namespace) -> int:
    import signal
    import threading

    from services.compactor.stream_metrics import StreamMetrics
    from services.compactor.stream_selector import CountingSelector, load_selector
    from services.compactor.worker import JsonWorker, build_app
    from services.runtime.logs import about, configure_logging

    # config
    configure_logging("compactor", args.log_level)
    config = config_from_args(args)
    following = follow(args, config) if args.follow_switch else None
    if following is not None:
        config = following[0]
    config = replace(
        config,
        partitions=check_topics(config),
        max_output_bytes=topics.record_limit(admin_config(config.kafka), config.compacted_topic),
    )
    config.datadir.mkdir(parents=True, exist_ok=True)

    # wiring
    metrics = StreamMetrics()
    selector = CountingSelector(
        load_selector(config.selector), on_call=lambda model: metrics.selector_calls.labels(model=model).inc()
    )
    if config.metrics_port is not None:
        try:
            metrics.serve(config.metrics_port)
        except OSError as exc:
            raise UserFacingError(f"--metrics-port {config.metrics_port}: {exc.strerror or exc}") from None
    app = build_app(config, metrics, selector)
    log.info(
        "compactor starting",
        extra=about(
            None,
            None,
            app_id=config.app_id,
            worker=config.worker_name,
            events_topic=config.events_topic,
            compacted_topic=config.compacted_topic,
            dlq_topic=config.dlq_topic,
            partitions=config.partitions,
            selector=selector.model,
            plugins=dict(config.compactors.plugin_versions),
            guarantee=config.processing_guarantee,
            metrics_port=config.metrics_port,
        ),
    )

    # warm-up: what the first tool result would pay (the token encoding, each compactor's first use),
    # paid before the worker starts, so before `/healthz` can say ready
    from services.compactor.warm import warm_up

    warm_up(config.compactors)

    # the loop (with --follow-switch, a move stops the worker as SIGTERM does, then starts it over)
    moved, stopped = threading.Event(), threading.Event()
    if following is not None:
        _config, follower, placement = following
        moved = follower.watch(placement, lambda: os.kill(os.getpid(), signal.SIGTERM), stopped)
    worker = JsonWorker(app, log_level=config.log_level)
    try:
        worker.execute_from_commandline()
    except SystemExit as exc:
        code = int(exc.code or 0) if isinstance(exc.code, int | None) else 1
    else:
        code = 0
    stopped.set()
    log.info("compactor stopped", extra=about(None, None, worker=config.worker_name, exit_code=code))
    if moved.is_set():
        reexec()
    return code
