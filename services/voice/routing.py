"""Which channel an alert opens its thread in: a routing table from receiver or labels, with a default.

`SLACK_ROUTES='{"receiver=pager-payments": "C0PAY", "team=payments": "C0PAY", "severity=critical": "C0SEV"}'`:
a key `receiver=NAME` matches the webhook's receiver, any other `label=value` its common labels
(or the first alert's labels). The first key that matches, in the order written, wins; else the
default channel. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.runtime.errors import UserFacingError
from services.runtime.loading import json_object_setting


def parse_routes(text: str | None) -> list[tuple[str, str, str]]:
    """(kind, value, channel) rules from the JSON object in SLACK_ROUTES; a one-line error if malformed."""
    value = json_object_setting("SLACK_ROUTES", text or "")
    rules = []
    for key, channel in value.items():
        name, eq, wanted = str(key).partition("=")
        if not eq or not name or not isinstance(channel, str) or not channel:
            raise UserFacingError(
                f"SLACK_ROUTES: {key!r} must be 'receiver=NAME' or 'label=value' -> a channel id"
            )
        rules.append((name, wanted, channel))
    return rules


def route(payload: Mapping[str, Any], rules: list[tuple[str, str, str]], default: str | None) -> str | None:
    labels: dict[str, Any] = {}
    common = payload.get("commonLabels")
    if isinstance(common, dict):
        labels.update(common)
    alerts = payload.get("alerts")
    if (
        isinstance(alerts, list)
        and alerts
        and isinstance(alerts[0], dict)
        and isinstance(alerts[0].get("labels"), dict)
    ):
        labels = {**alerts[0]["labels"], **labels}
    for name, wanted, channel in rules:
        if name == "receiver" and str(payload.get("receiver", "")) == wanted:
            return channel
        if name != "receiver" and str(labels.get(name, "")) == wanted and name in labels:
            return channel
    return default
