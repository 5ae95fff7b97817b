"""The voice's rules, with Slack and the records as plain objects: what is posted, when, and once.

Against a real Slack stand-in, a real broker and kill -9: tests/agent/test_voice_slack.py.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from schemas.events import AlertReceived, EventBase, RoundCommitted, SlackPostRecorded, ThreadPost
from schemas.ids import message_id, thread_key
from services.runtime.errors import UserFacingError
from services.voice.blocks import METADATA_EVENT_TYPE, SlackMessage, post_blocks
from services.voice.poster import Delivery, Voice, outgoing
from services.voice.routing import parse_routes, route

AT = datetime(2026, 3, 14, 3, 20, tzinfo=UTC)
K = "1773458070.545498"  # an alert's incident key: no channel


class FakeSlack:
    def __init__(self, private: frozenset[str] = frozenset()) -> None:
        self.messages: list[dict[str, Any]] = []
        self.private = private
        self.info_calls: list[str] = []

    async def is_private(self, channel: str) -> bool | None:
        self.info_calls.append(channel)
        return channel in self.private

    async def find(self, channel: str, root_ts: str | None, post_id: str) -> str | None:
        for m in self.messages:
            if (
                m["channel"] == channel
                and m["thread_ts"] == root_ts
                and m["meta"]["event_payload"]["event_id"] == post_id
            ):
                return str(m["ts"])
        return None

    async def post(self, message: SlackMessage) -> str:
        ts = f"1800000000.{len(self.messages) + 1:06d}"
        m = message
        self.messages.append(
            {"channel": m.channel, "thread_ts": m.thread_ts, "ts": ts, "text": m.text, "meta": m.metadata}
        )
        return ts


class NoRecords:
    def outcome(self, post_id: str) -> str | None:
        return None

    def root_of(self, thread: str) -> tuple[str, str] | None:
        return None


def voice(slack: FakeSlack, emitted: list[EventBase]) -> Voice:
    async def emit(event: EventBase) -> None:
        emitted.append(event)

    return Voice(
        slack, NoRecords(), emit, parse_routes('{"team=payments": "C0PAY"}'), "C0INCIDENTS", lambda: AT
    )


def alert(thread: str = K, team: str = "payments") -> AlertReceived:
    return AlertReceived(
        thread_ts=thread, message_id=message_id(thread, None, "alert", 0), event_time=AT, status="firing",
        service="checkout-api", alertname="KubePodOOMKilled", fingerprint="f", window_start=AT, window_end=AT,
        alert={"receiver": "slack", "commonLabels": {"team": team}, "commonAnnotations": {"summary": "OOMKilled 3 times"}},
    )  # fmt: skip


def post(thread: str, round_: int, kind: str = "questions", model: str = "local-deterministic") -> ThreadPost:
    return ThreadPost(
        thread_ts=thread, message_id=message_id(thread, round_, "post", 0), event_time=AT, round=round_,
        kind=kind, text="Before I conclude, I need answers to:\n1. What changed?", model=model,  # type: ignore[arg-type]
    )  # fmt: skip


def commit(thread: str, round_: int) -> RoundCommitted:
    return RoundCommitted(
        thread_ts=thread, message_id=message_id(thread, round_, "commit", 0), event_time=AT, round=round_,
        message_ids=[message_id(thread, round_, "post", 0)],
    )  # fmt: skip


def play(v: Voice, *events: EventBase) -> None:
    async def go() -> None:
        for e in events:
            await v.handle(e)

    asyncio.run(go())


def test_an_alert_opens_its_thread_in_its_routed_channel_and_posts_reply_under_it() -> None:
    slack, emitted = FakeSlack(), list[EventBase]()
    v = voice(slack, emitted)
    play(v, alert(), post(K, 1), commit(K, 1))
    root, reply = slack.messages
    assert (root["channel"], root["thread_ts"]) == ("C0PAY", None)  # the route, not the default
    assert (reply["channel"], reply["thread_ts"]) == ("C0PAY", root["ts"])  # one thread, rooted at the alert
    assert root["meta"]["event_type"] == METADATA_EVENT_TYPE
    assert root["meta"]["event_payload"]["event_id"] == f"{K}:-:alert:0"
    phases = [(e.post_id, e.phase, e.root) for e in emitted if isinstance(e, SlackPostRecorded)]
    assert phases == [
        (f"{K}:-:alert:0", "intent", True), (f"{K}:-:alert:0", "posted", True),
        (f"{K}:1:post:0", "intent", False), (f"{K}:1:post:0", "posted", False),
    ]  # fmt: skip


def test_an_alert_root_records_whether_its_channel_is_private_asking_slack_once_per_channel() -> None:
    slack, emitted = FakeSlack(private=frozenset({"C0PAY"})), list[EventBase]()
    v = voice(slack, emitted)
    other = "1773458999.000001"
    play(v, alert(), alert(other), alert("1773459999.000001", team="search"))
    roots = [(e.thread_ts, e.channel, e.channel_private) for e in emitted
             if isinstance(e, SlackPostRecorded) and e.phase == "posted"]  # fmt: skip
    assert roots == [(K, "C0PAY", True), (other, "C0PAY", True), ("1773459999.000001", "C0INCIDENTS", False)]
    assert slack.info_calls == ["C0PAY", "C0INCIDENTS"]  # cached per channel
    intents = [e.channel_private for e in emitted if isinstance(e, SlackPostRecorded) and e.phase == "intent"]
    assert intents == [None, None, None]  # said on the outcome, asked before the post


def test_a_post_waits_for_its_rounds_marker_and_a_dead_rounds_post_is_never_said() -> None:
    thread = thread_key("C0INCIDENTS", "1773458070.000100")
    slack, emitted = FakeSlack(), list[EventBase]()
    v = voice(slack, emitted)
    dead = post(thread, 1, model="dead-round")
    play(v, dead)
    assert slack.messages == [] and v.waiting() == 1
    retried = post(thread, 1, model="local-deterministic")  # the retried round: same id, its own text
    play(v, retried, commit(thread, 1))
    [only] = slack.messages
    assert only["thread_ts"] == "1773458070.000100" and only["channel"] == "C0INCIDENTS"
    assert "local-deterministic" in str(post_blocks(retried)[1]) and v.waiting() == 0


def test_a_post_found_in_slack_after_a_crash_is_recorded_not_posted_again() -> None:
    thread = thread_key("C0INCIDENTS", "1773458070.000100")
    slack, emitted = FakeSlack(), list[EventBase]()
    first = voice(slack, emitted)
    play(first, post(thread, 1), commit(thread, 1))
    assert len(slack.messages) == 1
    # a new poster (the old one died after the call, before its record): Slack has the tag
    more: list[EventBase] = []
    again = voice(slack, [])
    again.emit = lambda e: _append(more, e)
    play(again, post(thread, 1), commit(thread, 1))
    assert len(slack.messages) == 1
    assert [(e.phase, e.slack_ts) for e in more if isinstance(e, SlackPostRecorded)] == [
        ("found", slack.messages[0]["ts"])
    ]


async def _append(out: list[EventBase], event: EventBase) -> None:
    out.append(event)


def test_an_alert_without_a_route_or_default_channel_is_not_posted() -> None:
    slack, emitted = FakeSlack(), list[EventBase]()
    v = voice(slack, emitted)
    v.default_channel = None
    play(v, alert(team="search"), post(K, 1), commit(K, 1))
    assert slack.messages == [] and len(v.outcome.skipped) == 2


def test_routes_and_their_errors() -> None:
    rules = parse_routes('{"receiver=pager": "C0PAGE", "team=payments": "C0PAY"}')
    assert route({"receiver": "pager", "commonLabels": {"team": "payments"}}, rules, "C0D") == "C0PAGE"
    assert route({"receiver": "x", "alerts": [{"labels": {"team": "payments"}}]}, rules, "C0D") == "C0PAY"
    assert route({"receiver": "x"}, rules, "C0D") == "C0D"
    for bad in ("[1]", "{not json", '{"team": "C0"}', '{"team=x": 5}'):
        with pytest.raises(UserFacingError) as info:
            parse_routes(bad)
        assert "SLACK_ROUTES" in str(info.value) and "\n" not in str(info.value)


def test_a_post_is_short_names_its_model_and_labels_the_local_model() -> None:
    summary = ThreadPost(
        thread_ts=K, message_id=message_id(K, 2, "post", 0), event_time=AT, round=2, kind="summary",
        text="checkout-api KubePodOOMKilled: 3 claims\n• 198× FATAL ERROR: JS heap out of memory\nevidence: T:2:hypothesis:0",
        model="gpt-4o",
    )  # fmt: skip
    text, blocks = post_blocks(summary)
    assert text.startswith("Summary: ") and len(text) <= 300
    body = str(blocks)
    assert "198× FATAL ERROR" in body and "evidence: T:2:hypothesis:0" in body and "`gpt-4o`" in body
    assert "not an LLM" not in body
    _, local = post_blocks(post(K, 1))
    assert "deterministic local stand-in for a model, not an LLM" in str(local)


def test_what_slack_is_sent_is_the_delivery_redacted_and_tagged_with_its_ids() -> None:
    secret = "token xoxb-1234567890-abcdefghij"
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": secret}}]
    d = Delivery("T:1:post:0", "T", 1, "C0INCIDENTS", "1800000000.000001", f"said {secret}", blocks)
    message = outgoing(d)
    assert (message.channel, message.thread_ts) == ("C0INCIDENTS", "1800000000.000001")
    assert message.text == "said token [REDACTED:slack-token]"
    assert (
        message.blocks[0]["text"]["text"] == "token [REDACTED:slack-token]"
        and "xoxb" in d.blocks[0]["text"]["text"]
    )
    assert message.metadata == {
        "event_type": METADATA_EVENT_TYPE,
        "event_payload": {"event_id": "T:1:post:0", "thread": "T"},
    }
