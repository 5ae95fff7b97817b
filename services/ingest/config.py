"""Ingest configuration: secrets, topics and limits, as one frozen value built by main."""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas import topics
from services.runtime.kafka_client import KafkaClient

# Far above any Slack event or Alertmanager group, small enough to bound memory; the same number as the
# largest event ingest produces (schemas.topics.MAX_EVENT_BYTES), so a body that passes is never a 503 for size.
MAX_BODY_BYTES = topics.MAX_EVENT_BYTES


@dataclass(frozen=True)
class IngestConfig:
    signing_secret: str
    alertmanager_token: str
    kafka: KafkaClient  # bootstrap + security (services.runtime.kafka_client)
    team_id: str  # the one Slack workspace (SLACK_TEAM_ID): events of any other are dropped
    app_id: str  # the one Slack app (SLACK_APP_ID): events addressed to another app are dropped
    bot_user_id: str | None = None
    events_topic: str = topics.EVENTS
    wake_topic: str = topics.WAKE
    dlq_topic: str = topics.DLQ
    max_body_bytes: int = MAX_BODY_BYTES
    timestamp_tolerance_s: int = 300  # Slack's own advice: reject requests older (or newer) than 5 minutes
    ack_timeout_s: float = 2.5  # under Slack's 3 s: answer 503 rather than let Slack time out
    window_before_s: int = 30 * 60  # pinned window = [startsAt - before, startsAt + after]
    window_after_s: int = 30 * 60
    flush_timeout_s: float = 10.0  # on shutdown: wait this long for queued events to be acked
    dedupe_ttl_s: float = 3600.0  # Slack retries within minutes (immediately, ~1 min, ~5 min)
    dedupe_max_entries: int = 200_000
    producer_overrides: dict[str, str | int | bool] = field(default_factory=dict)
    directory_dsn: str | None = None  # Postgres holding slack_posts: replies in an alert's thread join it
    directory_schema: str = "public"
    redact_at_ingest: bool = False  # no secret at rest: redact humans' text and alerts before producing
    group_memory_s: float = 30.0  # an alert group's thread, as decided here, outlives the projection's lag
