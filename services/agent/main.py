"""`incident-memory agent`: consume incident.wake, run one round per wake, commit after the marker's ack.

Config, wiring, loop. The Kafka consumer runs on the main thread; rounds run as
asyncio tasks on one event loop (bounded by a semaphore), serialized per thread by
a lock, so different threads proceed concurrently and one thread never races itself.
A wake's offset is committed only once its round's marker is acked (or the wake was
deliberately skipped), so a round that dies or times out is simply redelivered.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shlex
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import psycopg
from confluent_kafka import Consumer, KafkaException, TopicPartition

from schemas import topics
from schemas.events import EventDecodeError, Wake, parse_event
from services.agent import metrics
from services.agent.coalesce import ready_at
from services.agent.config import TELEMETRY_ENV, AgentConfig, build_config
from services.agent.mcp_client import McpToolbox
from services.agent.offsets import OffsetTracker
from services.agent.playbooks import load_playbooks
from services.agent.recall_step import check_channel_groups
from services.agent.round import Models, RoundResult, TriggerNotProjected, run_round
from services.agent.toolpath import ProjectionTimeout
from services.runtime.checks import check_kafka, check_kafka_access
from services.runtime.emitter import EventEmitter, dead_letter_sender
from services.runtime.health import Heartbeat, serve_metrics_and_health
from services.runtime.kafka import consumer_config, dead_letter
from services.runtime.loading import json_object_file
from services.runtime.logs import about, configure_logging
from services.runtime.settings import Settings
from services.runtime.warmup import run_steps, warm_events, warm_tokens

log = logging.getLogger("agent")
RETRYABLE = (TimeoutError, ProjectionTimeout, TriggerNotProjected, KafkaException, psycopg.OperationalError)
ATTEMPTS = 3
MAX_WAKE_BYTES = 64 * 1024  # a wake is a few hundred bytes; a bigger record is not one (dead-lettered)


class AgentService:
    def __init__(
        self,
        config: AgentConfig,
        models: Models,
        dlq_topic: str = topics.DLQ,
        heartbeat: Heartbeat | None = None,
    ) -> None:
        self.config = config
        self.heartbeat = heartbeat or Heartbeat()
        self.models = models
        self.dlq_topic = dlq_topic
        self.tracker = OffsetTracker()
        self.stop = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.toolbox: McpToolbox | None = None
        self.emitter = EventEmitter(config.kafka, config.events_topic)
        self.send_dead_letter = dead_letter_sender(self.emitter, dlq_topic)
        self.results: list[RoundResult] = []
        self._locks: dict[str, asyncio.Lock] = {}
        self._gathering: dict[str, list[tuple[float, Wake]]] = {}  # per thread: wakes not yet in a round
        self._sem: asyncio.Semaphore | None = None
        self._toolbox_stop: asyncio.Event | None = None

    # --- the event loop and the MCP sessions -----------------------------------------------

    def _start_loop(self) -> None:
        threading.Thread(target=self.loop.run_forever, name="agent-loop", daemon=True).start()
        ready: Future[None] = Future()
        self._holder = asyncio.run_coroutine_threadsafe(self._hold_toolbox(ready), self.loop)
        ready.result(timeout=120)

    async def _hold_toolbox(self, ready: Future[None]) -> None:
        """Open the MCP sessions in one task and close them in the same one (anyio requires it)."""
        self._sem = asyncio.Semaphore(self.config.max_concurrency)
        self._toolbox_stop = asyncio.Event()
        try:
            async with McpToolbox(self.config.mcp_servers) as box:
                self.toolbox = box
                ready.set_result(None)
                await self._toolbox_stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    def _stop_loop(self) -> None:
        if self._toolbox_stop is not None:
            self.loop.call_soon_threadsafe(self._toolbox_stop.set)
            try:
                self._holder.result(timeout=30)
            except Exception as exc:
                log.warning("closing MCP sessions failed", extra={"error": str(exc)})
        self.loop.call_soon_threadsafe(self.loop.stop)

    # --- one wake ----------------------------------------------------------------------------

    async def handle(self, wake: Wake) -> bool:
        """True when the wake is done with: answered by a round (its own, or one it was gathered into),
        dead-lettered, or deliberately skipped.

        A thread's wakes gather (services/agent/coalesce.py): the first to hold the thread's lock waits
        for the window, then takes every wake gathered so far and runs ONE round for the latest; the
        others, finding themselves taken, are done when it is. Which mentions that round answers is
        decided from the rows it loads, not from this batch, so a restart reaches the same post."""
        assert self._sem is not None and self.toolbox is not None
        thread = wake.thread_ts
        self._gathering.setdefault(thread, []).append((time.monotonic(), wake))
        lock = self._locks.setdefault(thread, asyncio.Lock())
        async with lock:
            if not any(w is wake for _, w in self._gathering.get(thread, [])):
                return True  # a round this wake was gathered into has run
            await self._gather(thread)
            batch = [w for _, w in self._gathering.pop(thread, [])]
            if len(batch) > 1:
                metrics.WAKES_COALESCED.inc(len(batch) - 1)
                log.info(
                    "wakes coalesced", extra=about(thread, batch[-1].trigger_message_id, wakes=len(batch))
                )
            async with self._sem:
                return await self._run(batch)

    async def _gather(self, thread: str) -> None:
        """Wait until the thread's mentions stop coming (or the longest wait passed); an alert never waits."""
        window, longest = self.config.wake_window, self.config.wake_window_max
        while window > 0:
            gathered = self._gathering.get(thread, [])
            if not gathered or any(w.reason == "alert" for _, w in gathered):
                return
            wait = ready_at(gathered[0][0], gathered[-1][0], window, longest) - time.monotonic()
            if wait <= 0:
                return
            await asyncio.sleep(wait)

    async def _run(self, batch: list[Wake]) -> bool:
        """The round of the batch's latest wake, retried; a failure dead-letters every wake of the batch."""
        wake, toolbox = batch[-1], self.toolbox
        assert toolbox is not None
        for attempt in range(1, ATTEMPTS + 1):
            try:
                result = await asyncio.wait_for(
                    run_round(wake, self.config, self.models, toolbox, self.emitter),
                    self.config.round_timeout,
                )
                self.results.append(result)
                return True
            except RETRYABLE as exc:
                metrics.ROUNDS.labels(metrics.round_failure_outcome(exc)).inc()
                log.warning(
                    "round failed; running it again",
                    extra=about(wake.thread_ts, wake.message_id, attempt=attempt, error=repr(exc)),
                )
                await asyncio.sleep(min(2.0**attempt, 10.0))
            except Exception as exc:
                log.exception("round crashed", extra=about(wake.thread_ts, wake.message_id))
                for each in batch:
                    self._dead_letter(each, f"round crashed: {exc!r}")
                return True
        for each in batch:
            self._dead_letter(each, f"round failed {ATTEMPTS} times")
        return True

    def _dead_letter(self, wake: Wake, reason: str) -> None:
        metrics.ROUNDS.labels("dead_lettered").inc()
        self.send_dead_letter(
            dead_letter(reason, "agent", wake.to_bytes(), self.config.wake_topic, key=wake.thread_ts)
        )

    # --- the consumer loop -------------------------------------------------------------------

    def _beat(self) -> None:
        """`/healthz` is fine while the poll loop turns, the round loop runs and the MCP sessions are open."""
        if self.loop.is_running() and not self._holder.done():
            self.heartbeat.beat()

    def _on_done(self, topic: str, partition: int, offset: int) -> Callable[[Future[bool]], None]:
        """A wake's offset becomes committable only once its round acked."""

        def done(f: Future[bool]) -> None:
            if not f.cancelled() and f.exception() is None and f.result():
                self.tracker.finished(topic, partition, offset)

        return done

    def _commit(self, consumer: Consumer) -> None:
        ready = self.tracker.committable()
        if ready:
            consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in ready.items()], asynchronous=False
            )
            log.info(
                "wake offsets committed", extra={"offsets": {f"{t}[{p}]": o for (t, p), o in ready.items()}}
            )

    def run(self, exit_when_idle: float | None = None) -> int:
        self._start_loop()
        consumer = Consumer(consumer_config(self.config.kafka, self.config.group_id))

        def on_revoke(c: Consumer, partitions: list[TopicPartition]) -> None:
            try:
                self._commit(c)
            except KafkaException as exc:
                log.warning("commit on revoke failed", extra={"error": str(exc)})
            for tp in partitions:
                self.tracker.forget(tp.topic, tp.partition)

        consumer.subscribe([self.config.wake_topic], on_revoke=on_revoke)
        futures: list[Future[bool]] = []
        last_activity = time.monotonic()
        try:
            while not self.stop.is_set():
                self._beat()
                msg = consumer.poll(0.2)
                futures = [f for f in futures if not f.done()]
                if futures:
                    last_activity = time.monotonic()
                self._commit(consumer)
                if msg is None:
                    if (
                        exit_when_idle is not None
                        and not futures
                        and time.monotonic() - last_activity > exit_when_idle
                    ):
                        log.info("idle; exiting")
                        break
                    continue
                last_activity = time.monotonic()
                if msg.error():
                    log.warning("consumer error", extra={"error": str(msg.error())})
                    continue
                topic, partition, offset = str(msg.topic()), int(msg.partition() or 0), int(msg.offset() or 0)
                self.tracker.started(topic, partition, offset)
                try:
                    if len(msg.value() or b"") > MAX_WAKE_BYTES:
                        raise EventDecodeError(
                            f"oversized wake: {len(msg.value() or b'')} bytes > {MAX_WAKE_BYTES}"
                        )
                    event = parse_event(msg.value() or b"")
                    if not isinstance(event, Wake):
                        raise EventDecodeError(f"expected a wake event, got {type(event).__name__}")
                except EventDecodeError as exc:
                    self.send_dead_letter(
                        dead_letter(str(exc), "agent", msg.value(), topic, partition, offset, msg.key())
                    )
                    self.tracker.finished(topic, partition, offset)
                    continue
                log.info("wake", extra=about(event.thread_ts, event.trigger_message_id, reason=event.reason))
                future = asyncio.run_coroutine_threadsafe(self.handle(event), self.loop)
                future.add_done_callback(self._on_done(topic, partition, offset))
                futures.append(future)
            for future in futures:
                future.result(timeout=self.config.round_timeout * ATTEMPTS)
            self._commit(consumer)
        finally:
            consumer.close()
            self._stop_loop()
            self.emitter.close()
        return 0


