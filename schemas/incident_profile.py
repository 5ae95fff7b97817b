"""What an incident looks like to recall: pure extraction of facts from events, and the profile.

The projector stores one fact per event that says something about the incident (alert labels,
log pattern skeletons, pod-event reasons, series shapes, people's words and decisions, the judge's
accepted claims, where the thread may be seen) and rebuilds the incident's profile from all of its
facts with `build_profile`. Both are pure and order-independent (facts are sorted by their source
id), so a replay into an empty schema rebuilds every profile identically (invariants 8 and 14).
No model is called: a skeleton is the line with its variable parts masked.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from schemas.ids import split_thread_key
from schemas.incident_locus import (
    alert_nodes,
    is_node_event,
    log_dependencies,
    pod_event_hosts,
    pod_event_nodes,
    ranked,
    trace_dependencies,
)

MAX_SIGNATURES: Final = 64  # per incident: the largest patterns, errors first
MAX_DISCUSSION_CHARS: Final = 20_000
MAX_DECISIONS: Final = 16
LABEL_KEYS: Final = ("service", "namespace", "cluster", "severity")

# Variable parts of a log line, masked most specific first: an id or a number is resolution, not a fact
# about the kind of failure (invariant 6's reading of a pattern).
_MASKS: Final = (
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ][\d:.,]+(?:Z|[+-]\d{2}:?\d{2})?"), "<ts>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<uuid>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<ip>"),
    (re.compile(r"\b[a-z][a-z0-9]*(?:-[a-z0-9]+)*-[a-z0-9]{5,10}-[a-z0-9]{5}\b"), "<pod>"),
    (re.compile(r"\b0x[0-9a-f]+\b", re.I), "<hex>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{6,}\b", re.I), "<hex>"),
    (re.compile(r"\b(?=\w*\d)(?=\w*[a-z])\w{12,}\b", re.I), "<id>"),  # long tokens mixing letters and digits
    (re.compile(r'"[^"]{0,200}"'), "<str>"),
    (re.compile(r"[-+]?\b\d+(?:[.,]\d+)*(?:[a-z%]{1,3})?\b", re.I), "<n>"),
)
_SPACES: Final = re.compile(r"\s+")
_ERROR_WORDS: Final = re.compile(
    r"\b(?:error|err|fatal|panic|exception|traceback|critical|crit|oom\w*|killed|refused|timed? ?out|"
    r"fail(?:ed|ure|ing)?|denied|unavailable|deadlock)\b",
    re.I,
)
_JSON_MESSAGE_KEYS: Final = ("msg", "message", "error", "err", "event")
_LOGFMT_MSG: Final = re.compile(r'\bmsg="([^"]*)"|\bmsg=(\S+)')
_LEVEL: Final = re.compile(r'\blevel="?(\w+)', re.I)

_DECISION: Final = re.compile(
    r"\b(?:roll(?:ed|ing)?(?:[ -]\w+){0,3}?[ -]back|revert(?:ed|ing)?|raised?|increased?|bump(?:ed)?|lowered|"
    r"scaled?(?: (?:up|down|out))?|restart(?:ed)?|disabled?|enabled?|failed over|fail ?over|"
    r"drain(?:ed)?|cordon(?:ed)?|pinn?ed|hotfix(?:ed)?|patched|redeployed|flushed|purged)\b"
    r"(?:[^.;!?\n]|\.(?=\w)){0,80}",  # a clause; a dot inside a version (3.13.2) does not end it
    re.I,
)


def skeleton(line: str) -> str:
    """A log line's template skeleton: lower-cased, variable parts masked, spaces collapsed."""
    text = _message_of(line)
    for pattern, mask in _MASKS:
        text = pattern.sub(mask, text)
    return _SPACES.sub(" ", text).strip().lower()[:200]


def _message_of(line: str) -> str:
    """A JSON line's message (with its level), a logfmt line's msg, or the line itself."""
    stripped = line.strip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped)
        except ValueError:
            return stripped
        if isinstance(obj, dict):
            level = obj.get("level") or obj.get("severity") or ""
            for key in _JSON_MESSAGE_KEYS:
                if isinstance(obj.get(key), str):
                    return f"{level} {obj[key]}".strip()
        return stripped
    found = _LOGFMT_MSG.search(stripped)
    if found is not None:
        level = _LEVEL.search(stripped)
        return f"{level.group(1) if level else ''} {found.group(1) or found.group(2)}".strip()
    return stripped


@functools.lru_cache(maxsize=65536)
def is_error(skel: str) -> bool:
    """Whether a skeleton is error-or-worse (cached: the same skeletons recur across every rebuild)."""
    return _ERROR_WORDS.search(skel) is not None


def decisions(text: str) -> list[str]:
    """What people said they did ("rolled one pod back to 3.13.2", "raised the limit"), verbatim clauses."""
    return [m.group(0).strip().rstrip(",") for m in _DECISION.finditer(text)][:MAX_DECISIONS]


