"""The compactor worker as a real subprocess against the real broker (faust-streaming + aiokafka).

Each test uses its own topics (the `topic_names` fixture) and its own app id (consumer
group), runs `.venv/bin/incident-memory compactor ...`, produces with confluent-kafka
and reads the output topics back from the beginning.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from deploy.local.pipeline import Pipeline, Proc, free_port, wait_until
from deploy.local.testdata import loki, raw_tool_result, repetitive
from schemas.events import CompactedToolResult, DeadLetter, HumanMessage, ToolResult, parse_event
from schemas.topics import TopicSpec, ensure_topics
from services.runtime.kafka import producer_config

NOW = datetime(2026, 3, 14, 3, 20, tzinfo=UTC)
BUDGET_ENV = json.dumps(
    {"query_loki": 150}
)  # small, so `loki(30)` needs the selector and error floods exceed it
START_TIMEOUT = 60.0


@dataclass
class Worker:
    """One `incident-memory compactor` process (the pipeline harness's); its JSON logs and its metrics."""

    proc: Proc
    metrics_port: int
    app_id: str

    def logs(self) -> list[dict[str, Any]]:
        return self.proc.logs()

    def assignments(self) -> list[list[int]]:
        return [r["partitions"] for r in self.logs() if r.get("msg") == "partitions assigned"]

    def metric(self, name: str, **labels: str) -> float:
        return self.proc.metric(name, **labels)

    def stop(self) -> int | None:
        return self.proc.stop(30)


@dataclass
class Workers:
    pipe: Pipeline
    started: list[Worker] = field(default_factory=list)

    def start(
        self, app_id: str, *, selections: str, compacted: str | None = None, extra: tuple[str, ...] = ()
    ) -> Worker:
        port = free_port()
        proc = self.pipe.compactor(
            f"w{len(self.started)}", {"COMPACTOR_BUDGETS": BUDGET_ENV}, app_id=app_id, compacted=compacted,
            selections=selections, metrics_port=port, extra=extra,
        )  # fmt: skip
        worker = Worker(proc, port, app_id)
        self.started.append(worker)
        return worker


@pytest.fixture
def workers(kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path) -> Iterator[Workers]:
    pipe = Pipeline(kafka_bootstrap, "", f"sw_{uuid.uuid4().hex[:8]}", topic_names, tmp_path)
    yield Workers(pipe)
    pipe.stop_all(30)


@pytest.fixture
def extra_topics(kafka_bootstrap: str) -> Iterator[Callable[[str, int], str]]:
    """Create more per-test topics (a second output, a selections changelog); deleted afterwards."""
    made: list[str] = []

    def make(prefix: str, partitions: int) -> str:
        name = f"{prefix}.{uuid.uuid4().hex[:12]}"
        ensure_topics(kafka_bootstrap, (TopicSpec(name, partitions),))
        made.append(name)
        return name

    yield make
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.delete_topics(made, operation_timeout=10).values() if made else ():
        with contextlib.suppress(Exception):
            future.result(timeout=15)


def wait_for(condition: Callable[[], Any], timeout: float, what: str, worker: Worker | None = None) -> Any:
    return wait_until(condition, timeout, what, 0.2, watch=[worker.proc] if worker else [])


def _last_assignment(worker: Worker) -> list[int]:
    found = worker.assignments()
    return found[-1] if found else []


def wait_assigned(worker: Worker) -> list[int]:
    return wait_for(
        lambda: (a := worker.assignments()) and a[-1], START_TIMEOUT, "a partition assignment", worker
    )


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes


def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> list[Record]:
    """Produce (key, value) in order; returns where each landed."""
    producer = Producer(producer_config(bootstrap))  # ingest's config: idempotent, lz4-compressed
    landed: list[Record | None] = [None] * len(records)
    for i, (key, value) in enumerate(records):

        def report(err: Any, msg: Any, i: int = i, key: bytes = key, value: bytes = value) -> None:
            assert err is None, err
            landed[i] = Record(msg.partition(), msg.offset(), key, value)

        producer.produce(topic, key=key, value=value, on_delivery=report)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert all(r is not None for r in landed)
    return [r for r in landed if r is not None]


def _record(msg: Any) -> Record:
    return Record(int(msg.partition()), int(msg.offset()), msg.key(), bytes(msg.value() or b""))


def read_all(
    bootstrap: str, topic: str, expected: int, timeout: float = 120.0, sources: list[Record] | None = None
) -> list[Record]:
    """Every record of `topic` from the beginning, once `expected` have arrived (partition, offset order).

    With `sources` (the input records), a shortfall names the inputs whose message_id never came out.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        out: list[Record] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=0.5):
                assert msg.error() is None, msg.error()
                out.append(_record(msg))
        # a short grace read, so a test also sees records beyond `expected` (duplicates, strays)
        out += [_record(msg) for msg in consumer.consume(500, timeout=1.0)]
    finally:
        consumer.close()
    if len(out) < expected and sources is not None:
        seen = {parse_event(r.value).message_id for r in out}
        missing = [
            (r.partition, r.offset, parse_event(r.value).message_id)
            for r in sources
            if parse_event(r.value).message_id not in seen
        ]
        pytest.fail(
            f"{topic}: {len(out)} of {expected} records after {timeout}s; missing (partition, offset, message_id): {missing}"
        )
    assert len(out) >= expected, f"{topic}: {len(out)} of {expected} records after {timeout}s"
    return sorted(out, key=lambda r: (r.partition, r.offset))


def human(thread: str, i: int) -> HumanMessage:
    return HumanMessage(
        thread_ts=thread,
        message_id=f"{thread}:-:human:{i}",
        event_time=NOW,
        user="U1",
        ts=str(i),
        text=f"msg {i}",
    )


def tool(thread: str, i: int, raw: Any, name: str = "query_loki") -> ToolResult:
    return raw_tool_result(thread, i, raw, name, at=NOW, alert_context={"service": "checkout-api"})


def thread_ts(i: int) -> str:
    return f"17734584{i:02d}.000100"


# --- the mix: pass-through, compaction, order, dead letters ------------------------------


def test_mix_passthrough_compacted_in_order_and_bad_events_dead_lettered(
    kafka_bootstrap: str,
    topic_names: dict[str, str],
    workers: Workers,
    extra_topics: Callable[[str, int], str],
) -> None:
    bad = {
        b"{not json": "not JSON",
        json.dumps(
            {**human("x", 0).model_dump(mode="json"), "schema_version": 9}
        ).encode(): "unsupported schema_version",
        json.dumps({**human("x", 0).model_dump(mode="json"), "user": None}).encode(): "invalid event",
    }
    records: list[tuple[bytes, bytes]] = []
    expected_reasons: dict[bytes, str] = {}
    for t in range(6):
        ts = thread_ts(t)
        key = ts.encode()
        seq: list[bytes] = [
            human(ts, 1).to_bytes(),
            tool(ts, 0, repetitive(40 + t)).to_bytes(),
            tool(ts, 1, {"cpu": t, "note": "any json"}, name="describe_pod").to_bytes(),
        ]
        # bad ones in the middle of the thread: what comes after them must still flow
        bad_value, reason = list(bad.items())[t % len(bad)]
        seq.append(bad_value)
        expected_reasons[bad_value] = reason
        wrong = tool(ts, 2, {"data": {"resultType": "matrix", "result": []}}).to_bytes()
        flood = tool(ts, 3, loki(40, "error")).to_bytes()  # errors alone over the budget: still a digest
        seq += [wrong, flood]
        expected_reasons[wrong] = "raw format:"
        seq += [tool(ts, 4, loki(30)).to_bytes(), human(ts, 2).to_bytes()]
        records += [(key, v) for v in seq]
    # non-canonical bytes of a valid event: forwarded exactly as they arrived
    odd = json.dumps(human(thread_ts(0), 3).model_dump(mode="json"), indent=2).encode()
    records.append((thread_ts(0).encode(), odd))

    landed = produce(kafka_bootstrap, topic_names["events"], records)
    worker = workers.start(f"it-{uuid.uuid4().hex[:8]}", selections=extra_topics("sel", 8))
    assert wait_assigned(worker) == list(range(8))

    dead = [r for r in landed if r.value in expected_reasons]
    # what comes out: every valid event, and for a tool result that cannot be compacted a truthful error
    valid = [
        r for r in landed if r.value not in expected_reasons or expected_reasons[r.value] == "raw format:"
    ]
    out = read_all(kafka_bootstrap, topic_names["compacted"], len(valid))
    letters = read_all(kafka_bootstrap, topic_names["dlq"], len(dead))
    assert len(out) == len(valid) and len(letters) == len(dead)

    # same partition, same key, same order per partition
    for partition in range(8):
        inp = [r for r in valid if r.partition == partition]
        got = [r for r in out if r.partition == partition]
        assert [r.key for r in got] == [r.key for r in inp]
        assert [parse_event(r.value).message_id for r in got] == [
            parse_event(r.value).message_id for r in inp
        ]
        for src, dst in zip(inp, got, strict=True):
            event = parse_event(src.value)
            if isinstance(event, ToolResult):
                compacted = parse_event(dst.value)
                assert isinstance(compacted, CompactedToolResult)
                assert dst.value == compacted.to_bytes()  # canonical
                assert compacted.raw == event.raw and compacted.tool == event.tool
                assert 0 < compacted.tokens <= compacted.budget
                assert compacted.compact and compacted.raw_sha256 and compacted.compactor_version
                if src.value in expected_reasons:  # the agent is told, through the normal path
                    assert compacted.compact["error"].startswith("could not be compacted: raw format:")
                    assert compacted.compactor_version.startswith("error:")
            else:
                assert dst.value == src.value, "a non-tool event must pass through byte for byte"
    assert any(r.value == odd for r in out)
    selected = [e for r in out if isinstance(e := parse_event(r.value), CompactedToolResult) and e.selection]
    assert len(selected) == 6 and all(
        e.budget == 150 for e in selected
    )  # loki(30): loki(40, error) is all pinned

    by_position = {(r.partition, r.offset): r for r in dead}
    for record in letters:
        letter = DeadLetter.model_validate_json(record.value)
        src = by_position[(letter.partition, letter.offset)]  # type: ignore[index]
        assert letter.source_topic == topic_names["events"] and letter.stage == "compactor"
        assert letter.reason.startswith(expected_reasons[src.value]), letter.reason
        assert letter.payload.encode() == src.value and letter.key == src.key.decode()  # type: ignore[union-attr]
    assert worker.metric("compactor_dlq_total") == len(dead)
    assert worker.metric("compactor_budget_violations_total") == 0
    assert worker.metric("compactor_tool_results_total") == 6 * 4
    # Our per-record work is measured in the worker, as part of the whole worker's CPU: the share
    # an operator reads to tell a compaction cost from faust's.
    ours, whole = (
        worker.metric("compactor_process_cpu_seconds_total"),
        worker.metric("process_cpu_seconds_total"),
    )
    assert 0 < ours < whole, (ours, whole)
    logs = worker.logs()
    assert logs and all("thread_ts" in r and "message_id" in r for r in logs)
    assert any(r.get("msg") == "dead letter" and r["message_id"] for r in logs)
    assert worker.stop() == 0


# --- replay: byte-identical compacts, the selector not asked again -----------------------


def test_replay_reuses_recorded_selections_and_gives_identical_bytes(
    kafka_bootstrap: str,
    topic_names: dict[str, str],
    workers: Workers,
    extra_topics: Callable[[str, int], str],
) -> None:
    records = []
    for t in range(8):
        ts = thread_ts(t)
        records += [
            (ts.encode(), tool(ts, 0, loki(30 + t)).to_bytes()),
            (ts.encode(), human(ts, 1).to_bytes()),
        ]
    landed = produce(kafka_bootstrap, topic_names["events"], records)
    selections = extra_topics("sel", 8)

    first = workers.start(f"it-{uuid.uuid4().hex[:8]}", selections=selections)
    out1 = read_all(kafka_bootstrap, topic_names["compacted"], len(records), sources=landed)
    assert first.metric("compactor_selector_calls_total") == 8
    assert first.stop() == 0

    # the replay: a new consumer group from the beginning, into a new output topic
    replay_topic = extra_topics("replay", 8)
    second = workers.start(f"it-{uuid.uuid4().hex[:8]}", selections=selections, compacted=replay_topic)
    out2 = read_all(kafka_bootstrap, replay_topic, len(records), sources=landed)
    assert [(r.partition, r.key, r.value) for r in out2] == [(r.partition, r.key, r.value) for r in out1]
    assert second.metric("compactor_selector_calls_total") == 0, "a replay must not ask the selector again"
    assert second.metric("compactor_selections_reused_total") == 8
    compacts = [e for r in out2 if isinstance(e := parse_event(r.value), CompactedToolResult)]
    assert len(compacts) == 8 and all(
        e.selection and e.selection.model == "local-deterministic" for e in compacts
    )
    assert second.stop() == 0


# --- scaling: a second worker in the same group takes half the partitions -----------------


def test_second_worker_splits_the_partitions_and_output_is_complete(
    kafka_bootstrap: str,
    topic_names: dict[str, str],
    workers: Workers,
    extra_topics: Callable[[str, int], str],
) -> None:
    app_id = f"it-{uuid.uuid4().hex[:8]}"
    selections = extra_topics("sel", 8)

    def batch(start: int) -> list[tuple[bytes, bytes]]:
        out = []
        for t in range(24):
            ts = f"17734585{t:02d}.000100"
            out += [
                (ts.encode(), tool(ts, start, repetitive(20 + t)).to_bytes()),
                (ts.encode(), human(ts, start).to_bytes()),
            ]
        return out

    before = batch(0)
    produce(kafka_bootstrap, topic_names["events"], before)
    a = workers.start(app_id, selections=selections)
    assert wait_assigned(a) == list(range(8))
    read_all(kafka_bootstrap, topic_names["compacted"], len(before))

    b = workers.start(app_id, selections=selections)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})

    def split() -> dict[str, set[int]] | None:
        group = admin.describe_consumer_groups([app_id])[app_id].result(timeout=10)
        members = {
            m.client_id + m.member_id: {
                tp.partition for tp in m.assignment.topic_partitions if tp.topic == topic_names["events"]
            }
            for m in group.members
        }
        if len(members) == 2 and all(members.values()) and str(group.state).endswith("STABLE"):
            return members
        return None

    members = wait_for(split, START_TIMEOUT, "two members sharing the partitions", b)
    halves = list(members.values())
    assert halves[0].isdisjoint(halves[1]) and halves[0] | halves[1] == set(range(8))
    # The group is STABLE at the broker before each worker has logged its new assignment (worker a's
    # revocation can lag under load): wait until both have logged exactly the group's halves.
    wait_for(
        lambda: {frozenset(_last_assignment(w)) for w in (a, b)} == {frozenset(h) for h in halves},
        START_TIMEOUT,
        "both workers to log their half of the partitions",
        b,
    )

    after = batch(1)
    produce(kafka_bootstrap, topic_names["events"], after)
    out = read_all(kafka_bootstrap, topic_names["compacted"], len(before) + len(after))
    ids = {parse_event(r.value).message_id for r in out}
    assert ids == {parse_event(v).message_id for _, v in before + after}, "every event must come out"
    handled_a = a.metric("compactor_events_total")
    handled_b = b.metric("compactor_events_total")
    assert handled_b > 0, "the second worker must process its share"
    assert handled_a + handled_b >= len(before) + len(after)


# --- a tool result whose compacted event is larger than the broker's default record limit -------


def test_large_tool_result_is_compacted_or_dead_lettered_by_the_output_topics_limit(
    kafka_bootstrap: str,
    topic_names: dict[str, str],
    workers: Workers,
    extra_topics: Callable[[str, int], str],
) -> None:
    """A 2.4 MB Loki result reaches incident.events as an lz4 batch under 1 MiB. Its compacted event
    (raw + compact) fits the compacted topic's 8 MiB limit: it comes out whole. Written to a topic
    with the broker's default 1 MiB instead, it is dead-lettered with its size, the worker does not
    crash, and the event behind it on the same thread still comes out."""
    ts = thread_ts(90)
    big = tool(ts, 0, repetitive(40_000))
    after = human(ts, 1)
    assert len(big.to_bytes()) > 2 * 1024 * 1024
    producer = Producer(producer_config(kafka_bootstrap) | {"message.max.bytes": 16 * 1024 * 1024})
    for event in (big, after):
        producer.produce(topic_names["events"], key=ts.encode(), value=event.to_bytes())
    assert producer.flush(30) == 0

    small_out = extra_topics("compacted.small", 8)  # created with the broker's default limit
    roomy = workers.start(f"big-{uuid.uuid4().hex[:8]}", selections=extra_topics("sel", 8))
    tight = workers.start(
        f"tight-{uuid.uuid4().hex[:8]}", selections=extra_topics("sel", 8), compacted=small_out
    )

    whole = read_all(kafka_bootstrap, topic_names["compacted"], 2)
    compacted = parse_event(whole[0].value)
    assert isinstance(compacted, CompactedToolResult) and compacted.raw == big.raw
    assert len(whole[0].value) > 1024 * 1024 and whole[0].value == compacted.to_bytes()
    assert 0 < compacted.tokens <= compacted.budget
    assert whole[1].value == after.to_bytes()

    passed = read_all(kafka_bootstrap, small_out, 2)
    answer = parse_event(passed[0].value)  # the agent is told, without the raw (it stays on its topic)
    assert isinstance(answer, CompactedToolResult) and answer.message_id == big.message_id
    assert answer.compact["error"].startswith("could not be compacted: output too large")
    assert answer.raw == {
        "not_kept": f"the raw stays on {topic_names['events']} partition {passed[0].partition} offset 0"
    }
    assert passed[1].value == after.to_bytes(), "the event behind the oversized one must flow"
    letters = read_all(kafka_bootstrap, topic_names["dlq"], 1)
    assert len(letters) == 1, "only the worker with the 1 MiB output topic dead-letters it"
    letter = DeadLetter.model_validate_json(letters[0].value)
    assert letter.reason.startswith("output too large") and "max.message.bytes" in letter.reason
    assert letter.source_topic == topic_names["events"] and letter.payload_truncated
    assert letter.key == ts
    assert tight.metric("compactor_dlq_total") == 1 and roomy.metric("compactor_dlq_total") == 0
    assert tight.proc.alive() and roomy.proc.alive()
    assert tight.stop() == 0 and roomy.stop() == 0
