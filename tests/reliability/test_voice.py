"""The bot's voice in Slack: exactly one message per post, for real.

Real processes (`incident-memory slack`, compactor, projector, replay) on the real broker and
Postgres, against the Slack stand-in (`deploy/local/slack_standin.py`: Slack's wire format and
rules; no real Slack is reachable from here). Each test fails when its rule breaks.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from deploy.local.slack_standin import SlackStandin, running
from schemas.events import EventBase, RoundCommitted, SlackPostRecorded, ThreadPost, parse_event
from schemas.ids import message_id, thread_key

from .harness import CLI, Pipeline, produce_events, read_all, wait_until

AT = datetime(2026, 3, 14, 3, 20, tzinfo=UTC)
A, B = "C0INCIDENTS", "C0PAYMENTS"


@pytest.fixture
def slack() -> Iterator[SlackStandin]:
    with running(SlackStandin(channels=(A, B))) as standin:
        yield standin


def _round(thread: str, round_: int, text: str) -> list[EventBase]:
    post = ThreadPost(
        thread_ts=thread, message_id=message_id(thread, round_, "post", 0), event_time=AT, round=round_,
        kind="questions", text=f"Before I conclude, I need answers to:\n1. {text}", model="local-deterministic",
    )  # fmt: skip
    marker = RoundCommitted(
        thread_ts=thread, message_id=message_id(thread, round_, "commit", 0), event_time=AT, round=round_,
        message_ids=[post.message_id],
    )  # fmt: skip
    return [post, marker]


def _thread(slack: SlackStandin, channel: str, root_ts: str) -> list[dict[str, Any]]:
    """The bot's replies in a Slack thread (the root is a person's message here)."""
    return [m for m in slack.thread(channel, root_ts) if m.get("bot_id")]


def _tag(message: dict[str, Any]) -> str:
    return str(((message.get("metadata") or {}).get("event_payload") or {}).get("event_id", ""))


def _caught_up(pipe: Pipeline, group: str) -> bool:
    """Whether `group` has committed the end of every partition of the events topic."""
    reader = Consumer({"bootstrap.servers": pipe.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        meta = reader.list_topics(pipe.topics["events"], timeout=10).topics[pipe.topics["events"]]
        parts = [TopicPartition(pipe.topics["events"], p) for p in meta.partitions]
        committed = {tp.partition: tp.offset for tp in reader.committed(parts, timeout=10)}
        ends = {p.partition: reader.get_watermark_offsets(p, timeout=10)[1] for p in parts}
        return all(end == 0 or committed.get(p, -1) >= end for p, end in ends.items())
    finally:
        reader.close()


def _records(pipe: Pipeline) -> list[SlackPostRecorded]:
    return [
        e
        for m in read_all(pipe.bootstrap, pipe.topics["events"])
        if isinstance(e := parse_event(m.value()), SlackPostRecorded)
    ]


@pytest.mark.fast
def test_kill9_between_the_call_and_its_record_still_one_message(
    pipeline: Pipeline, slack: SlackStandin
) -> None:
    root = slack.post_as_user(A, "checkout is failing")["ts"]
    thread = thread_key(A, root)
    slack.hold("chat.postMessage", 30)  # Slack posts, then answers only 30 s later
    poster = pipeline.slack(slack.base_url, slack.bot_token)
    produce_events(pipeline.bootstrap, pipeline.topics["events"], _round(thread, 1, "What changed?"))
    wait_until(lambda: _thread(slack, A, root), 60, "the post made in Slack", every=0.05)
    poster.kill9()  # the call is done; the poster never saw Slack's answer, never recorded it
    assert [r.phase for r in _records(pipeline)] == ["intent"]
    slack.hold("chat.postMessage", 0)
    poster.restart()
    wait_until(
        lambda: any(r.phase == "found" for r in _records(pipeline)), 60, "the post found after the crash"
    )
    time.sleep(1.0)  # room for a wrong second post to appear
    [message] = _thread(slack, A, root)
    assert _tag(message) == message_id(thread, 1, "post", 0)
    assert [(r.phase, r.slack_ts) for r in _records(pipeline)] == [("intent", None), ("found", message["ts"])]
    assert len(slack.calls("chat.postMessage")) == 1


@pytest.mark.fast
def test_a_replay_and_a_new_poster_never_post_again(
    pipeline: Pipeline, slack: SlackStandin, pg_dsn: str
) -> None:
    roots = [slack.post_as_user(A, f"incident {i}")["ts"] for i in range(3)]
    events = [e for i, r in enumerate(roots) for e in _round(thread_key(A, r), 1, f"question {i}")]
    pipeline.compactor()
    pipeline.projector()
    pipeline.slack(slack.base_url, slack.bot_token)
    produce_events(pipeline.bootstrap, pipeline.topics["events"], events)
    wait_until(lambda: len(slack.calls("chat.postMessage")) == 3, 60, "three posts")
    with pipeline.connect() as conn:

        def projected() -> bool:
            row = conn.execute("SELECT count(*) FROM slack_posts WHERE phase = 'posted'").fetchone()
            return row is not None and row[0] == 3

        wait_until(projected, 60, "the outcomes projected")
    pipeline.stop_all()
    # a replay of every topic into a fresh schema: the projection comes back, and Slack hears nothing
    fresh = f"{pipeline.schema}_replay"
    done = subprocess.run(
        [CLI, "replay", "--into", fresh, "--topic", pipeline.topics["compacted"], "--no-progress",
         "--group", f"replay-{pipeline.schema}"],
        capture_output=True, text=True, timeout=120, env=pipeline.env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    # and a poster of a new group, reading every topic again, over the replayed projection
    again = pipeline.slack(
        slack.base_url, slack.bot_token, name="slack1", group=f"new-{pipeline.schema}", schema=fresh
    )
    wait_until(lambda: _caught_up(pipeline, f"new-{pipeline.schema}"), 60, "the new poster through the log")
    assert len(slack.calls("chat.postMessage")) == 3  # the log's own records told it: nothing to say
    assert all(len(_thread(slack, A, r)) == 1 for r in roots)
    again.stop()
    with pipeline.connect() as conn:
        assert conn.execute(f'SELECT count(*) FROM "{fresh}".slack_posts').fetchone()[0] >= 3  # type: ignore[index]
        conn.execute(f'DROP SCHEMA "{fresh}" CASCADE')


@pytest.mark.fast
def test_a_429_storm_delays_but_every_post_arrives_in_order(pipeline: Pipeline, slack: SlackStandin) -> None:
    root = slack.post_as_user(A, "p99 is up")["ts"]
    thread = thread_key(A, root)
    slack.rate_limit("chat.postMessage", count=5, retry_after=1)
    pipeline.slack(slack.base_url, slack.bot_token)
    produce_events(
        pipeline.bootstrap,
        pipeline.topics["events"],
        [e for r in (1, 2, 3) for e in _round(thread, r, f"q{r}")],
    )
    wait_until(lambda: len(_thread(slack, A, root)) == 3, 90, "three posts through the storm")
    assert [_tag(m) for m in _thread(slack, A, root)] == [message_id(thread, r, "post", 0) for r in (1, 2, 3)]
    assert sum(c.status == 429 for c in slack.calls("chat.postMessage")) == 5


@pytest.mark.fast
def test_two_channels_with_the_same_ts_stay_two_threads(pipeline: Pipeline, slack: SlackStandin) -> None:
    ts = slack.post_as_user(A, "in A")["ts"]
    slack.post_as_user(B, "in B, same second")  # a ts is unique only in its channel: reuse A's
    twin = thread_key(B, ts)
    assert twin != thread_key(A, ts)
    slack.post_as_user(B, "B's own", thread_ts=None)
    b_root = slack.messages(B)[0]["ts"]
    pipeline.slack(slack.base_url, slack.bot_token)
    produce_events(
        pipeline.bootstrap,
        pipeline.topics["events"],
        [*_round(thread_key(A, ts), 1, "for A"), *_round(thread_key(B, b_root), 1, "for B")],
    )
    wait_until(lambda: _thread(slack, A, ts) and _thread(slack, B, b_root), 60, "a post in each channel")
    assert "for A" in str(_thread(slack, A, ts)[0]["blocks"]) and "for B" in str(
        _thread(slack, B, b_root)[0]["blocks"]
    )


@pytest.mark.fast
def test_a_bad_or_revoked_token_fails_at_start_in_one_line(pipeline: Pipeline, slack: SlackStandin) -> None:
    for token, error in (("xoxb-wrong", "invalid_auth"), (slack.bot_token, "token_revoked")):
        if error == "token_revoked":
            slack.revoke(token)
        done = subprocess.run(
            [CLI, "slack", "--broker", pipeline.bootstrap, "--events-topic", pipeline.topics["events"]],
            capture_output=True, text=True, timeout=60,
            env={**pipeline.env, "SLACK_API_URL": slack.base_url, "SLACK_BOT_TOKEN": token},
        )  # fmt: skip
        assert done.returncode == 1
        [line] = done.stderr.strip().splitlines()
        assert "SLACK_BOT_TOKEN was refused by Slack" in line and error in line and token not in line
