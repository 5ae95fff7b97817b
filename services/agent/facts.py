"""Short fact lines read off a compact digest, values copied verbatim (never recomputed).

Used twice: by the re-render policy (a headline keeps the digest's strongest facts)
and by the local deterministic model (its claims are these lines, so every number
it cites is one the digest holds).
"""

from __future__ import annotations

from typing import Any

_SEVERE = {"fatal": 0, "critical": 0, "error": 1, "warn": 2, "warning": 2}


def _clip(text: str, width: int = 90) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _log_facts(compact: dict[str, Any]) -> list[str]:
    patterns = [p for p in compact.get("patterns") or [] if isinstance(p, dict)]
    ranked = sorted(
        patterns, key=lambda p: (_SEVERE.get(str(p.get("level", "")).lower(), 3), -int(p.get("n") or 0))
    )
    facts = []
    for p in ranked[:3]:
        facts.append(
            f"{p.get('n')}x '{_clip(p.get('line', ''), 70)}' from {p.get('first')} to {p.get('last')}"
        )
    return facts


def _metric_facts(compact: dict[str, Any]) -> list[str]:
    facts = []
    metric = compact.get("metric", "metric")
    for s in [s for s in compact.get("series") or [] if isinstance(s, dict)][:2]:
        labels = s.get("labels") or {}
        who = labels.get("pod") or labels.get("instance") or render_labels(labels)
        peak = s.get("max") or []
        peak_text = f" peaked at {peak[2]} at {peak[3]}" if isinstance(peak, list) and len(peak) >= 4 else ""
        facts.append(f"{metric} of {who}{peak_text}, {s.get('trend', '')}".rstrip(", "))
    return facts


def _event_facts(compact: dict[str, Any]) -> list[str]:
    events = [e for e in compact.get("events") or [] if isinstance(e, dict) and e.get("type") == "Warning"]
    events.sort(key=lambda e: (0 if "OOM" in str(e.get("reason")) else 1, -int(e.get("count") or 0)))
    return [
        f"{e.get('reason')} on {e.get('object')}: {e.get('events')} events from {e.get('first')} to {e.get('last')}"
        for e in events[:2]
    ]


def _trace_facts(compact: dict[str, Any]) -> list[str]:
    spans = [s for s in compact.get("spans") or [] if isinstance(s, dict) and s.get("status") == "ERROR"]
    facts = []
    for s in reversed(spans[-2:]):  # the deepest failing span first: nearest the cause
        facts.append(
            f"span {s.get('svc')} '{s.get('name')}' took {s.get('ms')} ms and failed: {_clip(s.get('message', ''), 60)}"
        )
    return facts


def render_labels(labels: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def salient_facts(compact: Any) -> list[str]:
    """The strongest facts of a digest, by its shape; a re-rendered row yields its own line."""
    if not isinstance(compact, dict):
        return [_clip(str(compact))] if compact else []
    if compact.get("re_rendered"):
        return [str(compact.get("headline") or compact.get("line") or "")]
    for key, reader in (
        ("patterns", _log_facts),
        ("series", _metric_facts),
        ("events", _event_facts),
        ("spans", _trace_facts),
    ):
        if key in compact:
            found = reader(compact)
            if found:
                return found
    return [_clip(str(compact.get("summary") or compact))]


def summary_of(compact: Any) -> str:
    if isinstance(compact, dict):
        return _clip(str(compact.get("summary") or compact.get("headline") or compact.get("line") or ""), 80)
    return _clip(str(compact), 80)
