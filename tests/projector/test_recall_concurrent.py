"""Concurrent recall through the real projector SQL and `schemas.recall`: by the node one incident reports in
trouble and the other's pods ran on (the pods' nodes share the profile's `nodes` column under a prefix), and
with the counts of the open incident's own keys (not only the query's)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from schemas.events import AlertReceived, CompactedToolResult, EventBase, RoundCommitted
from schemas.ids import message_id, thread_key
from schemas.recall import recall

from .helpers import apply_events

pytestmark = pytest.mark.stack

T0 = datetime(2026, 3, 14, 3, 0, tzinfo=UTC)
CHANNEL = "C0INCIDENT"
NODE = "ip-10-0-3-17.ec2.internal"
OTHER_NODE = "ip-10-0-4-17.ec2.internal"


def _warning(reason: str, pod: str, host: str) -> dict[str, object]:
    return {"reason": reason, "type": "Warning", "count": 3, "source": {"host": host},
            "involvedObject": {"kind": "Pod", "name": pod}}  # fmt: skip


def _incident(thread: str, at: datetime, service: str, items: list[dict[str, object]]) -> list[EventBase]:
    """An alert and one committed round whose only tool result is a Kubernetes EventList (no logs asked)."""
    alert = dict(
        thread_ts=thread, service=service, alertname="KubePodCrashLooping", fingerprint=service,
        window_start=at - timedelta(minutes=30), window_end=at,
        alert={"commonLabels": {"service": service, "namespace": "shop"}},
    )  # fmt: skip
    tool_id = message_id(thread, 1, "tools", 0)
    return [
        AlertReceived(message_id=message_id(thread, None, "alert", 0), event_time=at, status="firing", **alert),  # type: ignore[arg-type]
        CompactedToolResult(
            thread_ts=thread, message_id=tool_id, event_time=at + timedelta(seconds=5), round=1,
            tool_call_id="call_1", tool="get_pod_events", args={}, raw={"items": items}, compact={},
            tokens=5, raw_tokens=50, raw_sha256="0" * 64, compactor_version="t", budget=400,
        ),
        RoundCommitted(thread_ts=thread, message_id=message_id(thread, 1, "commit", 0),
                       event_time=at + timedelta(seconds=6), round=1, message_ids=[tool_id]),
    ]  # fmt: skip


def _project(conn: psycopg.Connection, schema: str, pods_node: str) -> str:
    """The node's outage (NodeNotReady on the Node, its pods failing there), then an incident of another service
    whose pods ran on `pods_node` and which asked for no node events. Returns the second's thread."""
    outage = thread_key(CHANNEL, "1773499000.000100")
    query = thread_key(CHANNEL, "1773500000.000100")
    node_down = {"reason": "NodeNotReady", "type": "Warning", "count": 1,
                 "involvedObject": {"kind": "Node", "name": NODE}, "source": {"host": "node-controller"}}  # fmt: skip
    events = [
        *_incident(
            outage,
            T0 - timedelta(minutes=20),
            "payments-api",
            [_warning("FailedMount", "payments-api-7d9f8b6c5-x2k4q", NODE), node_down],
        ),
        *_incident(
            query, T0, "checkout-api", [_warning("Unhealthy", "checkout-api-5c4b7d9f8-h6j9n", pods_node)]
        ),
    ]
    assert apply_events(conn, events, schema) == []
    return query


def test_pods_on_the_node_another_incident_reports_in_trouble_flag_it_as_concurrent(
    pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    query = _project(pg_conn, pg_schema, NODE)
    stored = pg_conn.execute(
        "SELECT nodes, pod_hosts FROM incident_profiles WHERE thread_ts = %s", (query,)
    ).fetchone()
    assert stored == ([], [NODE])  # where its pods ran (migration 013), apart from trouble
    hits = recall(pg_conn, query, k=3)
    assert [h.kind for h in hits] == ["concurrent"]
    assert f"pods on the node in trouble: {NODE}" in hits[0].reasons[:2]


def test_pods_on_another_node_are_not_flagged(pg_conn: psycopg.Connection, pg_schema: str) -> None:
    """No pattern, no shared reason, no shared place: nothing but the time links them."""
    query = _project(pg_conn, pg_schema, OTHER_NODE)
    assert [h for h in recall(pg_conn, query, k=3) if h.kind == "concurrent"] == []


def test_an_open_incidents_own_common_reason_is_weighed_by_its_count_not_as_the_rarest(
    pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    """The query (no logs) shows FailedMount, rare; the payments incident open beside it on the same alert shows
    FailedMount and BackOff, which most of the fleet shows. Read with the counts of the query's keys only,
    BackOff would weigh as the rarest key there is and hide the reason both share: the open incident's own
    keys are counted too (one more read, for the open candidates only)."""
    fleet = [
        event
        for k in range(8)
        for event in _incident(
            thread_key(CHANNEL, f"17734{k:02d}000.000100"),
            T0 - timedelta(days=9 - k),
            f"svc-{k}",
            [_warning("BackOff", f"svc-{k}-7d9f8b6c5-x2k4q", OTHER_NODE)],
        )
    ]
    payments = thread_key(CHANNEL, "1773499000.000100")
    query = thread_key(CHANNEL, "1773500000.000100")
    events = [
        *fleet,
        *_incident(
            payments,
            T0 - timedelta(minutes=20),
            "payments-api",
            [
                _warning("FailedMount", "payments-api-7d9f8b6c5-x2k4q", OTHER_NODE),
                _warning("BackOff", "payments-api-7d9f8b6c5-x2k4q", OTHER_NODE),
            ],
        ),
        *_incident(
            query, T0, "checkout-api", [_warning("FailedMount", "checkout-api-5c4b7d9f8-h6j9n", NODE)]
        ),
    ]
    assert apply_events(pg_conn, events, pg_schema) == []
    concurrent = [h.thread_ts for h in recall(pg_conn, query, k=3) if h.kind == "concurrent"]
    assert concurrent == [payments]
