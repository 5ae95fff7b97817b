"""get_pod_events on the digest framework: grouped across objects, exact counts, total at every budget."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deploy.local.seed.generators import (
    event_item,
    event_list,
    generate_events,
    hex_id,
    iso_s,
    pod_name,
    unix_s,
)
from services.compaction import pod_events
from services.compaction.model import BUDGET_FLOOR
from services.compaction.registry import RawFormatError, compact_tool_result

TOOL = "get_pod_events"
BIG = 1_000_000
# `27× 03:11:00–03:12:30 Warning Unhealthy …`: count, optional first–last, optional type, reason.
_HEAD = re.compile(r"^(\d+)×(?: (\d\d:\d\d:\d\d)(?:–(\d\d:\d\d:\d\d))?)?( Warning)? (\S+)")
_OMITTED = re.compile(r"^(\d+) groups, (\d+) occurrences(?: \((.*)\))?$")
_SUMMARY = re.compile(r"^(\d+) events?, (\d+) occurrences in (\d+) groups?")


def head(item: str) -> tuple[int, str | None, str | None, bool, str]:
    """(count, first, last, is a Warning, reason) of a digest item."""
    match = _HEAD.match(item)
    assert match, item
    n, first, last, warning, reason = match.groups()
    return int(n), first, last or first, bool(warning), reason


def omitted(compact: dict[str, Any]) -> tuple[int, int, dict[str, tuple[int, int]]]:
    """(groups, occurrences, by level) left out; zeros when nothing was."""
    text = compact.get("omitted")
    if text is None:
        return 0, 0, {}
    match = _OMITTED.match(text)
    assert match, text
    levels = {}
    for part in (match.group(3) or "").split(", "):
        if part:
            level, tally = part.split(" ")
            g, n = tally.split("/")
            levels[level] = (int(g), int(n))
    if not levels:  # info only: the fitter leaves the levels out
        levels["info"] = (int(match.group(1)), int(match.group(2)))
    return int(match.group(1)), int(match.group(2)), levels


def summary(compact: dict[str, Any]) -> tuple[int, int, int]:
    match = _SUMMARY.match(compact["summary"])
    assert match, compact["summary"]
    events, occurrences, groups = match.groups()
    return int(events), int(occurrences), int(groups)


def count_of(item: dict[str, Any]) -> int:
    """The count rule, written again independently: `count`, `series.count`, `deprecatedCount`, 1."""
    series = item.get("series")
    series = series if isinstance(series, dict) else {}
    for value in (item.get("count"), series.get("count"), item.get("deprecatedCount")):
        if isinstance(value, int) and value > 0:
            return value
    return 1


def hms(timestamp: str) -> str:
    return timestamp[11:19]


# --- 1. the shape from the issue: 34 pods, one story -----------------------------------------------


def thirty_four_pods() -> dict[str, Any]:
    """34 BackOff events from 34 pods: the message differs only in the pod name and a uid."""
    rng = random.Random(14)
    items = []
    for k in range(34):
        pod = pod_name(rng, "checkout-api")
        t = unix_s(3, 10, k)
        items.append(
            event_item(
                uid=hex_id(rng, 32),
                ev_type="Warning",
                reason="BackOff",
                message=f"Back-off restarting failed container checkout-api in pod {pod}_shop({hex_id(rng, 8)})",
                component="kubelet",
                pod=pod,
                count=k + 1,
                first=t,
                last=t + 30,
            )
        )
    return event_list(items)


def test_34_objects_one_story_is_one_group_at_150() -> None:
    raw = thirty_four_pods()
    out = compact_tool_result(TOOL, raw, {"evidence_id": "T:1:tools:0"}, budget=150)
    assert out.tokens <= 150
    assert out.compact["evidence"] == "T:1:tools:0"
    [item] = out.compact["events"]  # one group, not 34 (the old digest had 34 and kept none)
    n, first, last, warning, reason = head(item)
    assert (n, warning, reason) == (sum(range(1, 35)), True, "BackOff")
    assert (first, last) == (hms(raw["items"][0]["firstTimestamp"]), hms(raw["items"][-1]["lastTimestamp"]))
    pods = [i["involvedObject"]["name"] for i in raw["items"]]
    named = [p for p in pods if f"pod/{p}" in item]
    assert named, item  # the objects are named while the budget allows...
    assert f"+{34 - len(named)} pods" in item  # ...and the rest counted
    assert "omitted" not in out.compact
    assert summary(out.compact) == (34, 595, 1)


def test_34_objects_counted_when_names_do_not_fit() -> None:
    raw = thirty_four_pods()
    draft = pod_events.draft(raw, {}, "T:1:tools:0")
    [item] = draft.items
    assert item.forms[-1] == "595× Warning BackOff 34 pods"
    big = compact_tool_result(TOOL, raw, {}, budget=BIG).compact["events"][0]
    assert "[pod+1 34 distinct]" in big  # the uid field's range; the pod name field is the objects


# --- 2. totality and exact accounting, for any EventList and any budget above the floor --------------

_REASONS = ("BackOff", "Unhealthy", "Pulled", "FailedMount", "Evicted", "Killing", "R" * 150, "Ünïcödé")
_TYPES = ("Warning", "Normal", None, "Custom")
_MESSAGES = (
    "Back-off restarting failed container checkout-api in pod {pod}",
    "Memory cgroup out of memory: Killed process {n} (node) total-vm:{n}kB",
    "Readiness probe failed: HTTP probe failed with statuscode: {n}",
    "Started container checkout-api",
    'MountVolume.SetUp failed for volume "{pod}-token" : secret not found',
)


@st.composite
def event_lists(draw: st.DrawFn) -> dict[str, Any]:
    """Random EventLists: core/v1 and events.k8s.io/v1 items, counts missing or zero, times missing."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    pods = [
        pod_name(rng, draw(st.sampled_from(("checkout-api", "cart", "db"))))
        for _ in range(draw(st.integers(1, 40)))
    ]
    items = []
    for _ in range(draw(st.integers(0, 200))):
        pod = rng.choice(pods)
        template = rng.choice(_MESSAGES) if rng.random() < 0.9 else draw(st.text(max_size=60))
        message = template.replace("{pod}", pod).replace("{n}", str(rng.randint(0, 99999)))
        first = unix_s(3, 0, rng.randrange(3600))
        last = first + rng.randrange(600)
        ev_type = rng.choice(_TYPES)
        reason = rng.choice(_REASONS)
        count = rng.choice((None, 0, 1, 2, 7, 130, 99_999, "missing"))
        if rng.random() < 0.7:
            item = event_item(
                uid=hex_id(rng, 32), ev_type=ev_type or "", reason=reason, message=message,
                component="kubelet", pod=pod, count=1, first=first, last=last,
            )  # fmt: skip
            if ev_type is None:
                del item["type"]
            if count == "missing":
                del item["count"]
            else:
                item["count"] = count
            for key in ("firstTimestamp", "lastTimestamp"):
                if rng.random() < 0.15:
                    item[key] = None
        else:  # events.k8s.io/v1
            item = {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {"name": f"{pod}.{hex_id(rng, 16)}", "namespace": "shop"},
                "regarding": {
                    "kind": rng.choice(("Pod", "Node", "ReplicaSet")),
                    "name": pod,
                    "namespace": "shop",
                },
                "reason": reason,
                "note": message,
                "eventTime": iso_s(first) if rng.random() < 0.8 else None,
                "reportingController": "kubelet",
            }
            if ev_type is not None:
                item["type"] = ev_type
            if rng.random() < 0.6:
                item["series"] = {"count": rng.choice((0, 2, 40)), "lastObservedTime": iso_s(last)}
            if rng.random() < 0.4:
                item["deprecatedCount"] = rng.choice((0, 3, 11))
        items.append(item)
    return event_list(items)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event_lists(), st.integers(BUDGET_FLOOR, 2000))
