"""Everything a compactor worker is configured with, resolved once before any wiring."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from schemas import topics
from services.compaction.config import BUILTIN, CompactorConfig
from services.runtime.kafka_client import KafkaClient

DEFAULT_APP_ID = "incident-memory-compactor"
GUARANTEES = ("at_least_once", "exactly_once")


@dataclass(frozen=True)
class StreamConfig:
    kafka: KafkaClient  # bootstrap + security, read once (services.runtime.kafka_client)
    app_id: str = DEFAULT_APP_ID  # = the consumer group
    events_topic: str = topics.EVENTS
    compacted_topic: str = topics.COMPACTED
    dlq_topic: str = topics.DLQ
    selections_topic: str = topics.SELECTIONS  # shared across app ids (schemas/topics.py)
    worker_name: str = "worker"
    workers_dir: Path = Path(".")
    web_port: int | None = None  # faust's web server; None = disabled
    metrics_port: int | None = None  # prometheus-client; None = disabled
    selector: str = "local"
    budget: int | None = None  # None = each tool's configured budget
    compactors: CompactorConfig = BUILTIN  # plugins, tool map, budgets: config.load_config() at start
    processing_guarantee: str = "at_least_once"
    partitions: int = 8  # of events_topic (checked against the broker at start-up)
    # compacted_topic's max.message.bytes, read from the broker at start-up
    max_output_bytes: int = topics.MAX_COMPACTED_RECORD_BYTES
    # The producer's record batch: many outputs per produce request (a topic at the broker's default
    # max.message.bytes, 1 MB, such as the DLQ, still takes it); capped at max_output_bytes.
    producer_batch_bytes: int = 256 * 1024
    log_level: str = "INFO"

    @property
    def datadir(self) -> Path:
        return self.workers_dir / self.worker_name

    def broker_urls(self) -> list[str]:
        """faust's broker URLs from a Kafka bootstrap list (`host:port,host:port`)."""
        hosts = [
            h.strip().removeprefix("PLAINTEXT://")
            for h in self.kafka.bootstrap_servers.split(",")
            if h.strip()
        ]
        return [h if h.startswith("kafka://") else f"kafka://{h}" for h in hosts]