# --- CLI ---------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        help="JSON file: mcp_servers, models, budgets... (tools map to compactors by COMPACTOR_TOOL_MAP)",
    )
    parser.add_argument("--bootstrap-servers", default=None)
    parser.add_argument("--dsn", default=None, help="Postgres DSN (default: DATABASE_URL or the local stack)")
    parser.add_argument("--schema", default=None, help="Postgres schema of the projection (default public)")
    parser.add_argument("--events-topic", default=None)
    parser.add_argument("--wake-topic", default=None)
    parser.add_argument("--dlq-topic", default=topics.DLQ)
    parser.add_argument("--group", default=None, help="consumer group of the wake consumer")
    parser.add_argument(
        "--model", default=None, help="agent model: 'local' or a ChatOpenAI model name (default: AGENT_MODEL)"
    )
    parser.add_argument(
        "--judge-model",
        default=None,
        help="judge model: 'local' or a ChatOpenAI model name (default: JUDGE_MODEL, else the agent's)",
    )
    parser.add_argument(
        "--mcp-command", default=None, help="one stdio MCP server command (replaces the configured)"
    )
    parser.add_argument(
        "--mcp-url", default=None, help="one streamable-HTTP MCP server url (replaces the configured)"
    )
    parser.add_argument("--context-budget", type=int, default=None)
    parser.add_argument("--max-concurrency", type=int, default=None)
    parser.add_argument("--round-timeout", type=float, default=None)
    parser.add_argument(
        "--step-delay", type=float, default=None, help="pause after each node (demo slow motion)"
    )
    parser.add_argument(
        "--wake-window",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a thread's wakes gather this long after its latest before one round answers them (default 2)",
    )
    parser.add_argument(
        "--wake-window-max",
        type=float,
        default=None,
        metavar="SECONDS",
        help="...but never longer than this after its first wake (default 15)",
    )
    parser.add_argument("--exit-when-idle", type=float, default=None, metavar="SECONDS")
    parser.add_argument(
        "--metrics-port", type=int, default=None, help="serve /metrics and /healthz (the loop's heartbeat)"
    )
    parser.add_argument("--log-level", default="INFO")


