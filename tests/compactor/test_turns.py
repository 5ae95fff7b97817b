"""The write-time compact of human messages and alerts: the model's view redacted, the raw verbatim."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from schemas.events import AlertReceived, HumanMessage, Selection, parse_event
from services.compactor.stream import Forward, process
from services.compactor.turns import compact_alert, compact_human, with_turn_compact
from services.projector.mapping import Row, map_event
from services.projector.profile_facts import ProfileFact

NOW = datetime(2026, 3, 14, 3, 20, tzinfo=UTC)
TS = "C1-1773458400.000100"


def no_selection(key: str) -> Selection | None:
    return None


def human(text: str) -> HumanMessage:
    return HumanMessage(
        thread_ts=TS, message_id=f"{TS}:-:human:7", event_time=NOW, user="U02ANNA", ts="7", text=text
    )


def alert(annotations: dict[str, str]) -> AlertReceived:
    return AlertReceived(
        thread_ts=TS,
        message_id=f"{TS}:-:alert:0",
        event_time=NOW,
        status="firing",
        service="orders",
        alertname="OrdersDBDown",
        fingerprint="a1b2c3d4e5f60718",
        window_start=NOW - timedelta(minutes=30),
        window_end=NOW,
        alert={"labels": {"service": "orders", "severity": "page"}, "annotations": annotations},
    )


def run(event: HumanMessage | AlertReceived) -> Forward:
    result = process(
        event.to_bytes(), key=TS.encode(), topic="in", partition=0, offset=1, recorded=no_selection
    )
    assert isinstance(result, Forward)
    return result


def test_a_human_message_without_a_secret_needs_no_compact_and_keeps_its_bytes() -> None:
    event = human("orders p99 is 4.2s since 03:02, pod checkout-api-7d9f8b6c5-x2k4q restarted 3 times")
    assert compact_human(event) is None and with_turn_compact(event) is None
    assert run(event).value == event.to_bytes()
    assert b'"compact"' not in event.to_bytes()  # no field in the bytes of an event without one


def test_a_pasted_password_is_redacted_in_the_compact_and_kept_in_the_raw() -> None:
    event = human(
        "tried it by hand: psql postgres://orders_svc:S3cr3tPassw0rd@db/orders -> timeout after 30s"
    )
    out = parse_event(run(event).value)
    assert isinstance(out, HumanMessage)
    assert out.text == event.text  # the raw, verbatim (the audit trail)
    assert out.compact == {
        **event.row_content(),
        "text": "tried it by hand: psql postgres://orders_svc:[REDACTED:basic-auth]@db/orders -> timeout after 30s",
    }
    ops = map_event(out)
    op = next(o for o in ops if isinstance(o, Row) and not o.staged)
    fact = next(o for o in ops if isinstance(o, ProfileFact))  # what recall may show other threads
    assert "S3cr3tPassw0rd" not in fact.facts and "[REDACTED:basic-auth]" in fact.facts
    assert "S3cr3tPassw0rd" in op.content
    assert op.compact is not None and "S3cr3tPassw0rd" not in op.compact
    assert json.loads(op.compact)["user"] == "U02ANNA"


def test_an_alert_annotation_with_a_token_is_redacted_and_the_rest_kept() -> None:
    event = alert(
        {
            "summary": "orders DB refused 412 connections",
            "runbook": "curl -H 'Authorization: Bearer abcd1234efgh5678'",
        }
    )
    compact = compact_alert(event)
    assert compact is not None
    assert compact["alert"]["annotations"] == {
        "summary": "orders DB refused 412 connections",
        "runbook": "curl -H 'Authorization: Bearer [REDACTED:bearer]'",
    }
    assert {k: v for k, v in compact.items() if k != "alert"} == {
        k: v for k, v in event.row_content().items() if k != "alert"
    }
    ops = map_event(parse_event(run(event).value))
    row = next(op for op in ops if isinstance(op, Row) and not op.staged)
    assert (
        "abcd1234efgh5678" in row.content
        and row.compact is not None
        and "abcd1234efgh5678" not in row.compact
    )


def test_an_alert_without_a_secret_projects_the_same_row_as_before() -> None:
    event = alert({"summary": "orders DB refused 412 connections"})
    assert compact_alert(event) is None
    assert run(event).value == event.to_bytes()
    row = next(op for op in map_event(event) if isinstance(op, Row) and not op.staged)
    assert row.compact is None


def test_the_compact_is_deterministic_and_a_replay_through_the_compactor_changes_nothing() -> None:
    event = human("token=ghp_0123456789abcdefghijABCDEFGHIJ012345 still works?")
    once = run(event).value
    assert run(event).value == once
    again = process(once, key=TS.encode(), topic="in", partition=0, offset=1, recorded=no_selection)
    assert isinstance(again, Forward) and again.value is once  # already carries its compact: the same bytes