# --- facts of one event (the projector stores them keyed by the event's id) --------------------


def loki_facts(raw: Any) -> dict[str, Any]:
    """Pattern skeletons of a Loki `query_range` answer, with exact counts; errors flagged; and the
    dependencies its error lines fail to reach (`schemas/incident_locus.py`), when any."""
    counts: Counter[str] = Counter()
    errors: list[str] = []
    for stream in _get(raw, "data", "result") or []:
        for value in (stream.get("values") or []) if isinstance(stream, dict) else []:
            if isinstance(value, list) and len(value) >= 2 and isinstance(value[1], str):
                skel = skeleton(value[1])
                counts[skel] += 1
                if is_error(skel):
                    errors.append(value[1])
    top = sorted(counts.items(), key=lambda kv: (not is_error(kv[0]), -kv[1], kv[0]))
    facts: dict[str, Any] = {"patterns": {k: n for k, n in top[:MAX_SIGNATURES] if k}}
    return _with("dependencies", log_dependencies(errors), facts)


def pod_event_facts(raw: Any) -> dict[str, Any]:
    """The pods' event reasons with summed counts, and the nodes reported in trouble, when any. An event on a
    Node object is the node's (its locus), not a reason of the incident's pods."""
    reasons: Counter[str] = Counter()
    for item in (raw.get("items") or []) if isinstance(raw, dict) else []:
        if isinstance(item, dict) and isinstance(item.get("reason"), str) and not is_node_event(item):
            count = item.get("count")
            reasons[item["reason"]] += count if isinstance(count, int) and count > 0 else 1
    facts = _with("nodes", pod_event_nodes(raw), {"reasons": dict(sorted(reasons.items()))})
    return _with("hosts", pod_event_hosts(raw), facts)


def tempo_facts(raw: Any) -> dict[str, Any]:
    """The dependencies a trace's failed client spans called (an empty fact when none failed)."""
    return _with("dependencies", trace_dependencies(raw), {})


def _with(key: str, counts: Mapping[str, int], facts: dict[str, Any]) -> dict[str, Any]:
    """`facts` with the loci under `key` when there are any (a fact without loci keeps its old shape)."""
    kept = ranked(counts)
    return {**facts, key: {k: counts[k] for k in sorted(kept)}} if kept else facts


def prometheus_facts(raw: Any) -> dict[str, Any]:
    """Each series' metric name and shape (rising, falling, spike, flat), the salient ones only."""
    shapes: set[str] = set()
    for series in _get(raw, "data", "result") or []:
        if not isinstance(series, dict):
            continue
        name = str((series.get("metric") or {}).get("__name__") or "series")
        points = [_float(v[1]) for v in series.get("values") or [] if isinstance(v, list) and len(v) == 2]
        shape = series_shape([p for p in points if p is not None])
        if shape != "flat":
            shapes.add(f"{name}:{shape}")
    return {"shapes": sorted(shapes)[:MAX_SIGNATURES]}


