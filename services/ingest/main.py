"""`incident-memory ingest`: the ingest HTTP service (Slack, Alertmanager), optionally with the
alerts-topic consumer beside it (`--alerts-topic T`) and Slack over Socket Mode (`--socket-mode`),
all sharing one idempotent producer."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
from collections.abc import Callable

import uvicorn

from schemas import topics
from services.ingest.alerts import Window
from services.ingest.alerts_consumer import DEFAULT_GROUP, AlertsTopicConfig, AlertsTopicConsumer
from services.ingest.app import Ingest, Worker, build_app
from services.ingest.config import MAX_BODY_BYTES, IngestConfig
from services.ingest.http_limits import HttpLimits, server_config
from services.ingest.metrics import Metrics
from services.ingest.producer import AckedProducer
from services.ingest.socket_mode import DEFAULT_API_URL, SocketMode, SocketModeConfig
from services.runtime.checks import check_kafka, check_kafka_access
from services.runtime.errors import KafkaRefused, UserFacingError
from services.runtime.logs import configure_logging
from services.runtime.settings import Settings

log = logging.getLogger("incident_memory.ingest")


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
    parser.add_argument(
        "--team-id",
        default=env("SLACK_TEAM_ID"),
        help="the Slack workspace (T...) whose events are recorded; others are dropped (default: $SLACK_TEAM_ID)",
    )
    parser.add_argument(
        "--app-id",
        default=env("SLACK_APP_ID"),
        help="this Slack app's id (A...); events for another app are dropped (default: $SLACK_APP_ID)",
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
    _add_http_limit_arguments(parser)
    _add_projection_and_slack_mode_arguments(parser)


# flag, type, HttpLimits field, what it bounds (the default is HttpLimits')
_HTTP_LIMIT_FLAGS: tuple[tuple[str, type[int] | type[float], str, str], ...] = (
    ("--max-header-bytes", int, "max_header_bytes", "request line + headers; more is answered 431"),
    ("--max-headers", int, "max_headers", "more is 431"),
    (
        "--header-timeout",
        float,
        "header_timeout_s",
        "seconds from a request's first byte to the end of its headers, else 408",
    ),
    (
        "--body-timeout",
        float,
        "body_timeout_s",
        "seconds from the end of the headers to the end of the body, else 408",
    ),
    ("--keep-alive-timeout", int, "keep_alive_s", "seconds an idle connection is kept open"),
    (
        "--max-connections",
        int,
        "max_connections",
        "open connections or requests in flight before new requests get 503",
    ),
)


def _add_http_limit_arguments(parser: argparse.ArgumentParser) -> None:
    limits = HttpLimits()
    for flag, kind, field, what in _HTTP_LIMIT_FLAGS:
        parser.add_argument(
            flag, type=kind, default=getattr(limits, field), help=f"{what} (default: %(default)s)"
        )


def _add_projection_and_slack_mode_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument(
        "--dsn",
        default=None,
        help="Postgres with the projection: replies in a thread an alert opened join its incident, and an "
        "alert group keeps its open incident's thread (default: $DATABASE_URL or the local stack)",
    )
    parser.add_argument("--schema", default="public", help="the projection's schema (default: %(default)s)")
    parser.add_argument(
        "--redact-at-ingest",
        action="store_true",
        default=os.environ.get("REDACT_AT_INGEST", "").lower() in ("1", "true", "yes"),
        help="redact credentials in Slack messages and alerts before they are produced, so none rests in "
        "Kafka or Postgres (env REDACT_AT_INGEST=1; default off: the raw stays verbatim as the audit trail)",
    )
    parser.add_argument(
        "--socket-mode",
        action="store_true",
        help="receive Slack events over Socket Mode (an outbound websocket; env SLACK_APP_TOKEN, "
        "optional SLACK_BOT_TOKEN): no inbound /slack/events, no signing secret needed",
    )
    parser.add_argument(
        "--slack-api-url",
        default=env("SLACK_API_URL") or DEFAULT_API_URL,
        help="Slack's Web API base URL for Socket Mode (default: $SLACK_API_URL or %(default)s)",
    )
    parser.add_argument("--log-level", default=env("LOG_LEVEL", "INFO"))


def config_from_args(args: argparse.Namespace) -> IngestConfig:
    if not args.signing_secret and not getattr(args, "socket_mode", False):
        raise UserFacingError(
            "SLACK_SIGNING_SECRET is not set (or pass --signing-secret, or use --socket-mode)"
        )
    for value, name, flag in (
        (args.team_id, "SLACK_TEAM_ID", "--team-id"),
        (args.app_id, "SLACK_APP_ID", "--app-id"),
    ):
        if not (value or "").strip():
            raise UserFacingError(
                f"{name} is not set (or pass {flag}): ingest records only its own workspace's and app's events"
            )
    if not args.alertmanager_token:
        raise UserFacingError("ALERTMANAGER_TOKEN is not set (or pass --alertmanager-token)")
    if args.ack_timeout <= 0 or args.max_body < 1:
        raise UserFacingError("--ack-timeout and --max-body must be positive")
    settings = Settings.from_env()
    kafka = settings.kafka.with_bootstrap(args.bootstrap_servers)
    return IngestConfig(
        signing_secret=args.signing_secret or "",  # empty (Socket Mode only): /slack/events is not served
        alertmanager_token=args.alertmanager_token,
        kafka=kafka,
        team_id=args.team_id.strip(),
        app_id=args.app_id.strip(),
        bot_user_id=args.bot_user_id or None,
        events_topic=args.events_topic,
        wake_topic=args.wake_topic,
        dlq_topic=args.dlq_topic,
        max_body_bytes=args.max_body,
        ack_timeout_s=args.ack_timeout,
        window_before_s=args.window_before,
        window_after_s=args.window_after,
        directory_dsn=args.dsn or settings.database_url,
        directory_schema=args.schema,
        redact_at_ingest=args.redact_at_ingest,
    )


def limits_from_args(args: argparse.Namespace) -> HttpLimits:
    limits = HttpLimits(
        max_header_bytes=args.max_header_bytes,
        max_headers=args.max_headers,
        header_timeout_s=args.header_timeout,
        body_timeout_s=args.body_timeout,
        keep_alive_s=args.keep_alive_timeout,
        max_connections=args.max_connections,
    )
    problems = limits.problems()
    if problems:
        raise UserFacingError(f"HTTP limits out of range (each must be positive): {', '.join(problems)}")
    return limits


def socket_config_from_env(args: argparse.Namespace) -> SocketModeConfig:
    """Socket Mode's tokens come from the environment only (never argv, which `ps` shows)."""
    app_token = os.environ.get("SLACK_APP_TOKEN", "").strip()
    if not app_token:
        raise UserFacingError(
            "SLACK_APP_TOKEN is not set (--socket-mode needs an app-level token, xapp-..., with connections:write)"
        )
    return SocketModeConfig(
        app_token=app_token,
        bot_token=os.environ.get("SLACK_BOT_TOKEN", "").strip() or None,
        api_url=args.slack_api_url,
    )