def test_any_event_list_fits_any_budget_and_accounts_exactly(raw: dict[str, Any], budget: int) -> None:
    out = compact_tool_result(TOOL, raw, {"service": "checkout-api"}, budget=budget)  # never raises
    assert out.tokens <= budget
    compact = out.compact
    total = sum(count_of(i) for i in raw["items"])
    warn = sum(count_of(i) for i in raw["items"] if i.get("type") == "Warning")
    events, occurrences, groups = summary(compact)
    assert (events, occurrences) == (len(raw["items"]), total)
    kept = [head(item) for item in compact.get("events", [])]
    left_groups, left_n, left_levels = omitted(compact)
    assert sum(k[0] for k in kept) + left_n == total  # kept + omitted = the raw's occurrences
    assert len(kept) + left_groups == groups  # and its groups
    assert sum(k[0] for k in kept if k[3]) + left_levels.get("warn", (0, 0))[1] == warn  # by level


# --- 3. values copied as they appear -------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 80), st.integers(1, 6), st.sampled_from((150, 300, 600, BIG)))
def test_every_count_and_time_shown_is_the_raws(seed: int, events: int, pods: int, budget: int) -> None:
    """generate_events says one thing per reason, so each reason is one group: its count is the sum of
    its events' counts, its first/last the earliest/latest raw times, as written (HH:MM:SS of the day)."""
    raw = generate_events(seed, events=events, pods=pods)
    out = compact_tool_result(TOOL, raw, {}, budget=budget)
    by_reason: dict[str, list[dict[str, Any]]] = {}
    for item in raw["items"]:
        by_reason.setdefault(item["reason"], []).append(item)
    stamps = {t for i in raw["items"] for t in (i["firstTimestamp"], i["lastTimestamp"])}
    lo, hi = min(stamps), max(stamps)
    window = f"{lo[:10]} {hms(lo)}" + (f"–{hms(hi)}Z" if hi != lo else "Z")
    assert out.compact.get("window", window) == window
    reasons = []
    for text in out.compact.get("events", []):
        n, first, last, warning, reason = head(text)
        mine = by_reason[reason]
        reasons.append(reason)
        assert n == sum(i["count"] for i in mine)
        assert warning == (mine[0]["type"] == "Warning")
        if first is not None:
            assert first == hms(min(i["firstTimestamp"] for i in mine))
            assert last == hms(max(i["lastTimestamp"] for i in mine))
            assert any(first in s for s in stamps) and any(last in s for s in stamps)
        objects = {i["involvedObject"]["name"] for i in mine}
        assert f" {len(objects)} pod" in text or any(f"pod/{o}" in text for o in objects)
        for low, high in re.findall(r"(\d+)\.\.(\d+)", text):  # ranges: raw numbers, min and max
            numbers = [int(x) for i in mine for x in re.findall(r"\d+", i["message"])]
            assert int(low) in numbers and int(high) in numbers and int(low) <= int(high)
    assert len(reasons) == len(set(reasons))
    if budget == BIG:
        assert set(reasons) == set(by_reason)


