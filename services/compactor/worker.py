"""The faust-streaming app: incident.events -> incident.compacted (+ incident.dlq).

Values stay bytes end to end (`raw` serializer): a pass-through is the very bytes that
arrived, and a compacted event is canonical JSON. Each output goes to the SAME partition
number as its input, with the same key: the two topics have the same partition count, so
a thread keeps its partition and its order whatever partitioner the producers use.
The selection table (a changelog-backed faust Table, key `raw_sha256:compactor_version`)
makes a replay reuse a selector's choice instead of asking again (invariant 8).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import faust
from faust.auth import SASLCredentials, SSLCredentials
from faust.types import TP
from faust.types.auth import CredentialsT

from schemas.events import Selection
from services.compaction.selector import Selector
from services.compactor.dispatch import Dispatch, dispatch
from services.compactor.faust_patch import PatchedTransport, PatientTableManager
from services.compactor.stream import process
from services.compactor.stream_config import StreamConfig
from services.compactor.stream_metrics import StreamMetrics
from services.runtime.kafka_client import KafkaClient
from services.runtime.logs import about, configure_logging

log = logging.getLogger("incident_memory.compactor")

TABLE_NAME = "selections"


def build_app(config: StreamConfig, metrics: StreamMetrics, selector: Selector) -> faust.App:
    """Wire the app: topics, the selection table, the agent. Nothing runs until a Worker starts it."""
    app = _faust_app(config)
    source = app.topic(config.events_topic, key_serializer="raw", value_serializer="raw")
    compacted = app.topic(config.compacted_topic, key_serializer="raw", value_serializer="raw")
    dlq = app.topic(config.dlq_topic, key_serializer="raw", value_serializer="raw")
    changelog = app.topic(
        config.selections_topic,
        partitions=config.partitions,
        key_serializer="json",
        value_serializer="json",
    )
    table = app.Table(
        TABLE_NAME,
        partitions=config.partitions,
        changelog_topic=changelog,
        key_type=str,
        value_type=dict,  # Selection.model_dump(); json on the changelog
    )

    def recorded(key: str) -> Selection | None:
        value = table.get(key)
        if value is None:
            return None
        metrics.selections_reused.inc()
        return Selection.model_validate(value)

    topics = {"compacted": compacted, "dlq": dlq}

    async def carry_out(done: Dispatch) -> None:
        """The table write, then the sends in order, then the metrics and the log line."""
        if done.table_write is not None:
            table[done.table_write[0]] = done.table_write[1]
        for send in done.sends:
            await topics[send.topic].send(key=send.key, value=send.value, partition=send.partition)
        _count(metrics, done)

    last_offsets: dict[TP, int] = {}  # the hot path only notes the offset; a timer turns it into lag
    _add_timers(app, config, metrics, last_offsets)
    _log_assignments(app, config, metrics)

    @app.agent(source, name="compact")
    async def compact(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for event in stream.events():
            msg = event.message
            started = time.thread_time()  # this thread's CPU: a wait for the GIL or a core is not counted
            result = process(
                msg.value if isinstance(msg.value, bytes) or msg.value is None else bytes(msg.value),
                key=msg.key,
                topic=msg.topic,
                partition=msg.partition,
                offset=msg.offset,
                recorded=recorded,
                selector=selector,
                budget=config.budget,
                max_output_bytes=config.max_output_bytes,
                config=config.compactors,
            )
            metrics.process_cpu.inc(time.thread_time() - started)
            await carry_out(dispatch(result, msg.key, msg.partition, msg.offset))
            last_offsets[msg.tp] = msg.offset
            yield None

    _ = compact
    return app


def _faust_app(config: StreamConfig) -> faust.App:
    """The app and its settings: raw bytes in and out, topics never declared by faust."""
    app = faust.App(
        config.app_id,
        broker=config.broker_urls(),
        broker_credentials=faust_credentials(config.kafka),
        datadir=str(config.datadir),
        autodiscover=False,
        processing_guarantee=config.processing_guarantee,
        store="memory://",
        key_serializer="raw",
        value_serializer="raw",
        consumer_auto_offset_reset="earliest",
        topic_partitions=config.partitions,
        topic_replication_factor=1,
        topic_allow_declare=False,  # topics are created by `migrate` / the worker's start-up check
        producer_acks=-1,
        # process() dead-letters any output over the compacted topic's limit, so the producer never
        # refuses a record: its own limit only has to be at least that.
        producer_max_request_size=max(config.max_output_bytes, 1_048_576),
        # Outputs are kilobytes each: faust's 16 KiB batches carried two or three per partition, so each
        # produce request carried few records (a busy worker's time went to the requests' socket writes;
        # benchmarks/bench_compactor_stream.py measures the rate). Never above the output topic's limit.
        producer_max_batch_size=min(config.producer_batch_bytes, config.max_output_bytes),
        web_enabled=config.web_port is not None,
        web_port=config.web_port or 6066,
        web_bind="127.0.0.1",
        web_host="127.0.0.1",
        TableManager=PatientTableManager,  # a slow broker delays the recovery, never ends it (faust_patch)
    )
    # Before anything touches app.transport (app.topic does, through the conductor).
    app.transport = PatchedTransport(app.conf.broker_consumer, app)
    return app


def _add_timers(
    app: faust.App, config: StreamConfig, metrics: StreamMetrics, last_offsets: dict[TP, int]
) -> None:
    """The lag gauge, the heartbeat and the warm-up: beside the hot path, never in it."""

    # faust's App.timer returns a bare `Callable`, App.task a union over Any: mypy sees untyped decorators.
    @app.timer(interval=1.0, on_leader=False)  # type: ignore[untyped-decorator]
    async def update_lag() -> None:
        """consumer_lag per source partition: highwater - next offset, once a second, not per record."""
        for tp, offset in list(last_offsets.items()):
            try:
                highwater = app.consumer.highwater(tp)
            except Exception:  # not known yet right after an assignment
                continue
            if highwater is not None:
                metrics.lag.labels(partition=str(tp.partition)).set(max(0, highwater - offset - 1))

    @app.timer(interval=5.0, on_leader=False)  # type: ignore[untyped-decorator]
    async def heartbeat() -> None:
        """Proves to `/healthz` that the worker's event loop is alive."""
        metrics.heartbeat.beat()

    @app.task  # type: ignore[untyped-decorator]
    async def warm_connections() -> None:
        """Once started: the output topics' metadata, which the first send would wait for, then the
        first beat, so `/healthz` says ready as soon as the worker is warm (the compactors were warmed
        before the worker started: services/compactor/warm.py)."""
        try:
            producer = app.producer._ensure_producer()  # type: ignore[attr-defined]
            for name in (config.compacted_topic, config.dlq_topic):
                await producer.partitions_for(name)
        except Exception as exc:  # a warm-up never stops a start; the first send pays it
            log.warning(
                "warm-up of the producer's metadata failed", extra=about(None, None, error=repr(exc)[:200])
            )
        metrics.heartbeat.beat()

    _ = update_lag, heartbeat, warm_connections