# Config-file keys that the flag of the same name overrides (a flag not given is None: the file's
# value, else the default, stands).
FLAG_KEYS = (
    "events_topic", "wake_topic", "context_budget", "max_concurrency", "round_timeout", "step_delay",
    "wake_window", "wake_window_max",
)  # fmt: skip


def config_from_args(args: argparse.Namespace) -> AgentConfig:
    """A flag given wins over the config file's key (`--config`); build_config checks the whole."""
    settings = Settings.from_env()
    data = json_object_file(args.config)
    models = _models(args, dict(data.pop("models", None) or {}))
    schema = args.schema or data.pop("schema", None) or "public"
    dsn = args.dsn or data.pop("database_url", None) or settings.database_url
    if args.mcp_command or args.mcp_url:
        data["mcp_servers"] = [_flag_server(args, dsn, schema)]
    return build_config(
        data,
        models=models,
        kafka=settings.kafka.with_bootstrap(args.bootstrap_servers or data.pop("bootstrap_servers", None)),
        database_url=dsn,
        schema=schema,
        group_id=args.group,
        **{key: getattr(args, key) for key in FLAG_KEYS},
    )


def _models(args: argparse.Namespace, models: dict[str, Any]) -> dict[str, Any]:
    """--model over AGENT_MODEL over the config file (JUDGE_MODEL likewise; the judge defaults to the agent's)."""
    agent_model = args.model or os.environ.get("AGENT_MODEL")
    judge_model = (
        args.judge_model or os.environ.get("JUDGE_MODEL") or (None if "judge" in models else agent_model)
    )
    if agent_model:
        models["agent"] = agent_model
    if judge_model:
        models["judge"] = judge_model
    return models


