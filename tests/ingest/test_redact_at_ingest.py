"""`--redact-at-ingest`: off by default (the raw rests verbatim); on, no credential is produced."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from deploy.local.secret_testdata import leaked, slack_message_with_secrets
from schemas.events import AlertReceived, HumanMessage, parse_event
from services.ingest.config import IngestConfig
from services.ingest.emitter import Emitter
from services.ingest.planned import Planned
from services.runtime.kafka_client import KafkaClient

AT = datetime(2026, 3, 14, 3, 20, tzinfo=UTC)
T = "C1-1773458400.000100"


def _planned() -> list[Planned]:
    human = HumanMessage(
        thread_ts=T,
        message_id=f"{T}:-:human:9",
        event_time=AT,
        user="U1",
        ts="9",
        text=slack_message_with_secrets(),
    )
    alert = AlertReceived(
        thread_ts=T, message_id=f"{T}:-:alert:0", event_time=AT, status="firing", service="orders",
        alertname="DBDown", fingerprint="f", window_start=AT, window_end=AT,
        alert={"commonAnnotations": {"debug": "psql postgres://svc:Zq7-orders-DB-pw@db/orders"}},
    )  # fmt: skip
    return [Planned("events", human), Planned("events", alert)]


def _produced(redact: bool) -> list[str]:
    config = IngestConfig(
        "s", "t", KafkaClient.plaintext("unused:9092"), team_id="T0", app_id="A0", redact_at_ingest=redact
    )
    emitter = Emitter(config, cast(Any, None), cast(Any, None))
    return [value.decode() for _, _, value in emitter.encode(_planned())]


def test_by_default_the_raw_rests_verbatim() -> None:
    assert leaked("".join(_produced(False)))


def test_redact_at_ingest_produces_no_secret_and_keeps_the_rest() -> None:
    values = _produced(True)
    assert leaked("".join(values)) == []
    human = parse_event(values[0])
    assert isinstance(human, HumanMessage) and "gave 403 at 03:07" in human.text
    alert = parse_event(values[1])
    assert isinstance(alert, AlertReceived)
    assert alert.alert == {
        "commonAnnotations": {"debug": "psql postgres://svc:[REDACTED:basic-auth]@db/orders"}
    }