def series_shape(points: Sequence[float]) -> str:
    """A coarse, scale-free shape: what a person would say looking at the graph."""
    if len(points) < 3:
        return "flat"
    third = max(1, len(points) // 3)
    head, tail = sum(points[:third]) / third, sum(points[-third:]) / third
    low, high = min(points), max(points)
    span = high - low
    if span <= 1e-9 * max(1.0, abs(high)):
        return "flat"
    if (tail - head) / span > 0.5:
        return "rising"
    if (head - tail) / span > 0.5:
        return "falling"
    middle = points[third:-third] or points
    if max(middle) - max(head, tail) > 0.5 * span:
        return "spike"
    return "flat"


def alert_facts(alert: Mapping[str, Any], alertname: str, service: str, status: str) -> dict[str, Any]:
    labels = alert.get("commonLabels") or {}
    if not labels and isinstance(alert.get("labels"), dict):
        labels = alert["labels"]
    picked = {k: str(labels[k]) for k in LABEL_KEYS if isinstance(labels, dict) and k in labels}
    picked["service"] = service
    facts: dict[str, Any] = {"alertname": alertname, "labels": picked, "status": status}
    nodes = alert_nodes(alertname, labels) if isinstance(labels, dict) else []
    return {**facts, "nodes": dict.fromkeys(nodes, 1)} if nodes else facts


def _get(value: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number and abs(number) != float("inf") else None


# --- the profile, from all of an incident's facts ---------------------------------------------


@dataclass(frozen=True)
class Fact:
    source_id: str  # the event's id: one fact per event, so a duplicate delivery changes nothing
    kind: str  # alert | tool | human | claims | verdict | channel | root
    at: str  # the event time, ISO 8601 (sorts as time)
    facts: Mapping[str, Any]


@dataclass(frozen=True)
class Profile:
    thread_ts: str
    alertname: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    channel: str | None = None
    private: bool = False
    opened_at: str | None = None
    resolved_at: str | None = None
    patterns: Mapping[str, int] = field(default_factory=dict)
    error_patterns: tuple[str, ...] = ()
    reasons: Mapping[str, int] = field(default_factory=dict)
    shapes: tuple[str, ...] = ()
    claims: tuple[str, ...] = ()
    decisions: tuple[str, ...] = ()
    discussion: str = ""
    nodes: tuple[str, ...] = ()  # troubled nodes, most reported first (`schemas/incident_locus.py`)
    dependencies: tuple[str, ...] = ()  # failing dependencies, most reported first
    hosts: tuple[str, ...] = ()  # nodes its pods ran on (their Warning events'), most reported first


def build_profile(thread_ts: str, facts: Iterable[Fact]) -> Profile:
    """The incident's profile: a pure function of the set of its facts (their order does not matter)."""
    ordered = sorted(facts, key=lambda f: (f.at, f.source_id))
    alerts = [f for f in ordered if f.kind == "alert"]
    firing = [f for f in alerts if f.facts.get("status") == "firing"]
    first = firing[0] if firing else (alerts[0] if alerts else None)
    resolved = [f.at for f in alerts if f.facts.get("status") == "resolved"]
    refired_after = bool(resolved) and any(f.at > resolved[-1] for f in firing)
    patterns, reasons = _merged_counts(ordered, "patterns"), _merged_counts(ordered, "reasons")
    humans = [f for f in ordered if f.kind == "human"]
    channels = [f for f in ordered if f.kind in ("channel", "root")]
    return Profile(
        thread_ts=thread_ts,
        alertname=str(first.facts["alertname"]) if first else None,
        labels=dict(first.facts.get("labels") or {}) if first else {},
        channel=_channel(thread_ts, channels),
        private=_private(channels),
        opened_at=first.at if first else (ordered[0].at if ordered else None),
        resolved_at=None if not resolved or refired_after else resolved[-1],
        patterns=patterns,
        error_patterns=tuple(sorted(k for k in patterns if is_error(k))),
        reasons=reasons,
        shapes=tuple(sorted({s for f in ordered for s in f.facts.get("shapes") or ()})),
        claims=_accepted_claims(ordered),
        decisions=tuple(d for f in humans for d in f.facts.get("decisions") or ())[:MAX_DECISIONS],
        discussion="\n".join(str(f.facts.get("text") or "") for f in humans)[:MAX_DISCUSSION_CHARS],
        nodes=_loci(ordered, "nodes"),
        dependencies=_loci(ordered, "dependencies"),
        hosts=_loci(ordered, "hosts"),
    )


def _loci(facts: Sequence[Fact], key: str) -> tuple[str, ...]:
    """Nodes or dependencies over all facts, each by its largest report (the same query asked twice is once)."""
    total: dict[str, int] = {}
    for f in facts:
        for name, count in (f.facts.get(key) or {}).items():
            total[name] = max(total.get(name, 0), int(count))
    return tuple(ranked(total))


def _merged_counts(facts: Sequence[Fact], key: str) -> dict[str, int]:
    total: Counter[str] = Counter()
    for f in facts:
        for name, count in (f.facts.get(key) or {}).items():
            total[name] = max(total[name], int(count))  # the same query asked twice is not twice the lines
    ranked = sorted(total.items(), key=lambda kv: (not is_error(kv[0]), -kv[1], kv[0]))
    return dict(ranked[:MAX_SIGNATURES])


def _channel(thread_ts: str, channels: Sequence[Fact]) -> str | None:
    """The Slack channel of the thread: its key names it, or the root the bot posted, or an observation."""
    own, _ = split_thread_key(thread_ts)
    if own is not None:
        return own
    roots = [str(f.facts["channel"]) for f in channels if f.kind == "root" and f.facts.get("channel")]
    seen = [str(f.facts["channel"]) for f in channels if f.facts.get("channel")]
    found = roots or seen
    return found[0] if found else None


def _private(channels: Sequence[Fact]) -> bool:
    """Private unless Slack said public and never said private: an unknown channel fails closed."""
    said = [f.facts.get("private") for f in channels if f.facts.get("private") is not None]
    return not said or any(bool(p) for p in said)


def _accepted_claims(facts: Sequence[Fact]) -> tuple[str, ...]:
    """The claims of the last hypothesis the judge accepted (grounded)."""
    claims = {f.source_id: f.facts.get("claims") or [] for f in facts if f.kind == "claims"}
    accepted = [f for f in facts if f.kind == "verdict" and f.facts.get("grounded")]
    for verdict in reversed(accepted):
        found = claims.get(str(verdict.facts.get("hypothesis_id")))
        if found:
            return tuple(str(c) for c in found)
    return ()
