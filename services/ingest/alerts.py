"""Alertmanager webhook (version 4) payloads -> events. Pure, shared by HTTP and the Kafka consumer.

A firing group opens (or re-confirms) its incident thread: AlertReceived `T:-:alert:0`,
IncidentStateChanged `T:-:state:open` with the pinned window, and Wake `T:-:wake:alert`.
A resolved group adds AlertReceived `T:-:alert:resolved` and IncidentStateChanged
`T:-:state:resolved`; it wakes nobody. Alertmanager re-sends a group (retries on 5xx,
repeat_interval, group changes); every re-send maps to the same thread and the same ids,
so the projector's ON CONFLICT DO NOTHING and the agent's wake dedupe make it harmless.

A new incident's thread_ts is derived, never random: `<earliest startsAt, unix seconds>.<6
digits of sha256(groupKey)>`. It looks like a Slack ts on purpose: a Slack poster that opens the
real Slack thread for the alert maps this ts to the channel message it posts (the bot replies
under it), and everything inside the pipeline keys on this one value.

A group keeps its thread while it is open. The earliest startsAt alone cannot say so: Alertmanager
drops a resolved alert from its group once notified, and an alert that started earlier may join
later, so the earliest startsAt of a group moves (a real Alertmanager showed both, issue 18). So
the caller passes what it knows of the group's newest incident (`KnownIncident`, from the read
model: ingest's `GroupDirectory`), and `incident_for` decides, purely: an open incident keeps the
group's notifications; a resolved one keeps the re-sends of its own episode (every alert started
before it ended); anything newer opens a new thread. Joining a known thread also keeps its opening
time and pinned window, so a repeat maps to the very same events.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from schemas.events import AlertReceived, IncidentStateChanged, Wake
from schemas.ids import message_id
from services.ingest.planned import Planned, get_str
from services.ingest.rejections import Rejected, bad, missing

RFC3339 = re.compile(  # re.ASCII: \d is 0-9 only, not every Unicode digit ("２０２６")
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|z|[+-]\d{2}:\d{2})$", re.ASCII
)


@dataclass(frozen=True)
class Window:
    before_s: int = 1800
    after_s: int = 1800


@dataclass(frozen=True)
class KnownIncident:
    """The newest incident of an alert group, as the read model (or this process) last saw it."""

    thread_ts: str
    opened_at: datetime
    resolved_at: datetime | None = None  # None while open


@dataclass(frozen=True)
class AlertGroup:
    thread_ts: str
    status: str
    planned: list[Planned]
    group_key: str = ""
    incident: KnownIncident | None = None  # the group's incident as this notification leaves it


# Times an alert can truthfully carry, after conversion to UTC. Go's zero time (year 1) means "not set"
# and is handled by the callers; anything else outside this range is refused, never shifted or wrapped.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)  # far from datetime.max: windows around it cannot overflow


def parse_time(value: str, where: str) -> datetime:
    """RFC 3339 as Alertmanager writes it (Go: up to nanoseconds, `Z` or an offset), to aware UTC.

    The offset must be a real one (hours 00-23, minutes 00-59: RFC 3339's time-numoffset), and the
    time must fall in [1970, 9000) once in UTC: `+99:99` would shift it by 100 h, and year 1 or 9999
    with an offset overflows Python's datetime."""
    match = RFC3339.match(value)
    if not match:
        raise bad(where, f"not an RFC 3339 time: {value[:40]!r}")
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    micros = int(((fraction or "") + "000000")[:6])
    offset = timedelta(0)
    if zone not in ("Z", "z"):
        off_hours, off_minutes = int(zone[1:3]), int(zone[4:6])
        if off_hours > 23 or off_minutes > 59:
            raise bad(where, f"not a UTC offset: {zone!r}")
        offset = (1 if zone[0] == "+" else -1) * timedelta(hours=off_hours, minutes=off_minutes)
    try:
        local = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micros, UTC)
        moment = local - offset
    except (ValueError, OverflowError) as exc:
        raise bad(where, f"{value[:40]!r}: {exc}") from None
    if not EARLIEST <= moment < LATEST:
        raise bad(where, f"{value[:40]!r} is outside {EARLIEST.year}..{LATEST.year - 1}")
    return moment


def group_thread_ts(group_key: str, earliest: datetime) -> str:
    """Deterministic thread_ts for an alert group: a retry or re-send maps to the same thread."""
    digits = int(hashlib.sha256(group_key.encode()).hexdigest(), 16) % 1_000_000
    return f"{int(earliest.timestamp())}.{digits:06d}"


