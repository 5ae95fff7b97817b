"""Is a Slack Events API payload meant for this installation? Pure, so each branch is testable.

A signing secret or an app-level token proves the request came from Slack, not that it is about
our workspace or addressed to our app: a secret shared by mistake between apps, or an app installed
in a second workspace, would otherwise feed another team's messages into an incident's memory.
A foreign event is answered 2xx (Slack retries any other answer) and counted, never recorded.
"""

from __future__ import annotations

from typing import Any, Literal

from services.ingest.rejections import Ignored, missing

# The fields compared, in order; also the closed label set of `ingest_foreign_events_total`.
ORIGIN_FIELDS: tuple[Literal["team_id", "api_app_id"], ...] = ("team_id", "api_app_id")
# The envelope type that carries events to record; the others (the URL handshake, rate-limit notices,
# anything unknown, which mapping refuses with a 400) record nothing, so there is nothing to compare.
ADDRESSED = "event_callback"
FOREIGN = "foreign_"  # the prefix of the ignore reasons raised here


def foreign_field(payload: dict[str, Any], team_id: str, app_id: str) -> str | None:
    """The first of `team_id` / `api_app_id` that is not ours, or None when both match. Slack always
    sends both on an event_callback, so one absent is a malformed body: Rejected (400 missing_field)."""
    if payload.get("type") != ADDRESSED:  # any JSON value, unhashable ones included
        return None
    expected = {"team_id": team_id, "api_app_id": app_id}
    for name in ORIGIN_FIELDS:
        value = payload.get(name)
        if not isinstance(value, str) or not value:
            raise missing(name)
        if value != expected[name]:
            return name
    return None


def check_origin(payload: dict[str, Any], team_id: str, app_id: str) -> None:
    """Raise Ignored(`foreign_<field>`) for a payload of another workspace or app."""
    field = foreign_field(payload, team_id, app_id)
    if field is not None:
        raise Ignored(f"{FOREIGN}{field}")
