"""The Kafka-native way in: Alertmanager JSON on a user's topic -> the same events; bad ones -> DLQ."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Producer

from schemas.events import AlertReceived, DeadLetter, Wake

from .alerts_topic import new_user_topic, reading
from .helpers import alert_payload, dumps, group_notification, read_events, read_topic


@pytest.fixture
def user_topic(kafka_bootstrap: str) -> str:
    return new_user_topic(kafka_bootstrap)


def test_alerts_from_a_topic_become_events_and_bad_ones_dead_letters(
    kafka_bootstrap: str, topic_names: dict[str, str], user_topic: str
) -> None:
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(user_topic, key=b"a", value=dumps(alert_payload("firing", group_key="kafka-A")))
    producer.produce(user_topic, key=b"b", value=b"{not alertmanager json")
    producer.produce(
        user_topic, key=b"c", value=dumps({**alert_payload("firing", group_key="kafka-B"), "version": "2"})
    )
    producer.produce(user_topic, key=b"d", value=dumps(alert_payload("firing", group_key="kafka-C")))
    assert producer.flush(10) == 0

    with reading(kafka_bootstrap, topic_names, user_topic) as reader:
        events = read_events(kafka_bootstrap, topic_names["events"], 4)
        wakes = read_events(kafka_bootstrap, topic_names["wake"], 2)
        letters = [
            DeadLetter.model_validate_json(v) for _, v in read_topic(kafka_bootstrap, topic_names["dlq"], 2)
        ]
        committed = reader.committed(total=4)
    alerts = [e for e in events if isinstance(e, AlertReceived)]
    assert sorted(a.alert["groupKey"] for a in alerts) == ["kafka-A", "kafka-C"]
    assert {w.thread_ts for w in wakes if isinstance(w, Wake)} == {a.thread_ts for a in alerts}
    reasons = sorted(letter.reason.split(":")[0] for letter in letters)
    assert reasons == ["malformed_json", "unsupported_version"]
    assert {letter.source_topic for letter in letters} == {user_topic}
    assert all(letter.offset is not None and letter.stage == "ingest.alerts_topic" for letter in letters)
    assert json.loads(next(x.payload for x in letters if x.key == "c"))["version"] == "2"  # kept verbatim
    assert committed == 4  # every message's offset committed, after its events were acked


def test_a_groups_history_in_one_batch_keeps_one_thread_per_episode(
    kafka_bootstrap: str, topic_names: dict[str, str], user_topic: str
) -> None:
    """A replay of a user's alerts topic hands a group's whole history to one consumer in one batch,
    before any of it is projected. With no read model at all (no DSN), ingest's own memory of its
    decisions keeps the group on one thread until it resolves (issue 18): here the earliest alert
    resolves first, so a stateless mapping would open a second incident."""
    key = f"kafka-history-{uuid.uuid4().hex[:6]}"
    t0, t1, t2 = "2026-03-14T09:00:00Z", "2026-03-14T09:00:30Z", "2026-03-14T11:00:00Z"
    partial = group_notification("firing", key, t0, t1)
    partial["alerts"][0].update(status="resolved", endsAt="2026-03-14T09:10:00Z")
    history = [
        group_notification("firing", key, t0),
        group_notification("firing", key, t0, t1),
        partial,  # "some alerts resolved": p0 goes, p1 stays
        group_notification("firing", key, t1),  # the repeat: p0's startsAt is gone
        group_notification("resolved", key, t1, ends="2026-03-14T09:20:00Z"),
        group_notification("firing", key, t2),  # the next episode
    ]
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for payload in history:
        producer.produce(user_topic, key=key.encode(), value=dumps(payload))
    assert producer.flush(10) == 0

    with reading(kafka_bootstrap, topic_names, user_topic):
        events = read_events(kafka_bootstrap, topic_names["events"], 2 * len(history))
        wakes = read_events(kafka_bootstrap, topic_names["wake"], 5)
    alerts = [e for e in events if isinstance(e, AlertReceived)]
    assert len(alerts) == len(history)
    # read back across partitions: the new episode's thread may come first, so tell them by payload
    first = {a.thread_ts for a in alerts if all(x["startsAt"] != t2 for x in a.alert["alerts"])}
    second = {a.thread_ts for a in alerts if any(x["startsAt"] == t2 for x in a.alert["alerts"])}
    assert len(first) == 1 and len(second) == 1 and first != second, (first, second)
    threads = [first.pop(), second.pop()]
    assert threads[0].startswith("1773478800.") and threads[1].startswith("1773486000.")  # t0's and t2's
    assert {w.thread_ts for w in wakes} == set(threads)
