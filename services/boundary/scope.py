"""Every tool call checked before it runs: offered tools only, the pinned window, the incident's scope.

Pure. The agent applies `check_call` before it dispatches a call, and the telemetry MCP server
applies it again with the scope it derives from the projection itself, so a third-party agent
using the server is bound the same way. A call is either refused (a one-line reason the model
gets back as a tool error) or runs with its arguments clamped, each clamp said in `notes`.

Scope: the values of the alert's scope labels (default `namespace`), plus what the channel's
allow-list adds. Window: the alert's pinned window; a thread opened by a mention, with no alert,
gets `default_window_s` ending at its latest mention. No known scope means scoped queries are
refused (fail closed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from schemas.ids import split_thread_key
from services.boundary import timearg
from services.boundary.selectors import Allowed, OutOfScope, check_logql, check_promql
from services.boundary.timearg import NS_PER_S, BadTimeArg


@dataclass(frozen=True)
class Limits:
    """Sane maxima a call is clamped to; all configurable."""

    loki_limit: int = 5000
    prometheus_points: int = 1100
    max_range_s: float = 3600.0  # PromQL range / subquery look-back
    default_window_s: int = 3600  # a mention-opened thread: this long, ending at the mention


@dataclass(frozen=True)
class Scope:
    thread_ts: str
    window: tuple[int, int] | None  # nanoseconds; None: nothing to clamp to (calls with times refused)
    labels: Allowed = field(default_factory=dict)
    source: str = "alert"  # where the window came from, said in refusals


@dataclass(frozen=True)
class Checked:
    name: str
    args: dict[str, Any]
    notes: tuple[str, ...] = ()
    refusal: str | None = None

    def note_text(self) -> str:
        return "; ".join(self.notes)


def derive_scope(
    thread_ts: str,
    window: tuple[str, str] | None,
    alert_labels: Mapping[str, Any] | None,
    mention_ts: str | None,
    channel_allow: Mapping[str, Any] | None,
    scope_labels: tuple[str, ...] = ("namespace",),
    limits: Limits = Limits(),
) -> Scope:
    """The scope of one thread from what the projection holds about it."""
    labels: dict[str, frozenset[str]] = {}
    for label in scope_labels:
        given = (alert_labels or {}).get(label)
        values = {given} if isinstance(given, str) else {v for v in given or () if isinstance(v, str)}
        extra = (channel_allow or {}).get(label) or []
        values.update(v for v in extra if isinstance(v, str))
        if values or alert_labels:
            labels[label] = frozenset(values)
    if window is not None:
        try:
            bounds = timearg.parse_time_ns(window[0]), timearg.parse_time_ns(window[1])
            return Scope(thread_ts, bounds, labels, "the alert's pinned window")
        except BadTimeArg:
            pass
    if mention_ts is not None:
        end = timearg.parse_time_ns(mention_ts)
        span = f"the default {limits.default_window_s}s window ending at the mention"
        return Scope(thread_ts, (end - limits.default_window_s * NS_PER_S, end), labels, span)
    return Scope(thread_ts, None, labels, "no window (no alert and no mention)")


def labels_of_alert(payload: Any) -> dict[str, list[str]]:
    """Every label value an Alertmanager group names: its common labels and each alert's own."""
    if not isinstance(payload, Mapping):
        return {}
    found: dict[str, list[str]] = {}
    given = payload.get("alerts")
    alerts: list[Any] = given if isinstance(given, list) else []
    for labels in [payload.get("commonLabels"), *(a.get("labels") for a in alerts if isinstance(a, Mapping))]:
        for key, value in (labels or {}).items() if isinstance(labels, Mapping) else ():
            if isinstance(value, str) and value not in found.setdefault(key, []):
                found[key].append(value)
    return found


def _clamp_window(args: dict[str, Any], scope: Scope, notes: list[str]) -> None:
    if scope.window is None:
        raise OutOfScope("this thread has no pinned window yet, so no time range may be queried")
    lo, hi = scope.window
    start = timearg.parse_time_ns(args.get("start", lo)) if "start" in args else lo
    end = timearg.parse_time_ns(args.get("end", hi)) if "end" in args else hi
    if end < start:
        raise OutOfScope("end is before start")
    if end <= lo or start >= hi:
        raise OutOfScope(
            f"the range lies outside {scope.source} {timearg.rfc3339(lo)} .. {timearg.rfc3339(hi)}"
        )
    if start < lo or end > hi:
        notes.append(f"time range clamped to {scope.source} {timearg.rfc3339(lo)} .. {timearg.rfc3339(hi)}")
    args["start"], args["end"] = timearg.rfc3339(max(start, lo)), timearg.rfc3339(min(end, hi))


def _clamp_limit(args: dict[str, Any], limits: Limits, notes: list[str]) -> None:
    limit = args.get("limit")
    if limit is None:
        return
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise OutOfScope(f"limit must be a positive integer, got {limit!r}")
    if limit > limits.loki_limit:
        args["limit"] = limits.loki_limit
        notes.append(f"limit clamped from {limit} to {limits.loki_limit}")


