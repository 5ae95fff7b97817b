"""Ingest reading a user's Alertmanager topic (services.ingest.main.workers_for), for the tests that
put alerts on that topic: with a Kafka client (test_alerts_topic.py) or Kafka's console producer
(test_console_producer.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition

from schemas.topics import TopicSpec, ensure_topics
from services.ingest.main import workers_for

from .helpers import RunningServer, config, start_server


def new_user_topic(bootstrap: str, partitions: int = 2) -> str:
    """A fresh topic of the user's, where their Alertmanager JSON lands."""
    name = f"user.alerts.{uuid.uuid4().hex[:12]}"
    ensure_topics(bootstrap, (TopicSpec(name, partitions),))
    return name


@dataclass(frozen=True)
class TopicReader:
    server: RunningServer  # the real ingest server, its alerts-topic worker running
    bootstrap: str
    topic: str  # the user's topic it reads
    group: str  # the consumer group it reads it in

    def committed(self, total: int, timeout_s: float = 20) -> int:
        """The group's committed offsets on the topic, summed over its partitions, once they reach
        `total` (what they are at the deadline otherwise)."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group})
        try:
            partitions = list(consumer.list_topics(self.topic, timeout=10).topics[self.topic].partitions)
            deadline = time.monotonic() + timeout_s
            done = 0
            while time.monotonic() < deadline:
                offsets = consumer.committed([TopicPartition(self.topic, p) for p in partitions], timeout=10)
                done = sum(max(tp.offset, 0) for tp in offsets)
                if done >= total:
                    break
                time.sleep(0.1)
            return done
        finally:
            consumer.close()


@contextmanager
def reading(bootstrap: str, topics: dict[str, str], user_topic: str) -> Iterator[TopicReader]:
    """Ingest on the test's topics, its worker reading `user_topic` in a fresh group; stopped on exit."""
    group = f"ingest-alerts-{uuid.uuid4().hex[:8]}"
    server = start_server(config(bootstrap, topics), lambda ingest: workers_for(ingest, user_topic, group))
    try:
        yield TopicReader(server, bootstrap, user_topic, group)
    finally:
        server.stop()
