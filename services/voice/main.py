"""`incident-memory slack`: the agent's voice in Slack (see `poster.py` for the exactly-once rule).

Config, wiring, loop. It reads incident.events in its own consumer group, in each partition's
order, and commits a partition's offset only up to its first post still waiting for its round's
marker, so a restart never skips a post. Records of what it posted go back onto incident.events
(the projector keeps them in `slack_posts`).

Environment: `SLACK_BOT_TOKEN` (required), `SLACK_API_URL` (default Slack's own; a stand-in in
tests and the demo), `SLACK_DEFAULT_CHANNEL` and `SLACK_ROUTES` (where alerts open their threads),
`KAFKA_BOOTSTRAP_SERVERS`, `DATABASE_URL`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal

import psycopg
from confluent_kafka import Consumer, Message, TopicPartition
from psycopg import sql

from schemas import topics
from schemas.events import EventBase, EventDecodeError, ThreadPost, parse_event
from services.runtime.checks import check_kafka, check_kafka_access
from services.runtime.emitter import EventEmitter
from services.runtime.errors import UserFacingError
from services.runtime.health import Heartbeat, serve_metrics_and_health
from services.runtime.kafka import consumer_config
from services.runtime.kafka_client import KafkaClient
from services.runtime.logs import about, configure_logging
from services.runtime.metric_families import Families
from services.runtime.settings import Settings
from services.voice import slack_api
from services.voice.poster import Voice
from services.voice.routing import parse_routes

log = logging.getLogger("agent.voice")
GROUP = "incident-memory-slack"
# every outcome at 0 from the start: a first post is an increase()
POSTS = Families().counter(
    "slack_posts_total",
    "Posts by outcome: posted (one chat.postMessage), found (made before a crash, found by its tag), "
    "skipped (no Slack thread or channel for it)",
    "outcome",
    zero=("posted", "found", "skipped"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--broker", default=None, help="Kafka bootstrap servers (env KAFKA_BOOTSTRAP_SERVERS)"
    )
    parser.add_argument("--events-topic", default=topics.EVENTS)
    parser.add_argument("--group", default=GROUP, help="consumer group (default: %(default)s)")
    parser.add_argument("--dsn", default=None, help="Postgres, for what is already posted (env DATABASE_URL)")
    parser.add_argument("--schema", default="public")
    parser.add_argument("--default-channel", default=os.environ.get("SLACK_DEFAULT_CHANNEL"))
    parser.add_argument("--metrics-port", type=int, default=None, help="serve /metrics and /healthz here")
    parser.add_argument("--log-level", default="INFO")


class ProjectedRecords:
    """What the projection holds of the voice, read with one small query each."""

    def __init__(self, dsn: str, schema: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
        self.conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))

    def outcome(self, post_id: str) -> str | None:
        row = self.conn.execute(
            "SELECT slack_ts FROM slack_posts WHERE post_id = %s AND phase <> 'intent' LIMIT 1", (post_id,)
        ).fetchone()
        return None if row is None else str(row[0])

    def root_of(self, thread: str) -> tuple[str, str] | None:
        row = self.conn.execute(
            "SELECT channel, slack_ts FROM slack_posts WHERE thread_ts = %s AND root AND phase <> 'intent' LIMIT 1",
            (thread,),
        ).fetchone()
        return None if row is None else (str(row[0]), str(row[1]))


def run(args: argparse.Namespace) -> int:
    configure_logging("slack", args.log_level)
    settings = Settings.from_env()
    kafka = settings.kafka.with_bootstrap(args.broker)
    token = os.environ.get("SLACK_BOT_TOKEN", "")
    base_url = os.environ.get("SLACK_API_URL") or slack_api.SLACK_API_URL
    routes = parse_routes(os.environ.get("SLACK_ROUTES"))
    return asyncio.run(
        serve(
            kafka=kafka,
            events_topic=args.events_topic,
            group=args.group,
            dsn=args.dsn or settings.database_url,
            schema=args.schema,
            token=token,
            base_url=base_url,
            routes=routes,
            default_channel=args.default_channel,
            metrics_port=args.metrics_port,
        )
    )


async def serve(
    *,
    kafka: KafkaClient,
    events_topic: str,
    group: str,
    dsn: str,
    schema: str,
    token: str,
    base_url: str,
    routes: list[tuple[str, str, str]],
    default_channel: str | None,
    metrics_port: int | None = None,
) -> int:
    web = slack_api.client(token, base_url)
    me = await slack_api.check_token(web)  # a refused token is the one line, before anything else
    check_kafka(kafka)
    check_kafka_access(
        kafka, reads=(events_topic,), writes=(events_topic,), group=group, service="the Slack poster"
    )
    heartbeat = Heartbeat()
    if metrics_port:
        serve_metrics_and_health(metrics_port, heartbeat)
    try:
        records = ProjectedRecords(dsn, schema)
    except psycopg.Error as exc:
        raise UserFacingError(f"Postgres is not reachable: {str(exc).splitlines()[0]}") from None
    emitter = EventEmitter(kafka, events_topic)

    async def emit(event: EventBase) -> None:
        await asyncio.to_thread(emitter.send, event)

    voice = Voice(slack_api.SlackWeb(web), records, emit, routes, default_channel)
    consumer = Consumer(consumer_config(kafka, group))
    consumer.subscribe([events_topic])
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("slack poster ready", extra=about(None, None, team=me.team, bot=me.user_id, api=base_url))
    waiting: dict[tuple[str, int], dict[str, int]] = {}  # partition -> pending post id -> its offset
    try:
        while not stop.is_set():
            heartbeat.beat()
            msg: Message | None = await asyncio.to_thread(consumer.poll, 0.5)
            if msg is None:
                continue
            if msg.error():
                log.warning("consumer error", extra=about(None, None, error=str(msg.error())))
                continue
            before = (len(voice.outcome.posted), len(voice.outcome.found), len(voice.outcome.skipped))
            await _one(voice, msg, waiting)
            _commit(consumer, msg, waiting)
            after = (len(voice.outcome.posted), len(voice.outcome.found), len(voice.outcome.skipped))
            for outcome, b, a in zip(("posted", "found", "skipped"), before, after, strict=True):
                if a > b:
                    POSTS.labels(outcome=outcome).inc(a - b)
    finally:
        consumer.close()
        emitter.close()
        records.conn.close()
    return 0


async def _one(voice: Voice, msg: Message, waiting: dict[tuple[str, int], dict[str, int]]) -> None:
    value = msg.value()
    try:
        event = parse_event(value or b"")
    except EventDecodeError:
        return  # not the poster's to judge: the compactor dead-letters it
    part = waiting.setdefault(_where(msg), {})
    if isinstance(event, ThreadPost):
        part[event.message_id] = int(msg.offset() or 0)
    await voice.handle(event)
    for post_id in [p for p in part if p not in voice.pending]:
        del part[post_id]


def _commit(consumer: Consumer, msg: Message, waiting: dict[tuple[str, int], dict[str, int]]) -> None:
    """Commit up to the first post still waiting for its marker (it is read again after a restart)."""
    topic, partition = _where(msg)
    part = waiting.get((topic, partition), {})
    upto = min(part.values()) if part else int(msg.offset() or 0) + 1
    consumer.commit(offsets=[TopicPartition(topic, partition, upto)], asynchronous=True)


def _where(msg: Message) -> tuple[str, int]:
    return str(msg.topic()), int(msg.partition() or 0)