def test_seed_at_150_keeps_every_group_and_its_facts() -> None:
    from deploy.local.seed import seed_incident

    s = seed_incident()
    out = compact_tool_result(TOOL, s.pod_events, s.alert_context("1773458070.000100:1:tools:0"), budget=150)
    assert out.tokens <= 150
    heads = {h[4]: h for h in map(head, out.compact["events"])}
    assert heads["OOMKilling"][0] == 3 and heads["OOMKilling"][3]
    assert heads["BackOff"][:3] == (15, "03:13:30", "03:14:04")
    assert summary(out.compact) == (30, 61, 10)
    assert sum(h[0] for h in heads.values()) + omitted(out.compact)[1] == 61


# --- salience and bad input ----------------------------------------------------------------------------


def _ev(reason: str, ev_type: str, pod: str, count: int) -> dict[str, Any]:
    t = unix_s(3, 5)
    return event_item(
        uid=hex_id(random.Random(reason + pod), 32), ev_type=ev_type, reason=reason, message=f"{reason} happened",
        component="kubelet", pod=pod, count=count, first=t, last=t,
    )  # fmt: skip


def test_salience_warnings_first_then_the_alerts_objects_then_occurrences() -> None:
    raw = event_list(
        [
            _ev("Pulled", "Normal", "checkout-api-7d9f8b6c5-x2k4q", 500),
            _ev("Unhealthy", "Warning", "search-5c6d7e8f9-abcde", 90),
            _ev("FailedMount", "Warning", "search-5c6d7e8f9-abcde", 40),
            _ev("OOMKilling", "Warning", "checkout-api-7d9f8b6c5-x2k4q", 3),
        ]
    )
    draft = pod_events.draft(raw, {"service": "checkout-api"}, "e")
    assert [head(i.forms[-1])[4] for i in draft.items] == ["OOMKilling", "Unhealthy", "FailedMount", "Pulled"]
    assert [i.level for i in draft.items] == ["warn", "warn", "warn", "info"]
    assert not any(i.pinned for i in draft.items)
    plain = pod_events.draft(raw, {}, "e")  # without an alert, occurrences decide among Warnings
    assert [head(i.forms[-1])[4] for i in plain.items] == ["Unhealthy", "FailedMount", "OOMKilling", "Pulled"]


