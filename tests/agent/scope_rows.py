"""A thread's alert and pinned window in the projection, as the MCP server reads its scope from them."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
from psycopg.types.json import Jsonb

WINDOW = (datetime(2026, 3, 14, 3, 0, tzinfo=UTC), datetime(2026, 3, 14, 3, 15, tzinfo=UTC))


def project_alert(conn: psycopg.Connection, thread: str, namespace: str = "shop") -> None:
    """Insert the thread's alert row and incident_state (what the projector writes for an alert)."""
    labels = {"alertname": "KubePodOOMKilled", "namespace": namespace, "service": "checkout-api"}
    content = {
        "status": "firing",
        "service": "checkout-api",
        "alertname": "KubePodOOMKilled",
        "fingerprint": "f",
        "window_start": WINDOW[0].isoformat(),
        "window_end": WINDOW[1].isoformat(),
        "alert": {"commonLabels": labels, "alerts": [{"labels": labels}]},
    }
    conn.execute(
        "INSERT INTO agent_messages (id, thread_ts, round, role, tool_call_id, content, compact, tokens,"
        " created_at) VALUES (%s, %s, NULL, 'alert', NULL, %s, NULL, 1, %s)",
        (f"{thread}:-:alert:0", thread, Jsonb(content), WINDOW[0]),
    )
    conn.execute(
        "INSERT INTO incident_state (thread_ts, service, status, window_start, window_end, opened_at,"
        " updated_at) VALUES (%s, 'checkout-api', 'open', %s, %s, %s, %s)",
        (thread, *WINDOW, WINDOW[0], WINDOW[0]),
    )
    conn.commit()
