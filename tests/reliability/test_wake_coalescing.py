"""Ten mentions in ten seconds give one round, one post, and ten recorded mentions (issue 34), through the
real Kafka, compactor, projector and agent process (deterministic local model, default wake window).

The seed's alert opens the thread (no alert round: its wake is not sent); then ten mentions from three
people, one a second, each produced as Slack's ingest does (the human event, then its wake). The agent
gathers the wakes and runs one round; its post records the ten mentions it answers. Every wake offset
is committed (each wake is done with), and still only one round and one post exist.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from agent.seedplay import alert_events, human_events
from agent.seedplay import produce as produce_seed
from agent.test_seed_thread import _pipeline, _rows, _start
from confluent_kafka import Producer

from schemas.events import HumanMessage, Wake
from schemas.ids import message_id

from .harness import Pipeline, wait_until

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(300)]
PEOPLE = ("U01ALICE", "U02BOB", "U03CAROL")


def _mention(i: int) -> tuple[HumanMessage, Wake]:
    (seed,) = human_events(mention=True)
    ts = f"{float(seed.ts) + i:.6f}"
    human = HumanMessage(
        thread_ts=seed.thread_ts, message_id=message_id(seed.thread_ts, None, "human", ts),
        event_time=seed.event_time + timedelta(seconds=i), user=PEOPLE[i % 3], ts=ts,
        text=f"<@U0BOT> is checkout still OOMing? ({i})", mention=True,
    )  # fmt: skip
    wake = Wake(thread_ts=human.thread_ts, message_id=message_id(human.thread_ts, None, "wake", ts),
                event_time=human.event_time, reason="mention", trigger_message_id=human.message_id,
                user=human.user)  # fmt: skip
    return human, wake


def _committed_wakes(pipe: Pipeline, group: str) -> int:
    """The group's committed offsets on the wake topic, summed over its partitions."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": pipe.bootstrap, "group.id": group})
    try:
        topic = pipe.topics["wake"]
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        committed = consumer.committed([TopicPartition(topic, p) for p in parts], timeout=10)
        return sum(max(int(tp.offset), 0) for tp in committed)
    finally:
        consumer.close()


def _posts(pipe: Pipeline) -> list[tuple[Any, ...]]:
    with psycopg.connect(pipe.dsn, autocommit=True, options=f"-c search_path={pipe.schema}") as conn:
        return conn.execute(
            "SELECT id, round, content FROM agent_messages WHERE role = 'post' ORDER BY seq"
        ).fetchall()


def test_ten_mentions_in_ten_seconds_give_one_round_and_one_post(
    pipeline: Pipeline, record: dict[str, object]
) -> None:
    pipe = pipeline
    group = f"agent-{pipe.schema}"
    mentions = [_mention(i) for i in range(1, 11)]
    try:
        _pipeline(pipe)
        _start(pipe, group, "0")
        pipe.wait_ready(*pipe.procs, timeout=90)
        produce_seed(pipe.bootstrap, pipe.topics["events"], alert_events())
        producer = Producer({"bootstrap.servers": pipe.bootstrap, "enable.idempotence": True})
        started = time.monotonic()
        for i, (human, wake) in enumerate(mentions):
            time.sleep(max(0.0, started + 0.9 * i - time.monotonic()))  # one about every 0.9 s
            producer.produce(pipe.topics["events"], key=human.key(), value=human.to_bytes())
            producer.produce(pipe.topics["wake"], key=wake.key(), value=wake.to_bytes())
            assert producer.flush(10) == 0
        record["mentions_seconds"] = round(time.monotonic() - started, 1)
        wait_until(lambda: _posts(pipe), 120, "the round's post", every=0.5)
        wait_until(lambda: _committed_wakes(pipe, group) == 10, 60, "every wake done with", every=0.5)
        rows = _rows(pipe.dsn, pipe.schema)
        posts = _posts(pipe)
        agent = next(p for p in pipe.procs if p.name == "agent")
        coalesced = [r for r in agent.logs() if r.get("msg") == "wakes coalesced"]
    finally:
        pipe.stop_all()

    assert record["mentions_seconds"] <= 10  # type: ignore[operator]
    recorded = [r for r in rows if r[1] == "human" and r[4].get("mention")]
    assert [r[0] for r in recorded] == [h.message_id for h, _ in mentions]  # ten mentions, each recorded
    assert {r[2] for r in rows if r[2] is not None} == {1}  # one round
    assert len(posts) == 1  # one post
    answers = posts[0][2]["answers"]
    assert [a["message_id"] for a in answers] == [h.message_id for h, _ in mentions]  # each answered
    assert [a["user"] for a in answers] == [h.user for h, _ in mentions]
    assert coalesced and coalesced[-1]["wakes"] == 10
    record.update(rounds=1, posts=len(posts), wakes_in_round=coalesced[-1]["wakes"])


def _tool_called_r1(pipe: Pipeline) -> bool:
    return any(
        rec.get("msg") == "tool called" and ":1:tools:" in str(rec.get("message_id"))
        for p in pipe.procs
        if p.name == "agent"
        for rec in p.logs()
    )


def test_kill_9_mid_coalesced_round_then_restart_gives_the_same_one_post(pipeline: Pipeline) -> None:
    """The answered set comes from the rows, not the killed process's batch: the rerun posts once, the same."""
    pipe = pipeline
    group = f"agent-{pipe.schema}"
    mentions = [_mention(i) for i in range(1, 11)]
    try:
        _pipeline(pipe)
        _start(pipe, group, "1.5")  # slow: killable mid-round
        pipe.wait_ready(*pipe.procs, timeout=90)
        produce_seed(pipe.bootstrap, pipe.topics["events"], alert_events())
        producer = Producer({"bootstrap.servers": pipe.bootstrap, "enable.idempotence": True})
        for human, wake in mentions:
            producer.produce(pipe.topics["events"], key=human.key(), value=human.to_bytes())
            producer.produce(pipe.topics["wake"], key=wake.key(), value=wake.to_bytes())
        assert producer.flush(10) == 0
        wait_until(lambda: _tool_called_r1(pipe), 180, "the coalesced round's first tool call", every=0.2)
        pipe.procs[-1].kill9()
        assert not _posts(pipe), "the killed round must not be visible"
        _start(pipe, group, "0")
        wait_until(lambda: _posts(pipe), 240, "the rerun's post", every=0.5)
        wait_until(lambda: _committed_wakes(pipe, group) == 10, 60, "every wake done with", every=0.5)
        rows = _rows(pipe.dsn, pipe.schema)
        posts = _posts(pipe)
    finally:
        pipe.stop_all()

    assert {r[2] for r in rows if r[2] is not None} == {1}
    assert len(posts) == 1
    assert [a["message_id"] for a in posts[0][2]["answers"]] == [h.message_id for h, _ in mentions]