def build(config: IngestConfig) -> Ingest:
    """Wiring: one producer, one metrics registry, the handlers."""
    return Ingest(config, AckedProducer(config.kafka, **config.producer_overrides), Metrics())


def workers_for(ingest: Ingest, alerts_topic: str | None, alerts_group: str) -> list[Worker]:
    if not alerts_topic:
        return []
    consumer = AlertsTopicConsumer(
        AlertsTopicConfig(topic=alerts_topic, group=alerts_group),
        ingest.emitter,
        ingest.config.kafka,
        Window(ingest.config.window_before_s, ingest.config.window_after_s),
        ingest.groups,
    )
    return [consumer.run]


def check_kafka_at_start(config: IngestConfig, alerts_topic: str | None, alerts_group: str) -> None:
    """Refused credentials, TLS trust or ACLs end ingest at once; an unreachable broker does not:
    ingest then answers 503 (retry) until the broker is back, as it does when the broker goes away later."""
    try:
        check_kafka(config.kafka, timeout=5.0)
    except KafkaRefused:
        raise
    except UserFacingError as exc:
        log.warning("Kafka is not reachable at start; answering 503 until it is", extra={"error": str(exc)})
        return
    check_kafka_access(
        config.kafka,
        reads=(alerts_topic,) if alerts_topic else (),
        writes=(config.events_topic, config.wake_topic, config.dlq_topic),
        group=alerts_group if alerts_topic else None,
        service="ingest",
    )


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    limits = limits_from_args(args)
    socket_config = socket_config_from_env(args) if args.socket_mode else None
    configure_logging("ingest", args.log_level)
    ingest = build(config)
    socket_mode = SocketMode(socket_config, ingest) if socket_config is not None else None
    app = build_app(
        ingest,
        workers_for(ingest, args.alerts_topic, args.alerts_group),
        [socket_mode] if socket_mode is not None else None,
    )
    server = uvicorn.Server(
        server_config(  # uvicorn.Config with the HTTP bounds (services/ingest/http_limits.py)
            app,
            limits,
            ingest.metrics.registry,
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
    if socket_mode is None:
        check_kafka_at_start(config, args.alerts_topic, args.alerts_group)
        server.run()
        return 0
    # Socket Mode lives on the server's loop (it shares the dedupe and the producer's futures), and its
    # token is checked before the server binds: one runner for both, with uvicorn's loop (uvloop).
    with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
        runner.run(
            serve_with_socket_mode(
                server,
                socket_mode,
                lambda: check_kafka_at_start(config, args.alerts_topic, args.alerts_group),
            )
        )
    return 0


async def serve_with_socket_mode(
    server: uvicorn.Server, socket_mode: SocketMode, check_kafka: Callable[[], None]
) -> None:
    """Check the app token (a refused one raises UserFacingError before anything serves), then Kafka,
    then serve; the app's lifespan opens the websocket once the producer runs and closes it before the flush."""
    await socket_mode.open()
    try:
        check_kafka()
        await server.serve()
    finally:
        await socket_mode.close()
