"""Raw tool answers and Slack messages holding each kind of credential (dev tool, never shipped).

The redaction tests and the whole-pipeline test share them: every `SECRETS` value must be absent
from whatever reaches a model or Slack, and every `FACTS` string (counts, times, pattern words of
the same lines) must still be there.
"""

from __future__ import annotations

from typing import Any

from schemas.tools import tool_error_raw

T_NS = 1773457200000000000  # 2026-03-14T03:00:00Z
PEM_BODY = "MIIEpAIBAAKCAQEAw3Rk5Vc0bq1nR8mXoQ2uUeLxZ0Gf6tY4JvE1pW9aK3sHdCzB7yN2"
JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJvcmRlcnMtc3ZjIiwiaWF0IjoxNzAwMDAwMDAwfQ.Qm9ndXNTaWduYXR1cmVWYWx1ZTEyMzQ1Ng"

# The secret values themselves: none may reach a model request or a Slack post.
SECRETS = {
    "basic-auth": "Zq7-orders-DB-pw",
    "password": "Winter2026!hunter",
    "aws-access-key": "AKIAQ3EGUV7XPLMNOPQR",
    "aws-secret-key": "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",
    "slack-token": "xoxb-40212-88811-ZmFrZVNsYWNrVG9rZW4x",
    "private-key": PEM_BODY,
    "jwt": JWT,
    "github-token": "ghp_R4nd0mL00k1ngT0k3nF0rT3st1ngAbCdEf12",
}


def _line(i: int, text: str) -> list[str]:
    return [str(T_NS + i * 1_000_000_000), text]


def loki_with_secrets() -> dict[str, Any]:
    """A Loki query_range answer: 30 connection errors whose DSN holds a password (one pattern once
    redacted), and one line of each other kind of credential."""
    values = [
        _line(
            i,
            f'level=error msg="db connect failed" dsn=postgres://orders_svc:{SECRETS["basic-auth"]}@db/orders attempt={i}',
        )
        for i in range(30)
    ]
    values += [
        _line(31, f"level=warn msg=\"retrying login\" user=orders_svc password={SECRETS['password']}"),
        _line(32, f"level=info msg=\"loaded credentials\" aws_access_key_id={SECRETS['aws-access-key']} aws_secret_access_key={SECRETS['aws-secret-key']}"),
        _line(33, f"level=error msg=\"slack notify failed\" token={SECRETS['slack-token']} status=401"),
        _line(34, "-----BEGIN RSA PRIVATE KEY-----"),
        _line(35, PEM_BODY),
        _line(36, "-----END RSA PRIVATE KEY-----"),
        _line(37, f"level=error msg=\"upstream rejected\" header=\"Authorization: Bearer {SECRETS['jwt']}\" status=403"),
        _line(38, f"level=error msg=\"git fetch failed\" remote=https://{SECRETS['github-token']}@github.com/acme/orders.git"),
    ]  # fmt: skip
    return {
        "status": "success",
        "data": {
            "resultType": "streams",
            "result": [{"stream": {"app": "orders", "namespace": "shop"}, "values": values}],
        },
    }


# What must survive in the Loki digest: the pattern's exact count and the words of the lines.
LOKI_FACTS = ("30", "db connect failed", "[REDACTED:basic-auth]")


def pod_events_with_secret() -> dict[str, Any]:
    """A Kubernetes EventList whose messages carry a password and a token, on 4 pods."""
    items = [
        {
            "kind": "Event",
            "metadata": {"name": f"orders-7d9f8b6c5-x2k4{c}.17a", "namespace": "shop"},
            "involvedObject": {"kind": "Pod", "name": f"orders-7d9f8b6c5-x2k4{c}", "namespace": "shop"},
            "reason": "BackOff",
            "message": f"Back-off restarting failed container: init: DB_PASSWORD={SECRETS['password']} rejected",
            "type": "Warning",
            "count": 5,
            "firstTimestamp": "2026-03-14T03:00:00Z",
            "lastTimestamp": "2026-03-14T03:04:00Z",
        }
        for c in "abcd"
    ]
    return {"kind": "EventList", "apiVersion": "v1", "items": items}


def prometheus_with_secret() -> dict[str, Any]:
    """A Prometheus matrix whose series carry a scrape URL with a password in a label."""
    values = [[1773457200 + 60 * i, str(0.5 + i)] for i in range(10)]
    return {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {
                    "metric": {
                        "__name__": "probe_failures_total",
                        "target": f"https://admin:{SECRETS['basic-auth']}@db.shop.svc:8443/health",
                    },
                    "values": values,
                }
            ],
        },
    }


def tempo_with_secret() -> dict[str, Any]:
    """A Tempo trace whose error span's status message holds a password."""
    span = {
        "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
        "spanId": "00f067aa0ba902b7",
        "name": "SELECT orders",
        "startTimeUnixNano": str(T_NS),
        "endTimeUnixNano": str(T_NS + 3_000_000_000),
        "status": {"code": 2, "message": f"auth failed for password={SECRETS['password']}"},
    }
    return {
        "batches": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "orders"}}]},
                "scopeSpans": [{"spans": [span]}],
            }
        ]
    }


def passthrough_with_secret() -> dict[str, Any]:
    return {"config": {"user": "orders_svc", "password": SECRETS["password"], "pool": 20}}


def tool_error_with_secret() -> dict[str, str]:
    """A failed call whose upstream URL carries `user:password` (telemetry_mcp/backends.py's errors)."""
    return tool_error_raw(
        "query_loki",
        f"HTTP 502 from http://loki:{SECRETS['basic-auth']}@loki.monitoring:3100/loki/api/v1/query_range",
    )


def slack_message_with_secrets() -> str:
    """A message an engineer might paste: a password, an AWS key pair, a JWT."""
    return (
        f"tried prod creds by hand: PGPASSWORD='{SECRETS['password']}' psql -h db, "
        f"aws_access_key_id={SECRETS['aws-access-key']} aws_secret_access_key={SECRETS['aws-secret-key']}, "
        f"and curl -H 'Authorization: Bearer {SECRETS['jwt']}' gave 403 at 03:07"
    )


def leaked(text: str) -> list[str]:
    """The kinds of `SECRETS` whose value occurs in `text` (any part of a JWT counts)."""
    found = [kind for kind, value in SECRETS.items() if value in text]
    if "jwt" not in found and any(part in text for part in JWT.split(".")):
        found.append("jwt")
    return found