@pytest.mark.parametrize(
    "raw",
    [
        [],
        {"kind": "PodList", "items": []},
        {"kind": "EventList"},
        {"kind": "EventList", "items": ["x"]},
        {"kind": "EventList", "items": [{"message": "no reason"}]},
        {"kind": "EventList", "items": [{"reason": "X", "involvedObject": "pod/a"}]},
        {"kind": "EventList", "items": [{"reason": "X", "count": "3"}]},
        {"kind": "EventList", "items": [{"reason": "X", "count": -1}]},
        {"kind": "EventList", "items": [{"reason": "X", "series": {"count": 2.5}}]},
    ],
)
def test_bad_shapes_are_one_line_errors(raw: Any) -> None:
    with pytest.raises(RawFormatError) as err:
        compact_tool_result(TOOL, raw, {})
    assert "\n" not in str(err.value) and str(err.value).startswith("get_pod_events: ")


def test_unset_times_are_not_times() -> None:
    """null, "" and Go's zero time (how Go tools write an unset time.Time) mean no time."""
    items: list[dict[str, Any]] = [
        {"reason": "A", "firstTimestamp": None, "lastTimestamp": "", "eventTime": "0001-01-01T00:00:00Z"},
        {"reason": "A", "eventTime": "0001-01-01T00:00:00.000000Z", "series": {"count": 4}},
    ]
    out = compact_tool_result(TOOL, event_list(items), {}, budget=BUDGET_FLOOR)
    assert out.compact["events"] == ["5× A"] and "window" not in out.compact


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        # year 10000 in UTC
        ("firstTimestamp", "9999-12-31T23:59:59-14:00", "outside 1970-01-01..9999-12-31"),
        ("lastTimestamp", "2026-02-30T00:00:00Z", "not a valid date"),
        ("eventTime", "0001-01-01T00:00:00+14:00", "outside 1970-01-01..9999-12-31"),  # before year 1 in UTC
        ("eventTime", "1969-12-31T23:59:59Z", "outside"),
        ("eventTime", "10000-01-01T00:00:00Z", "not an RFC 3339 time"),
        ("lastTimestamp", "2026-03-14T03:12:44+99:99", "offset out of range"),
        ("lastTimestamp", "２０２６-03-14T03:12:44Z", "not an RFC 3339 time"),  # fullwidth digits
        ("firstTimestamp", 1773457964, "not an RFC 3339 time"),
        ("firstTimestamp", True, "not an RFC 3339 time"),
        ("series.lastObservedTime", [1], "not an RFC 3339 time"),
        ("metadata.creationTimestamp", "yesterday", "not an RFC 3339 time"),
    ],
)
def test_a_time_that_cannot_be_read_is_an_error_naming_it(field: str, value: Any, why: str) -> None:
    item: dict[str, Any] = {"reason": "A", "count": 1}
    outer, _, inner = field.rpartition(".")
    (item.setdefault(outer, {}) if outer else item)[inner] = value
    with pytest.raises(RawFormatError) as err:
        compact_tool_result(TOOL, event_list([item]), {}, budget=BUDGET_FLOOR)
    text = str(err.value)
    assert text.startswith(f"get_pod_events: item 0 {field} ") and why in text and "\n" not in text


def test_empty_list_and_timeless_events() -> None:
    empty = compact_tool_result(TOOL, event_list([]), {}, budget=BUDGET_FLOOR)
    assert summary(empty.compact) == (0, 0, 0) and "events" not in empty.compact
    timeless = compact_tool_result(
        TOOL, event_list([{"reason": "Evicted", "count": 2}]), {}, budget=BUDGET_FLOOR
    )
    assert timeless.compact["events"] == ["2× Evicted"] and "window" not in timeless.compact
