"""An acked producer: confluent-kafka (idempotent, acks=all) whose deliveries resolve futures.

A poll thread serves librdkafka's delivery callbacks and resolves one
`concurrent.futures.Future` per message; the HTTP path awaits them through
`asyncio.wrap_future`, the alerts consumer waits on them directly. Nothing is answered
200 (or committed) before every future of its request resolved without error.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from schemas import topics
from services.runtime.kafka import producer_config
from services.runtime.kafka_client import KafkaClient

Delivery = concurrent.futures.Future[tuple[int, int]]  # (partition, offset)


class ProduceError(Exception):
    """The broker did not ack: the caller answers 503 (or does not commit)."""


class AckedProducer:
    def __init__(self, kafka: KafkaClient | str, **overrides: Any) -> None:
        defaults = {
            "message.timeout.ms": 30_000,
            "message.max.bytes": topics.EVENT_RECORD_LIMIT,  # the emitter refuses events over MAX_EVENT_BYTES first
            "logger": logging.getLogger("incident_memory.ingest.librdkafka"),
            # Every request waits for its ack, so a linger is paid by each one; under load, what is
            # queued while earlier batches are in flight is still batched (issue 20; benchmarks/bench_ingest.py measures the latency).
            "linger.ms": 0,
        }
        config = producer_config(kafka, **{**defaults, **overrides})
        self._producer = Producer(config)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="ingest-producer-poll", daemon=True)
        self._health_lock = threading.Lock()
        self._health: tuple[float, str | None] = (0.0, "not checked")

    def start(self) -> None:
        self._thread.start()

    def produce(self, items: Iterable[tuple[str, bytes, bytes]]) -> list[Delivery]:
        """Enqueue (topic, key, value) messages; one future per message. Raises ProduceError at once
        when librdkafka refuses (queue full, unknown config), before anything of the batch is lost."""
        futures: list[Delivery] = []
        for topic, key, value in items:
            future: Delivery = concurrent.futures.Future()
            try:
                self._producer.produce(topic, value=value, key=key, on_delivery=_resolver(future))
            except BufferError:
                raise ProduceError("producer queue full") from None
            except KafkaException as exc:
                raise ProduceError(str(exc.args[0])) from None
            futures.append(future)
        return futures

    def warm(self, topic_names: Iterable[str], timeout_s: float = 1.0) -> None:
        """Fetch the topics' metadata now, so the first produce to each does not wait for it."""
        if self.broker_reachable(timeout_s) is not None:
            return  # paid by the first produce, once a broker answers
        for topic in topic_names:
            with contextlib.suppress(KafkaException):
                self._producer.list_topics(topic, timeout=timeout_s)

    def broker_reachable(self, timeout_s: float = 1.0, cache_s: float = 1.0) -> str | None:
        """None if a broker answered a metadata request (cached for `cache_s`), else why not."""
        with self._health_lock:
            checked, error = self._health
            if time.monotonic() - checked < cache_s:
                return error
            try:
                metadata = self._producer.list_topics(timeout=timeout_s)
                error = None if metadata.brokers else "no brokers in metadata"
            except KafkaException as exc:
                error = str(exc.args[0])
            self._health = (time.monotonic(), error)
            return error

    def close(self, timeout_s: float = 10.0) -> int:
        """Flush what is queued (shutdown), stop the poll thread. Returns messages left undelivered."""
        left = self._producer.flush(timeout_s)
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        return int(left)

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(0.05)


def _resolver(future: Delivery) -> Any:
    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if future.done():  # the waiter gave up (timeout) and cancelled it
            return
        try:
            if error is not None:
                future.set_exception(ProduceError(error.str()))
            else:
                future.set_result((message.partition() or 0, message.offset() or 0))
        except concurrent.futures.InvalidStateError:
            pass  # cancelled between the check and the set

    return on_delivery
