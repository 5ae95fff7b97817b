"""The agent's outcome labels and trigger age, which the alert rules and the SLO read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg

from schemas.events import Wake
from services.agent import metrics
from services.agent.round import TriggerNotProjected
from services.agent.toolpath import ProjectionTimeout


def test_a_round_past_its_timeout_is_timed_out_other_transient_failures_retried() -> None:
    assert metrics.round_failure_outcome(TimeoutError()) == "timed_out"
    for exc in (ProjectionTimeout("x"), TriggerNotProjected("x"), psycopg.OperationalError("x")):
        assert metrics.round_failure_outcome(exc) == "retried"


def wake(at: datetime) -> Wake:
    return Wake(
        thread_ts="1.000001",
        message_id="1.000001:wake:1",
        event_time=at,
        reason="mention",
        trigger_message_id="1.000001:h:1",
    )


def test_trigger_age_counts_from_the_mention_and_is_never_negative() -> None:
    now = datetime(2026, 3, 14, 10, 0, 30, tzinfo=UTC)
    assert metrics.trigger_age(wake(now - timedelta(seconds=12.5)), now) == 12.5
    assert metrics.trigger_age(wake(now + timedelta(seconds=3)), now) == 0.0  # a clock ahead of ours
