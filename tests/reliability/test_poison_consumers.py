"""Poison on the two topics the other consumers read: ingest's alerts topic and the agent's wake topic.

Each poison (truncated JSON, a wrong schema version, a payload over 1 MiB) must land in the DLQ with
its reason while the consumer keeps running and the valid record right behind it, on the same
partition, still goes through. The >1 MiB record is real: a producer with a larger
`message.max.bytes` and lz4 compression gets it past the broker's 1 MiB batch limit, so it does
reach the consumer, decompressed.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from agent.seedplay import alert_events, alert_wake, human_events
from agent.seedplay import produce as produce_seed
from agent.test_seed_thread import SEED_SHAPE, _pipeline, _rows, _start
from ingest.helpers import BOT, SECRET, TOKEN, alert_payload

from deploy.local.pipeline import delete_topics
from schemas.events import AlertReceived, Wake, parse_event
from schemas.topics import TopicSpec, ensure_topics

from .harness import Pipeline, dead_letters, free_port, produce, read_all, wait_until

pytestmark = pytest.mark.reliability
BIG = {"message.max.bytes": 8 * 1024 * 1024}  # the poisoning producer's own limit, not the broker's
OVER_1_MIB = 2 * 1024 * 1024


def _letters(pipe: Pipeline, n: int, stage: str) -> list[dict[str, Any]]:
    return wait_until(
        lambda: (
            (d := [x for x in dead_letters(pipe.bootstrap, pipe.topics["dlq"]) if x["stage"] == stage])
            and len(d) >= n
            and d
        ),
        90,
        f"{n} dead letters from {stage}",
        every=1.0,
    )


def _alerts(pipe: Pipeline) -> set[str]:
    """groupKeys of the AlertReceived events ingest produced."""
    out = set()
    for m in read_all(pipe.bootstrap, pipe.topics["events"]):
        with contextlib.suppress(ValueError):
            e = parse_event(m.value())
            if isinstance(e, AlertReceived):
                out.add(str(e.alert.get("groupKey")))
    return out


@pytest.fixture
def alerts_topic(pipeline: Pipeline) -> Any:
    name = f"user.alerts.{uuid.uuid4().hex[:12]}"
    ensure_topics(pipeline.bootstrap, (TopicSpec(name, 1),))  # one partition: poison and valid in order
    yield name
    delete_topics(pipeline.bootstrap, [name])


@pytest.mark.fast
def test_poison_on_the_alerts_topic_goes_to_the_dlq_and_ingest_keeps_consuming(
    pipeline: Pipeline, alerts_topic: str, record: dict[str, object]
) -> None:
    key = b"alertmanager"
    run = uuid.uuid4().hex[:8]
    good = [json.dumps(alert_payload("firing", group_key=f"rel-{run}-{i}")).encode() for i in range(2)]
    valid = json.loads(good[0])
    huge = {**valid, "commonAnnotations": {"description": "x" * OVER_1_MIB}}  # valid JSON, well-formed, huge
    # Under the body limit (schemas.topics.MAX_EVENT_BYTES), but its AlertReceived is over it: the alertname
    # label is copied into the event beside the payload that carries it.
    near = {**valid, "commonLabels": {**valid["commonLabels"], "alertname": "x" * 600_000}}
    ingest = pipeline.ingest(
        free_port(), SECRET, TOKEN, BOT, team="T123ABC456", app="A123ABC456", alerts_topic=alerts_topic
    )
    # First batch: poison then a valid group, consumed from the start.
    produce(pipeline.bootstrap, alerts_topic, [(key, good[0][: len(good[0]) // 2]), (key, good[0])])
    wait_until(
        lambda: f"rel-{run}-0" in _alerts(pipeline), 90, "the first valid alert behind the poison", 1.0
    )
    # Second batch, into a running consumer: a wrong version, two oversized payloads, then a valid group.
    wrong_version = json.dumps({**valid, "version": "3"}).encode()
    produce(pipeline.bootstrap, alerts_topic, [(key, wrong_version), (key, json.dumps(huge).encode()),
                                               (key, json.dumps(near).encode()), (key, good[1])], config=BIG)  # fmt: skip
    wait_until(
        lambda: f"rel-{run}-1" in _alerts(pipeline), 90, "the second valid alert behind the poison", 1.0
    )
    letters = _letters(pipeline, 4, "ingest.alerts_topic")
    reasons = [d["reason"] for d in letters]
    assert len(letters) == 4, reasons
    assert any(r.startswith("malformed_json") for r in reasons), reasons
    assert any(r.startswith("unsupported_version") for r in reasons), reasons
    oversized = [d for d in letters if d["reason"].startswith("body_too_large")]
    assert oversized and oversized[0]["payload_truncated"] is True, reasons
    assert any(r.startswith("event_too_large") for r in reasons), reasons
    assert {d["source_topic"] for d in letters} == {alerts_topic}
    assert ingest.alive(), "ingest must not crash on poison\n" + ingest.tail()
    wakes = [parse_event(m.value()) for m in read_all(pipeline.bootstrap, pipeline.topics["wake"])]
    assert len({w.thread_ts for w in wakes if isinstance(w, Wake)}) == 2  # one wake per valid group
    record.update(dead_letters=len(letters), reasons=[r.split(":")[0] for r in reasons])


@pytest.mark.fast
def test_poison_on_the_wake_topic_goes_to_the_dlq_and_the_agent_keeps_going(
    pipeline: Pipeline, tmp_path: Path, record: dict[str, object]
) -> None:
    wake = alert_wake()
    valid = wake.to_bytes()
    key = wake.key()
    oversized = wake.model_copy(update={"user": "x" * OVER_1_MIB}).to_bytes()  # a valid Wake, over 1 MiB
    poison = [
        (key, valid[: len(valid) // 2]),
        (key, json.dumps({**json.loads(valid), "schema_version": 2}).encode()),
        (key, oversized),
        (key, human_events(mention=False)[0].to_bytes()),  # a valid event, but not a wake
    ]
    try:
        _pipeline(pipeline)
        agent = _start(pipeline, f"agent-{pipeline.schema}", "0")
        produce_seed(pipeline.bootstrap, pipeline.topics["events"], alert_events())
        produce(pipeline.bootstrap, pipeline.topics["wake"], [*poison, (key, valid)], config=BIG)
        rows = wait_until(
            lambda: len(r := _rows(pipeline.dsn, pipeline.schema)) >= 9 and r,
            240,
            "round 1 behind the poison",
            1.0,
        )
        letters = _letters(pipeline, len(poison), "agent")
        assert agent.alive(), "the agent must not crash on poison\n" + agent.tail()
    finally:
        pipeline.stop_all()
    assert [(r[1], r[2]) for r in rows] == SEED_SHAPE[:9]  # the valid wake's whole round, once
    reasons = [d["reason"] for d in letters]
    assert len(letters) == len(poison), reasons
    for needle in ("not JSON", "schema_version", "oversized", "expected a wake"):
        assert any(needle in r for r in reasons), (needle, reasons)
    assert {d["source_topic"] for d in letters} == {pipeline.topics["wake"]}
    assert all(d["offset"] is not None for d in letters)
    record.update(dead_letters=len(letters), rows=len(rows))