def _clamp_step(args: dict[str, Any], limits: Limits, notes: list[str]) -> None:
    span = timearg.parse_time_ns(args["end"]) - timearg.parse_time_ns(args["start"])
    given = args.get("step", "15s")
    least = -(-span // limits.prometheus_points)
    if timearg.parse_duration_ns(given) < least:
        args["step"] = timearg.seconds_text(least)
        notes.append(
            f"step raised from {given} to {args['step']} (at most {limits.prometheus_points} points)"
        )


def _require(scope: Scope, tool: str) -> Allowed:
    if not scope.labels:
        raise OutOfScope(
            f"{tool} is refused: this thread's scope is unknown (no alert labels and no channel allow-list)"
        )
    return scope.labels


def _check_pod_events(args: dict[str, Any], scope: Scope) -> None:
    allowed = _require(scope, "get_pod_events").get("namespace")
    if allowed is None or args.get("namespace") not in allowed:
        raise OutOfScope(
            f"namespace must be one of this incident's: {', '.join(sorted(allowed or ())) or '-'}"
        )


RECALL_ARGS = frozenset({"query"})


def _check_recall(args: dict[str, Any]) -> None:
    """Recall takes a query only: what it may show is decided by the thread's own channel, never an argument."""
    extra = sorted(set(args) - RECALL_ARGS)
    if extra:
        raise OutOfScope(
            f"recall_incidents takes only `query` (the thread's own channel decides), not {extra}"
        )
    query = args.get("query")
    if not isinstance(query, str) or not query.strip() or len(query) > 300:
        raise OutOfScope("recall_incidents needs a query of 1 to 300 characters")


def _apply(kind: str, args: dict[str, Any], scope: Scope, limits: Limits, notes: list[str]) -> None:
    if kind == "query_loki":
        check_logql(str(args.get("query", "")), _require(scope, kind))
        _clamp_window(args, scope, notes)
        _clamp_limit(args, limits, notes)
    elif kind == "query_prometheus":
        check_promql(str(args.get("query", "")), _require(scope, kind), limits.max_range_s)
        _clamp_window(args, scope, notes)
        _clamp_step(args, limits, notes)
    elif kind == "get_pod_events":
        _check_pod_events(args, scope)
    elif kind == "recall_incidents":
        _check_recall(args)
    elif "start" in args or "end" in args:
        _clamp_window(args, scope, notes)


def check_call(
    name: str,
    args: Mapping[str, Any],
    offered: frozenset[str],
    scope: Scope,
    limits: Limits = Limits(),
    kind_of: Callable[[str], str] = lambda name: name,
) -> Checked:
    """Refuse or clamp one call. `kind_of` maps a tool to the rule it follows (its compactor name)."""
    if name not in offered:
        known = ", ".join(sorted(offered)) or "none"
        return Checked(name, dict(args), (), f"tool {name!r} is not offered here (offered: {known})")
    clamped = {k: v for k, v in args.items() if k != "thread"}
    notes: list[str] = []
    try:
        _apply(kind_of(name), clamped, scope, limits, notes)
    except (OutOfScope, BadTimeArg) as exc:
        return Checked(name, dict(args), (), f"{name} refused: {exc}")
    return Checked(name, clamped, tuple(notes))


@dataclass(frozen=True)
class ScopePolicy:
    """The deployment's rule: which alert labels bound a thread, channels' allow-lists, the limits.

    Read from one JSON object (`TOOL_SCOPE`), the same for the agent and the telemetry MCP server:
    `{"labels": ["namespace"], "channels": {"C0123": {"namespace": ["payments"]}},
    "default_window_s": 3600, "loki_limit": 5000, "prometheus_points": 1100, "max_range_s": 3600}`.
    """

    labels: tuple[str, ...] = ("namespace",)
    channels: Mapping[str, Mapping[str, list[str]]] = field(default_factory=dict)
    limits: Limits = Limits()

    def scope_for(
        self, thread_ts: str, window: tuple[str, str] | None, alert: Any, mention_ts: str | None
    ) -> Scope:
        channel = split_thread_key(thread_ts)[0]
        allow = self.channels.get(channel) if channel else None
        labels = labels_of_alert(alert) if alert is not None else None
        return derive_scope(thread_ts, window, labels, mention_ts, allow, self.labels, self.limits)


_LIMIT_KEYS = ("loki_limit", "prometheus_points", "max_range_s", "default_window_s")


def policy_from_json(value: Mapping[str, Any]) -> ScopePolicy:
    """Validate the `TOOL_SCOPE` object; ValueError names what is wrong."""
    unknown = sorted(set(value) - {"labels", "channels", *_LIMIT_KEYS})
    if unknown:
        raise ValueError(f"unknown keys {', '.join(unknown)}")
    labels = value.get("labels", ["namespace"])
    if not isinstance(labels, list) or not labels or not all(isinstance(x, str) and x for x in labels):
        raise ValueError("labels must be a non-empty list of label names")
    channels = value.get("channels", {})
    if not isinstance(channels, dict) or not all(
        isinstance(allow, dict) and all(isinstance(v, list) for v in allow.values())
        for allow in channels.values()
    ):
        raise ValueError('channels must map a channel id to {"label": ["value", ...]}')
    numbers = {k: value[k] for k in _LIMIT_KEYS if k in value}
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in numbers.values()):
        raise ValueError(f"{', '.join(_LIMIT_KEYS)} must be positive numbers")
    base = Limits()
    limits = Limits(
        loki_limit=int(numbers.get("loki_limit", base.loki_limit)),
        prometheus_points=int(numbers.get("prometheus_points", base.prometheus_points)),
        max_range_s=float(numbers.get("max_range_s", base.max_range_s)),
        default_window_s=int(numbers.get("default_window_s", base.default_window_s)),
    )
    return ScopePolicy(tuple(labels), channels, limits)
