"""Slack and Alertmanager payloads -> events (pure mapping; the HTTP tests check the wire)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.events import AlertReceived, HumanMessage, IncidentStateChanged, MessageDeleted, Wake
from services.ingest.alerts import KnownIncident, Window, group_thread_ts, map_webhook, parse_time
from services.ingest.planned import SLACK_TS, parse_json_object, ts_to_datetime
from services.ingest.rejections import Ignored, Rejected
from services.ingest.slack_events import Callback, Challenge, map_payload
from services.projector.mapping import ReRender, map_event

from .helpers import BOT, alert_payload, envelope, group_notification, mention, message

TS = "1710408413.000100"  # the Slack thread's ts
T = f"C123ABC456-{TS}"  # its key in the pipeline: a Slack ts is unique only within its channel


def callback(payload: dict[str, Any]) -> Callback:
    result = map_payload(payload, BOT)
    assert isinstance(result, Callback)
    return result


def test_url_verification_answers_the_challenge() -> None:
    result = map_payload(
        {
            "type": "url_verification",
            "token": "x",
            "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
        },
        BOT,
    )
    assert result == Challenge("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")


def test_thread_message_becomes_a_human_message_with_a_deterministic_id() -> None:
    result = callback(envelope(message(TS, "1710408500.000200", "p99 went up at 09:26"), event_id="Ev1"))
    assert result.event_id == "Ev1"
    [(destination, event)] = result.planned
    assert destination == "events"
    assert isinstance(event, HumanMessage)
    assert event.message_id == f"{T}:-:human:1710408500.000200"
    assert (event.thread_ts, event.ts, event.user, event.text) == (
        T,
        "1710408500.000200",
        "U123ABC456",
        "p99 went up at 09:26",
    )
    assert event.round is None and event.mention is False and event.edit_of is None
    assert event.event_time == datetime(2024, 3, 14, 9, 28, 20, 200, tzinfo=UTC)


def test_sql_in_text_is_stored_verbatim() -> None:
    text = "'; DROP TABLE agent_messages; -- \\x00 ` $(rm -rf /) <script>"
    [(_, event)] = callback(envelope(message(TS, "1710408500.000201", text))).planned
    assert isinstance(event, HumanMessage) and event.text == text


def test_app_mention_is_a_human_message_and_a_wake() -> None:
    ts = "1710408600.000300"
    planned = callback(envelope(mention(TS, ts))).planned
    assert [p.destination for p in planned] == ["events", "wake"]
    human, wake = planned[0].event, planned[1].event
    assert isinstance(human, HumanMessage) and human.mention
    assert isinstance(wake, Wake)
    assert wake.message_id == f"{T}:-:wake:{ts}" and wake.reason == "mention"
    assert wake.trigger_message_id == human.message_id == f"{T}:-:human:{ts}"


def test_message_event_of_a_mention_equals_the_app_mention_human_but_for_the_channel_type() -> None:
    # Slack sends both `message` and `app_mention` for one mention: they must be one row.
    ts = "1710408600.000301"
    text = f"<@{BOT}> what changed?"
    from_message = callback(envelope(message(TS, ts, text))).planned
    from_mention = callback(envelope(mention(TS, ts, text))).planned
    assert len(from_message) == 1  # only app_mention wakes the agent
    said, unsaid = from_message[0].event, from_mention[0].event
    assert (
        isinstance(said, HumanMessage) and said.channel_type == "channel"
    )  # app_mention has no channel_type
    assert said.model_copy(update={"channel_type": None}).to_bytes() == unsaid.to_bytes()
    assert map_event(said)[0] == map_event(unsaid)[0]  # one row, whichever event the projector keeps first


def test_edit_is_a_new_event_pointing_at_the_original() -> None:
    event = {
        "type": "message",
        "subtype": "message_changed",
        "hidden": True,
        "channel": "C123ABC456",
        "ts": "1710408700.000400",
        "event_ts": "1710408700.000400",
        "message": {
            "type": "message",
            "user": "U123ABC456",
            "text": "p99 went up at 09:27 (not 09:26)",
            "ts": "1710408500.000200",
            "thread_ts": TS,
            "edited": {"user": "U123ABC456", "ts": "1710408700.000000"},
        },
        "previous_message": {
            "type": "message",
            "user": "U123ABC456",
            "text": "p99 went up at 09:26",
            "ts": "1710408500.000200",
            "thread_ts": TS,
        },
    }
    [(_, edit)] = callback(envelope(event)).planned
    assert isinstance(edit, HumanMessage)
    assert edit.message_id == f"{T}:-:human:1710408700.000400"  # not the original's id: never a rewrite
    assert edit.edit_of == "1710408500.000200" and edit.text.endswith("(not 09:26)")


def test_deletion_is_an_event_naming_the_deleted_message() -> None:
    event = {
        "type": "message",
        "subtype": "message_deleted",
        "hidden": True,
        "channel": "C123ABC456",
        "channel_type": "channel",
        "ts": "1710408800.000500",
        "event_ts": "1710408800.000500",
        "deleted_ts": "1710408500.000200",
        "previous_message": {
            "type": "message",
            "user": "U123ABC456",
            "text": "db password is hunter2-Xq9",
            "ts": "1710408500.000200",
            "thread_ts": TS,
        },
    }
    [(destination, deletion)] = callback(envelope(event)).planned
    assert destination == "events" and isinstance(deletion, MessageDeleted)
    assert deletion.thread_ts == T and deletion.ts == "1710408500.000200" and deletion.user == "U123ABC456"
    assert deletion.message_id == f"{T}:-:deleted:1710408500.000200"
    assert "hunter2" not in deletion.to_bytes().decode()  # the event names the message, never its text
    [op] = map_event(deletion)
    assert isinstance(op, ReRender)
    assert op.target_id == f"{T}:-:human:1710408500.000200"
    assert json.loads(op.compact) == {"deleted": True, "user": "U123ABC456", "ts": "1710408500.000200"}


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        ({**message(TS, "1.2", "hi"), "bot_id": "B123"}, "bot_message"),
        ({**message(TS, "1.2", "hi"), "subtype": "bot_message"}, "bot_message"),
        (message(TS, "1.2", "I am the bot", user=BOT), "own_message"),
        (mention(TS, "1.2", user=BOT), "own_message"),
        (
            {
                "type": "message",
                "subtype": "message_deleted",
                "hidden": True,
                "channel": "C1",
                "ts": "1.3",
                "deleted_ts": "1.2",
            },
            "not_in_thread",
        ),
        (
            {
                "type": "message",
                "subtype": "message_deleted",
                "hidden": True,
                "channel": "C1",
                "ts": "1.3",
                "deleted_ts": "1.2",
                "previous_message": {**message(TS, "1.2", "x"), "bot_id": "B1"},
            },
            "bot_message",
        ),
        ({**message(TS, "1.2", "x"), "subtype": "channel_join"}, "subtype_ignored:channel_join"),
        ({k: v for k, v in message(TS, "1.2", "top level").items() if k != "thread_ts"}, "not_in_thread"),
        (
            {"type": "reaction_added", "user": "U1", "reaction": "eyes"},
            "event_type_not_handled:reaction_added",
        ),
    ],
)
def test_deliberate_ignores(event: dict[str, Any], reason: str) -> None:
    with pytest.raises(Ignored) as info:
        map_payload(envelope(event), BOT)
    assert info.value.reason == reason


def test_thread_broadcast_is_recorded() -> None:
    [(_, event)] = callback(
        envelope({**message(TS, "1710408800.000500", "fyi"), "subtype": "thread_broadcast"})
    ).planned
    assert isinstance(event, HumanMessage) and event.text == "fyi"


@pytest.mark.parametrize(
    ("payload", "status", "reason"),
    [
        ({"type": "block_actions"}, 400, "unknown_event_type"),
        ({}, 400, "missing_field"),
        ({"type": "event_callback", "event": {"type": "message"}}, 400, "missing_field"),
        ({"type": "event_callback", "event_id": "Ev1"}, 400, "missing_field"),
        ({"type": "event_callback", "event_id": "Ev1", "event": []}, 400, "bad_field"),
        (envelope({k: v for k, v in message(TS, "1.2", "x").items() if k != "user"}), 400, "missing_field"),
        (envelope({k: v for k, v in message(TS, "1.2", "x").items() if k != "text"}), 400, "missing_field"),
        (envelope(message("not-a-ts", "1.2", "x")), 400, "bad_field"),
        (envelope(message(TS, "1.2:evil", "x")), 400, "bad_field"),
        (envelope({**message(TS, "1.2", "x"), "text": 5}), 400, "bad_field"),
    ],
)
def test_malformed_callbacks_are_rejected(payload: dict[str, Any], status: int, reason: str) -> None:
    with pytest.raises(Rejected) as info:
        map_payload(payload, BOT)
    assert (info.value.status, info.value.reason) == (status, reason)


def test_malformed_json_is_rejected() -> None:
    for body in (b"{", b"[1, 2]", b"\xff\xfe", b"null", b'"x"'):
        with pytest.raises(Rejected) as info:
            parse_json_object(body)
        assert info.value.reason == "malformed_json"


def test_slack_ts_parsing_is_exact() -> None:
    assert ts_to_datetime("1355517523.000005") == datetime(2012, 12, 14, 20, 38, 43, 5, tzinfo=UTC)
    assert ts_to_datetime("1355517523.1") == datetime(2012, 12, 14, 20, 38, 43, 100000, tzinfo=UTC)


# --- Alertmanager -----------------------------------------------------------------------


def test_firing_group_opens_a_thread_with_alert_state_and_wake() -> None:
    payload = alert_payload("firing", group_key="g1")
    group = map_webhook(payload, Window(1800, 1800))
    assert SLACK_TS.match(group.thread_ts) and len(group.thread_ts.split(".")[1]) == 6
    starts = datetime(2026, 3, 14, 9, 26, 53, 123456, tzinfo=UTC)
    assert group.thread_ts.split(".")[0] == str(int(starts.timestamp()))
    assert [p.destination for p in group.planned] == ["events", "events", "wake"]
    alert, state, wake = (p.event for p in group.planned)
    assert (
        isinstance(alert, AlertReceived)
        and isinstance(state, IncidentStateChanged)
        and isinstance(wake, Wake)
    )
    t = group.thread_ts
    assert (alert.message_id, state.message_id, wake.message_id) == (
        f"{t}:-:alert:0",
        f"{t}:-:state:open",
        f"{t}:-:wake:alert",
    )
    assert alert.status == "firing" and alert.alertname == "HighErrorRate" and alert.service == "checkout"
    assert alert.fingerprint == "a1b2c3d4e5f60718" and alert.alert == payload
    assert (state.window_start, state.window_end) == (
        starts - timedelta(minutes=30),
        starts + timedelta(minutes=30),
    )
    assert state.status == "open" and state.opened_at == starts
    assert wake.reason == "alert" and wake.trigger_message_id == alert.message_id


def test_thread_ts_is_deterministic_per_group_and_start() -> None:
    a = map_webhook(alert_payload("firing", group_key="g1"), Window()).thread_ts
    again = map_webhook(alert_payload("firing", group_key="g1"), Window()).thread_ts
    other_group = map_webhook(alert_payload("firing", group_key="g2"), Window()).thread_ts
    later = map_webhook(
        alert_payload("firing", group_key="g1", starts_at="2026-03-15T09:00:00Z"), Window()
    ).thread_ts
    resolved = map_webhook(alert_payload("resolved", group_key="g1"), Window()).thread_ts
    assert a == again == resolved
    assert len({a, other_group, later}) == 3
    assert group_thread_ts("g1", datetime(2026, 3, 14, tzinfo=UTC)).startswith("1773446400.")


def test_resolved_group_updates_state_and_wakes_nobody() -> None:
    group = map_webhook(alert_payload("resolved", group_key="g1"), Window(600, 900))
    assert [p.destination for p in group.planned] == ["events", "events"]
    alert, state = (p.event for p in group.planned)
    assert isinstance(alert, AlertReceived) and isinstance(state, IncidentStateChanged)
    assert alert.message_id.endswith(":-:alert:resolved") and alert.status == "resolved"
    assert state.message_id.endswith(":-:state:resolved") and state.status == "resolved"
    assert state.event_time == datetime(2026, 3, 14, 10, 2, tzinfo=UTC)  # the latest endsAt
    starts = datetime(2026, 3, 14, 9, 26, 53, 123456, tzinfo=UTC)
    assert state.window_start == starts - timedelta(seconds=600) and state.window_end == starts + timedelta(
        seconds=900
    )


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda p: p.pop("version"), "missing_field"),
        (lambda p: p.update(version="3"), "unsupported_version"),
        (lambda p: p.pop("groupKey"), "missing_field"),
        (lambda p: p.update(status="pending"), "bad_field"),
        (lambda p: p.update(alerts=[]), "bad_field"),
        (lambda p: p.pop("alerts"), "missing_field"),
        (lambda p: p["alerts"][0].pop("startsAt"), "missing_field"),
        (lambda p: p["alerts"][0].update(startsAt="yesterday"), "bad_field"),
        (lambda p: p["alerts"][0].update(startsAt="1960-01-01T00:00:00Z"), "bad_field"),
        (lambda p: p.update(alerts=["x"]), "bad_field"),
    ],
)
def test_malformed_webhooks_are_rejected(mutate: Any, reason: str) -> None:
    payload = alert_payload("firing")
    mutate(payload)
    with pytest.raises(Rejected) as info:
        map_webhook(payload, Window())
    assert info.value.status == 400 and info.value.reason == reason


def test_rfc3339_with_nanoseconds_and_offsets() -> None:
    assert parse_time("2026-03-14T09:26:53.123456789Z", "t") == datetime(
        2026, 3, 14, 9, 26, 53, 123456, tzinfo=UTC
    )
    assert parse_time("2026-03-14T10:26:53+01:00", "t") == datetime(2026, 3, 14, 9, 26, 53, tzinfo=UTC)


# ---- a group keeps its thread while open (issue 18: what a real Alertmanager showed) ------------------


def _events(group: Any) -> list[str]:
    return [p.event.model_dump_json() for p in group.planned]


def test_an_open_group_keeps_its_thread_when_its_earliest_alert_has_left() -> None:
    """Alertmanager drops a resolved alert from the group once notified: the next notification's
    earliest startsAt is a later alert's. Knowing the open incident, it maps to the same thread, with
    the very same alert:0, state:open and wake events (the repeat is a no-op downstream)."""
    first = map_webhook(
        group_notification("firing", "g", "2026-03-14T09:00:00Z", "2026-03-14T09:00:30Z"), Window()
    )
    assert first.incident is not None and first.incident.resolved_at is None
    later = group_notification("firing", "g", "2026-03-14T09:00:30Z")
    stateless = map_webhook(later, Window())
    assert stateless.thread_ts != first.thread_ts  # the bug, without the group's incident
    known = map_webhook(later, Window(), lambda key: first.incident if key == "g" else None)
    assert known.thread_ts == first.thread_ts
    assert [p.event.message_id for p in known.planned] == [p.event.message_id for p in first.planned]
    state, first_state = known.planned[1].event, first.planned[1].event
    assert isinstance(state, IncidentStateChanged) and isinstance(first_state, IncidentStateChanged)
    assert (state.opened_at, state.window_start, state.event_time) == (
        first_state.opened_at,
        first_state.window_start,
        first_state.event_time,
    )
    resolved = map_webhook(
        group_notification("resolved", "g", "2026-03-14T09:00:30Z", ends="2026-03-14T09:20:00Z"),
        Window(),
        lambda key: known.incident,
    )
    assert resolved.thread_ts == first.thread_ts and resolved.planned[1].event.message_id.endswith(
        "state:resolved"
    )
    assert resolved.incident is not None
    assert resolved.incident.resolved_at == datetime(2026, 3, 14, 9, 20, tzinfo=UTC)


def test_an_earlier_alert_joining_an_open_group_keeps_its_thread_and_window() -> None:
    first = map_webhook(group_notification("firing", "g", "2026-03-14T09:10:00Z"), Window())
    joined = map_webhook(
        group_notification("firing", "g", "2026-03-14T09:00:00Z", "2026-03-14T09:10:00Z"),
        Window(),
        lambda _: first.incident,
    )
    assert joined.thread_ts == first.thread_ts
    assert (
        _events(joined)[1:] == _events(first)[1:]
    )  # state and wake identical; alert:0 carries the new payload


def test_after_resolution_a_resend_keeps_the_old_thread_and_a_new_episode_opens_a_new_one() -> None:
    opened = map_webhook(group_notification("firing", "g", "2026-03-14T09:00:00Z"), Window())
    resolved = map_webhook(
        group_notification("resolved", "g", "2026-03-14T09:00:00Z", ends="2026-03-14T09:20:00Z"),
        Window(),
        lambda _: opened.incident,
    )
    late_resend = map_webhook(
        group_notification("firing", "g", "2026-03-14T09:00:00Z"), Window(), lambda _: resolved.incident
    )
    assert late_resend.thread_ts == opened.thread_ts  # the episode's own ids: deduplicated downstream
    again = map_webhook(
        group_notification("firing", "g", "2026-03-14T10:00:00Z"), Window(), lambda _: resolved.incident
    )
    assert again.thread_ts != opened.thread_ts
    assert again.thread_ts == group_thread_ts("g", datetime(2026, 3, 14, 10, tzinfo=UTC))
    assert again.incident is not None and again.incident.resolved_at is None


def test_the_group_lookup_is_not_called_for_malformed_input() -> None:
    calls: list[str] = []
    payload = group_notification("resolved", "g", "2026-03-14T09:00:00Z", ends="yesterday")
    with pytest.raises(Rejected):
        map_webhook(payload, Window(), lambda key: calls.append(key) or None)  # type: ignore[func-returns-value]
    assert calls == []


def _always(incident: KnownIncident | None) -> Callable[[str], KnownIncident | None]:
    return lambda _: incident


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 600), st.integers(1, 900)), min_size=1, max_size=30))
def test_one_thread_per_episode_of_a_group_whatever_the_order(steps: list[tuple[bool, int, int]]) -> None:
    """A model of how Alertmanager notifies one group: after each change it sends the active alerts
    plus the ones resolved since the last notification (then drops those); when none is active the
    notification is "resolved" and the episode ends. Alerts join with a startsAt up to 10 minutes in the
    past (possibly before every other alert of the group), and resolve in any order. Every notification
    of an episode must map to that episode's thread, and every episode to a thread of its own."""
    now = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)
    active: dict[str, datetime] = {}
    last_end = now - timedelta(days=1)
    known = None
    threads: list[set[str]] = [set()]
    for n, (join, back_s, wait_s) in enumerate(steps):
        now += timedelta(seconds=wait_s)
        if join or not active:
            active[f"p{n}"] = max(now - timedelta(seconds=back_s), last_end + timedelta(seconds=1))
            payload = group_notification("firing", "g", *(_iso(s) for s in active.values()))
        else:
            gone = sorted(active)[back_s % len(active)]
            started = active.pop(gone)
            payload = group_notification(
                "firing" if active else "resolved", "g", _iso(started), ends=_iso(now)
            )
            payload["alerts"][0]["status"] = "resolved"
            for s in active.values():
                payload["alerts"].append({**payload["alerts"][0], "status": "firing", "startsAt": _iso(s)})
                payload["alerts"][-1]["endsAt"] = "0001-01-01T00:00:00Z"
        group = map_webhook(payload, Window(), _always(known))
        known = group.incident
        threads[-1].add(group.thread_ts)
        if group.status == "resolved":
            last_end = now
            threads.append(set())
    episodes = [t for t in threads if t]
    assert all(len(t) == 1 for t in episodes), episodes
    assert len({next(iter(t)) for t in episodes}) == len(episodes)
