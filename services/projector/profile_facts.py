"""Event -> the fact it adds to its incident's profile (pure; recall reads the profiles, invariant 14).

One fact per event, keyed by the event's id, so a duplicate delivery or a replay adds nothing new.
A fact of a round event counts only once its round is visible (the profile is rebuilt from the
visible facts), so a round that died half-way says nothing about the incident (invariant 3).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from schemas.canonical import canonical_json
from schemas.events import (
    AiMessage,
    AlertReceived,
    CompactedToolResult,
    EventBase,
    HumanMessage,
    JudgeVerdict,
    SlackPostRecorded,
)
from schemas.ids import message_id, split_thread_key
from schemas.incident_profile import (
    alert_facts,
    decisions,
    loki_facts,
    pod_event_facts,
    prometheus_facts,
    tempo_facts,
)
from schemas.tools import tool_map
from services.boundary.redact import redact_text, redact_value


@dataclass(frozen=True)
class ProfileFact:
    """One fact of an incident's profile; the profile is rebuilt from all of them in the same transaction."""

    thread_ts: str
    source_id: str
    kind: str
    in_round: bool
    at: datetime
    facts: str  # canonical JSON


_TOOL_FACTS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "query_loki": loki_facts,
    "get_pod_events": pod_event_facts,
    "query_prometheus": prometheus_facts,
    "query_tempo": tempo_facts,
}
_TOOLS = tool_map()


def profile_facts(event: EventBase) -> list[ProfileFact]:
    """The profile facts of `event` (none when it says nothing recall uses)."""
    out = []
    found = _facts_of(event)
    if found is not None:
        kind, facts = found
        out.append(
            _fact(event, event.message_id, kind, facts, in_round=event.round is not None and kind != "human")
        )
    if isinstance(event, HumanMessage) and event.channel_type is not None:
        out.append(_visibility(event, event.channel_type))
    return out


def _fact(
    event: EventBase, source_id: str, kind: str, facts: dict[str, Any], *, in_round: bool
) -> ProfileFact:
    return ProfileFact(
        thread_ts=event.thread_ts,
        source_id=source_id,
        kind=kind,
        in_round=in_round,
        at=event.event_time,
        facts=canonical_json(facts, finite=True),
    )


def _visibility(event: HumanMessage, channel_type: str) -> ProfileFact:
    """Slack said the thread's channel is public or not: one fact per type, whichever message said it."""
    channel, _ = split_thread_key(event.thread_ts)
    source = message_id(event.thread_ts, None, "channel", channel_type)
    facts = {"channel": channel, "private": channel_type != "channel"}
    return _fact(event, source, "channel", facts, in_round=False)


def _redacted_facts(facts: dict[str, Any]) -> dict[str, Any]:
    """A tool's facts with every credential a log line held replaced by its typed marker (keys too: log
    skeletons, the hosts of failing dependencies, the nodes in trouble and those the pods ran on: each
    reaches other threads' recall)."""
    for field in ("patterns", "dependencies", "nodes", "hosts"):
        counts = facts.get(field)
        if isinstance(counts, dict):
            merged: dict[str, int] = {}
            for key, count in counts.items():
                clean = redact_text(key)
                merged[clean] = merged.get(clean, 0) + count
            facts = {**facts, field: merged}
    return dict(redact_value(facts))


def _facts_of(event: EventBase) -> tuple[str, dict[str, Any]] | None:
    if isinstance(event, AlertReceived):
        return "alert", alert_facts(event.alert, event.alertname, event.service, event.status)
    if isinstance(event, HumanMessage):
        text = redact_text(
            event.text
        )  # recall's reasons reach other threads, models and posts (invariant 13)
        return "human", {"text": text, "decisions": decisions(text)}
    if isinstance(event, CompactedToolResult):
        extract = _TOOL_FACTS.get(_TOOLS.get(event.tool, ""))
        return None if extract is None else ("tool", _redacted_facts(extract(event.raw)))
    if isinstance(event, AiMessage) and event.claims:
        return "claims", {"claims": [c.text for c in event.claims]}
    if isinstance(event, JudgeVerdict):
        return "verdict", {"grounded": event.grounded, "hypothesis_id": event.hypothesis_id}
    if isinstance(event, SlackPostRecorded) and event.root and event.phase != "intent":
        return "root", {"channel": event.channel, "private": event.channel_private}
    return None