def incident_for(group_key: str, starts: list[datetime], known: KnownIncident | None) -> tuple[str, datetime]:
    """(thread_ts, opened_at) of the incident a notification with these alert starts belongs to."""
    earliest = min(starts)
    if known is not None:
        if known.resolved_at is None or all(start <= known.resolved_at for start in starts):
            return known.thread_ts, known.opened_at
        earliest = min(start for start in starts if start > known.resolved_at)
    return group_thread_ts(group_key, earliest), earliest


def map_webhook(
    payload: dict[str, Any], window: Window, known: Callable[[str], KnownIncident | None] | None = None
) -> AlertGroup:
    """Map one Alertmanager notification. Raises Rejected (4xx) for anything malformed.

    `known(groupKey)`: the group's newest incident (None: a stateless mapping, every thread from the
    earliest startsAt). Called only once the payload is known to be well formed."""
    version = payload.get("version")
    if version is None:
        raise missing("version")
    if str(version) != "4":
        raise Rejected(400, "unsupported_version", f"webhook version {version!r}, expected '4'")
    group_key = get_str(payload, "groupKey", "") or ""
    if not group_key:
        raise missing("groupKey")
    status = get_str(payload, "status", "")
    if status not in ("firing", "resolved"):
        raise bad("status", f"expected 'firing' or 'resolved', got {str(status)[:40]!r}")
    alerts = payload.get("alerts")
    if not isinstance(alerts, list) or not alerts:
        raise missing("alerts") if alerts is None else bad("alerts", "expected a non-empty list")
    starts: list[tuple[datetime, dict[str, Any]]] = []
    for i, alert in enumerate(alerts):
        if not isinstance(alert, dict):
            raise bad(f"alerts[{i}]", "expected an object")
        starts.append(
            (parse_time(get_str(alert, "startsAt", f"alerts[{i}].") or "", f"alerts[{i}].startsAt"), alert)
        )
    first = min(starts, key=lambda pair: pair[0])[1]
    labels = _labels(payload, first)
    ended_at = (
        _latest_end(starts) if status == "resolved" else None
    )  # before the lookup: bad input costs none
    thread_ts, earliest = incident_for(
        group_key, [start for start, _ in starts], known(group_key) if known else None
    )
    window_start = earliest - timedelta(seconds=window.before_s)
    window_end = earliest + timedelta(seconds=window.after_s)
    service = labels.get("service") or labels.get("job") or labels.get("namespace") or "unknown"
    alert_id = message_id(thread_ts, None, "alert", "0" if status == "firing" else "resolved")
    ended = ended_at or earliest
    received = AlertReceived(
        message_id=alert_id,
        event_time=ended,
        status="firing" if status == "firing" else "resolved",
        alertname=labels.get("alertname") or "unknown",
        fingerprint=str(first.get("fingerprint") or ""),
        alert=payload,
        thread_ts=thread_ts,
        service=service,
        window_start=window_start,
        window_end=window_end,
    )
    state = IncidentStateChanged(
        message_id=message_id(thread_ts, None, "state", "open" if status == "firing" else "resolved"),
        event_time=ended,
        status="open" if status == "firing" else "resolved",
        opened_at=earliest,
        thread_ts=thread_ts,
        service=service,
        window_start=window_start,
        window_end=window_end,
    )
    planned = [Planned("events", received), Planned("events", state)]
    if status == "firing":
        wake = Wake(
            thread_ts=thread_ts,
            message_id=message_id(thread_ts, None, "wake", "alert"),
            event_time=earliest,
            reason="alert",
            trigger_message_id=alert_id,
        )
        planned.append(Planned("wake", wake))
    return AlertGroup(
        thread_ts, status or "", planned, group_key, KnownIncident(thread_ts, earliest, ended_at)
    )


def _labels(payload: dict[str, Any], first: dict[str, Any]) -> dict[str, str]:
    """commonLabels over groupLabels over the earliest alert's labels; strings only."""
    merged: dict[str, str] = {}
    for source in (first.get("labels"), payload.get("groupLabels"), payload.get("commonLabels")):
        if isinstance(source, dict):
            merged.update({str(k): v for k, v in source.items() if isinstance(v, str)})
    return merged


def _latest_end(starts: list[tuple[datetime, dict[str, Any]]]) -> datetime:
    """When a resolved group ended: its latest endsAt (Go's zero time means 'not set')."""
    ends = []
    for i, (start, alert) in enumerate(starts):
        raw = alert.get("endsAt")
        if isinstance(raw, str) and not raw.startswith("0001-01-01T00:00:00"):  # Go's zero time: not set
            ends.append(parse_time(raw, f"alerts[{i}].endsAt"))
        else:
            ends.append(start)
    return max(ends)
