"""`incident-memory ingest`: the ingest HTTP service (Slack, Alertmanager), optionally with the
alerts-topic consumer beside it (`--alerts-topic T`), sharing one idempotent producer."""

from __future__ import annotations

import argparse
import os
import signal

import uvicorn

from schemas import topics
from services.ingest.alerts import Window
from services.ingest.alerts_consumer import DEFAULT_GROUP, AlertsTopicConfig, AlertsTopicConsumer
from services.ingest.app import Ingest, Worker, build_app
from services.ingest.config import MAX_BODY_BYTES, IngestConfig
from services.ingest.metrics import Metrics
from services.ingest.producer import AckedProducer
from services.runtime.errors import UserFacingError
from services.runtime.logs import configure_logging
from services.runtime.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(env("INGEST_PORT", "8080")))
    parser.add_argument(
        "--signing-secret", default=env("SLACK_SIGNING_SECRET"), help="default: $SLACK_SIGNING_SECRET"
    )
    parser.add_argument(
        "--alertmanager-token", default=env("ALERTMANAGER_TOKEN"), help="default: $ALERTMANAGER_TOKEN"
    )
    parser.add_argument("--bot-user-id", default=env("SLACK_BOT_USER_ID"), help="default: $SLACK_BOT_USER_ID")
    parser.add_argument(
        "--bootstrap-servers", default=None, help="default: $KAFKA_BOOTSTRAP_SERVERS or the local stack"
    )
    parser.add_argument("--events-topic", default=topics.EVENTS)
    parser.add_argument("--wake-topic", default=topics.WAKE)
    parser.add_argument("--dlq-topic", default=topics.DLQ)
    parser.add_argument(
        "--alerts-topic",
        default=env("INGEST_ALERTS_TOPIC"),
        help="also consume Alertmanager JSON from this Kafka topic",
    )
    parser.add_argument("--alerts-group", default=DEFAULT_GROUP)
    parser.add_argument(
        "--ack-timeout", type=float, default=2.5, help="seconds to wait for the broker before 503"
    )
    parser.add_argument(
        "--window-before", type=int, default=1800, help="pinned window: seconds before startsAt"
    )
    parser.add_argument(
        "--window-after", type=int, default=1800, help="pinned window: seconds after startsAt"
    )
    parser.add_argument("--max-body", type=int, default=MAX_BODY_BYTES)
    parser.add_argument("--log-level", default=env("LOG_LEVEL", "INFO"))


def config_from_args(args: argparse.Namespace) -> IngestConfig:
    if not args.signing_secret:
        raise UserFacingError("SLACK_SIGNING_SECRET is not set (or pass --signing-secret)")
    if not args.alertmanager_token:
        raise UserFacingError("ALERTMANAGER_TOKEN is not set (or pass --alertmanager-token)")
    if args.ack_timeout <= 0 or args.max_body < 1:
        raise UserFacingError("--ack-timeout and --max-body must be positive")
    return IngestConfig(
        signing_secret=args.signing_secret,
        alertmanager_token=args.alertmanager_token,
        bootstrap_servers=args.bootstrap_servers or Settings.from_env().kafka_bootstrap_servers,
        bot_user_id=args.bot_user_id or None,
        events_topic=args.events_topic,
        wake_topic=args.wake_topic,
        dlq_topic=args.dlq_topic,
        max_body_bytes=args.max_body,
        ack_timeout_s=args.ack_timeout,
        window_before_s=args.window_before,
        window_after_s=args.window_after,
    )


def build(config: IngestConfig) -> Ingest:
    """Wiring: one producer, one metrics registry, the handlers."""
    return Ingest(config, AckedProducer(config.bootstrap_servers, **config.producer_overrides), Metrics())


def workers_for(ingest: Ingest, alerts_topic: str | None, alerts_group: str) -> list[Worker]:
    if not alerts_topic:
        return []
    consumer = AlertsTopicConsumer(
        AlertsTopicConfig(topic=alerts_topic, group=alerts_group),
        ingest.emitter,
        ingest.config.bootstrap_servers,
        Window(ingest.config.window_before_s, ingest.config.window_after_s),
    )
    return [consumer.run]


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    configure_logging("ingest", args.log_level)
    ingest = build(config)
    app = build_app(ingest, workers_for(ingest, args.alerts_topic, args.alerts_group))
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=10,
        )
    )
    # uvicorn re-raises a captured signal after its graceful shutdown; a no-op SIGTERM handler makes that
    # re-raise land here, so a SIGTERM (stop accepting, finish in-flight requests, flush) exits 0.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: None)
    server.run()
    return 0