def _log_assignments(app: faust.App, config: StreamConfig, metrics: StreamMetrics) -> None:
    """The assigned partitions, as a gauge and a log line, and when records flow again."""

    @app.on_partitions_assigned.connect  # type: ignore[arg-type]
    async def on_assigned(sender: Any, assigned: set[TP], **kwargs: Any) -> None:
        mine = sorted(tp.partition for tp in assigned if tp.topic == config.events_topic)
        metrics.assigned.set(len(mine))
        log.info(
            "partitions assigned",
            extra=about(None, None, topic=config.events_topic, partitions=mine, worker=config.worker_name),
        )

    @app.on_rebalance_complete.connect  # type: ignore[arg-type]
    async def on_recovered(sender: Any, **kwargs: Any) -> None:
        """After an assignment faust recovers the selection table, then resumes the source partitions:
        only now do records flow (the local harness waits for this line, not for the assignment)."""
        log.info("streams resumed", extra=about(None, None, worker=config.worker_name))

    _ = on_assigned, on_recovered


def faust_credentials(kafka: KafkaClient) -> CredentialsT | None:
    """The one Kafka client configuration as faust's credentials (faust hands them to aiokafka)."""
    security = kafka.security
    if security.sasl:
        return SASLCredentials(
            username=security.username,
            password=security.password,
            ssl_context=kafka.ssl_context(),
            mechanism=security.mechanism,
        )
    context = kafka.ssl_context()
    return SSLCredentials(context) if context is not None else None


def _count(metrics: StreamMetrics, done: Dispatch) -> None:
    """A dispatch's metrics, and its log line for a dead letter."""
    if done.compacted is not None:
        metrics.record_compacted(*done.compacted)
    else:
        metrics.events.labels(outcome=done.outcome).inc()
    if done.dead_letter_log is not None:
        metrics.dead_letters.inc()
        if done.budget_violation is not None:
            metrics.budget_violations.labels(tool=done.budget_violation).inc()
        fields = dict(done.dead_letter_log)
        log.warning("dead letter", extra=about(fields.pop("thread_ts"), fields.pop("message_id"), **fields))


class _DropMissingLeaderTopic(logging.Filter):
    """faust's leader-election topic is not created (topic_allow_declare=False, no timers use it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "__assignor-__leader" not in record.getMessage()


class JsonWorker(faust.Worker):
    """A faust Worker whose logs are the service's JSON lines (services.runtime.logs)."""

    def __init__(self, app: faust.App, *, log_level: str = "INFO", **kwargs: Any) -> None:
        self._json_level = log_level
        super().__init__(app, loglevel=log_level, quiet=True, redirect_stdouts=False, **kwargs)

    def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
        configure_logging("compactor", self._json_level)
        noisy = logging.DEBUG if self._json_level == "DEBUG" else logging.WARNING
        for name in ("faust", "aiokafka", "mode"):
            logging.getLogger(name).setLevel(noisy)
        for name in ("aiokafka.cluster", "faust.assignor.partition_assignor"):
            logging.getLogger(name).addFilter(_DropMissingLeaderTopic())
