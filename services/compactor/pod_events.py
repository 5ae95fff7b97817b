"""get_pod_events: a Kubernetes EventList -> groups by reason + involved object, with counts.

Counts are summed from each event's `count` (1 when absent), first/last seen are the
raw timestamp strings as they appear, and one message is kept verbatim (the
latest). Warnings rank first when a selection is needed; a dropped group is still counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.compactor.model import Draft, Item, RawFormatError

TOOL = "get_pod_events"


def _ts(event: Mapping[str, Any], *keys: str) -> str:
    for key in keys:
        value = event.get(key)
        if isinstance(value, str) and value:
            return value
    series = event.get("series")
    if isinstance(series, dict) and isinstance(series.get("lastObservedTime"), str):
        return str(series["lastObservedTime"])
    meta = event.get("metadata") or {}
    return str(meta.get("creationTimestamp", "")) if isinstance(meta, dict) else ""


def draft(raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft:
    if not isinstance(raw, dict) or not isinstance(raw.get("items"), list):
        raise RawFormatError("get_pod_events: expected a Kubernetes EventList with an 'items' list")
    if raw.get("kind") not in (None, "EventList"):
        raise RawFormatError(f"get_pod_events: expected kind 'EventList', got {raw.get('kind')!r}")
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    total = 0
    for index, event in enumerate(raw["items"]):
        if not isinstance(event, dict) or not isinstance(event.get("reason"), str):
            raise RawFormatError(f"get_pod_events: item {index} is not an Event with a 'reason'")
        obj = event.get("involvedObject", event.get("regarding")) or {}
        if not isinstance(obj, dict):
            raise RawFormatError(f"get_pod_events: item {index} involvedObject is not an object")
        key = (event["reason"], str(obj.get("kind", "")), str(obj.get("name", "")))
        count = event.get("count")
        if count is None and isinstance(event.get("series"), dict):
            count = event["series"].get("count")
        n = int(count) if isinstance(count, int) and count > 0 else 1
        total += n
        first = _ts(event, "firstTimestamp", "eventTime")
        last = _ts(event, "lastTimestamp", "eventTime", "firstTimestamp")
        group = groups.get(key)
        if group is None:
            group = groups[key] = {
                "n": 0,
                "first": first,
                "last": last,
                "type": "",
                "message": "",
                "events": 0,
            }
        group["n"] += n
        group["events"] += 1
        if first and (not group["first"] or first < group["first"]):
            group["first"] = first
        if last >= group["last"]:
            group["last"] = last
            group["message"] = str(event.get("message", event.get("note", "")))
        if event.get("type") == "Warning" or not group["type"]:
            group["type"] = str(event.get("type", ""))
    ordered = sorted(groups.items(), key=lambda kv: (kv[1]["first"], kv[0]))
    items = []
    for index, ((reason, kind, name), g) in enumerate(ordered, start=1):
        body = {
            "reason": reason,
            "object": f"{kind}/{name}",
            "type": g["type"],
            "events": g["events"],
            "count": g["n"],
            "first": g["first"],
            "last": g["last"],
            "message": g["message"],
        }
        warning = g["type"] == "Warning"
        items.append(
            Item(id=f"e{index}", body=body, n=g["n"], level="warn" if warning else "info", first=g["first"])
        )
    header = {
        "evidence_id": evidence_id,
        "summary": f"{len(raw['items'])} events ({total} occurrences), {len(groups)} distinct reason+object",
        "more": f"get_evidence({evidence_id})",
    }
    return Draft(header=header, section="events", unit="occurrences", levels=(tuple(items),))