def _flag_server(args: argparse.Namespace, dsn: str, schema: str) -> dict[str, Any]:
    """The one MCP server --mcp-command or --mcp-url names: the telemetry server, given the projection."""
    return {
        "name": "cli",
        "command": shlex.split(args.mcp_command) if args.mcp_command else [],
        "url": args.mcp_url,
        "env": {"DATABASE_URL": dsn, "TELEMETRY_MCP_SCHEMA": schema},
        "pass_env": list(TELEMETRY_ENV),  # the one command given is the telemetry server
    }


def run(args: argparse.Namespace) -> int:
    from services.agent.models import build_models

    configure_logging("agent", args.log_level)
    config = config_from_args(args)
    load_playbooks()  # validated at start: a bad playbook file is a one-line error, not a failed round
    check_channel_groups()  # RECALL_CHANNEL_GROUPS, likewise
    check_kafka(config.kafka)
    check_kafka_access(
        config.kafka,
        reads=(config.wake_topic,),
        writes=(config.events_topic, args.dlq_topic),
        group=config.group_id,
        service="the agent",
    )
    heartbeat = Heartbeat()
    if args.metrics_port:
        serve_metrics_and_health(args.metrics_port, heartbeat)
    service = AgentService(config, build_models(config.models), dlq_topic=args.dlq_topic, heartbeat=heartbeat)
    signal.signal(signal.SIGTERM, lambda *_: service.stop.set())
    # Before the loop's first beat, so `/healthz` says ready only once the first wake pays nothing extra:
    # the token encoding (loaded on its first use), the event codec, the emitter's topic metadata and
    # a first connection to Postgres (each round opens its own).
    run_steps(
        {
            "tokens": warm_tokens,
            "events": warm_events,
            "kafka_metadata": lambda: service.emitter._producer.list_topics(config.events_topic, timeout=5),
            "postgres": lambda: psycopg.connect(config.database_url, connect_timeout=5).close(),
        },
        "agent",
    )
    log.info(
        "agent starting",
        extra={"wake_topic": config.wake_topic, "group": config.group_id, "schema": config.schema},
    )
    return service.run(exit_when_idle=args.exit_when_idle)
