"""Reliability harness: the pipeline (deploy/local/pipeline.py) on per-test topics and schema, plus invariants.

Why: the fault tests must hurt real processes (kill -9, restarts) and then prove, from the
tables and topics alone, that nothing was lost, duplicated, half-shown or re-executed.
The processes are the pipeline harness's; what is here reads the tables and topics back.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from deploy.local import pipeline
from deploy.local.pipeline import Proc as Proc
from deploy.local.pipeline import cli
from deploy.local.pipeline import free_port as free_port
from deploy.local.pipeline import produce as produce
from deploy.local.pipeline import wait_until as wait_until
from deploy.local.testdata import raw_thread as raw_thread
from deploy.local.testdata import raw_threads as raw_threads
from schemas.events import EventBase, ToolResult, canonical_json, parse_event

CLI = cli()


class Pipeline(pipeline.Pipeline):
    """The pipeline harness's run, with the projection's reads the invariants need."""

    @property
    def names(self) -> pipeline.Names:
        """The run's names; the selections changelog is `sel-<schema>`, as the reliability tests name it."""
        names = super().names
        return replace(names, topics={"selections": f"sel-{self.schema}", **names.topics})

    def ids(self) -> list[str]:
        with self.connect() as conn:
            return [r[0] for r in conn.execute("SELECT id FROM agent_messages ORDER BY seq")]

    def wait_rows(self, expected: set[str], timeout: float) -> None:
        wait_until(lambda: expected <= set(self.ids()), timeout, f"{len(expected)} rows projected")


# ---- events ------------------------------------------------------------------------------------


def expected_ids(events: Sequence[EventBase]) -> set[str]:
    return {e.message_id for e in events if getattr(e, "type", "") != "round_committed"}


def produce_events(bootstrap: str, topic: str, events: Sequence[EventBase]) -> None:
    produce(bootstrap, topic, [(e.key(), e.to_bytes()) for e in events])


def read_all(bootstrap: str, topic: str, settle: float = 1.5) -> list[Any]:
    """Every record of `topic` from offset 0 up to the current high watermarks."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rel-read-{time.time_ns()}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})  # fmt: skip
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        highs = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        out: list[Any] = []
        seen: dict[int, int] = {p: -1 for p in parts}  # last offset read, per partition
        deadline = time.monotonic() + 60
        while any(seen[p] < h - 1 for p, h in highs.items() if h > 0) and time.monotonic() < deadline:
            for m in consumer.consume(1000, timeout=settle):
                if m.error() is None:
                    out.append(m)
                    seen[m.partition() or 0] = m.offset() or 0
        return out
    finally:
        consumer.close()


def dead_letters(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    return [json.loads(m.value()) for m in read_all(bootstrap, topic)]


# ---- consumer lag ---------------------------------------------------------------------------


class LagSampler(threading.Thread):
    """Samples every `every` seconds, per consumer group: high watermark minus committed offset, summed
    over the partitions of the group's topic (a group that committed nothing yet lags by everything).

    Reads what the groups committed to Kafka (faust commits the compactor's; the projector commits to
    Kafka after its Postgres transaction), through a metadata-only consumer that never joins a group.
    """

    def __init__(self, bootstrap: str, groups: dict[str, tuple[str, str]], every: float = 1.0) -> None:
        super().__init__(name="lag-sampler", daemon=True)
        self.bootstrap, self.groups, self.every = bootstrap, groups, every  # name -> (group id, topic)
        self.samples: list[dict[str, float]] = []  # {"t": seconds since start, <name>: lag, ...}
        self.errors = 0
        self._halt = threading.Event()

    def run(self) -> None:
        readers = {name: Consumer({"bootstrap.servers": self.bootstrap, "group.id": group,
                                   "enable.auto.commit": False}) for name, (group, _) in self.groups.items()}  # fmt: skip
        t0 = time.monotonic()
        try:
            while not self._halt.is_set():
                started = time.monotonic()
                sample: dict[str, float] = {"t": round(started - t0, 2)}
                try:
                    for name, (_group, topic) in self.groups.items():
                        sample[name] = self._lag(readers[name], topic)
                    self.samples.append(sample)
                except Exception:  # a slow broker answer costs one sample, not the soak
                    self.errors += 1
                self._halt.wait(max(0.0, self.every - (time.monotonic() - started)))
        finally:
            for reader in readers.values():
                reader.close()

    @staticmethod
    def _lag(reader: Consumer, topic: str) -> int:
        parts = [
            TopicPartition(topic, p) for p in reader.list_topics(topic, timeout=10).topics[topic].partitions
        ]
        committed = {tp.partition: tp.offset for tp in reader.committed(parts, timeout=10)}
        lag = 0
        for tp in parts:
            high = reader.get_watermark_offsets(tp, timeout=10)[1]
            lag += high - max(committed.get(tp.partition, 0), 0)
        return lag

    def stop(self) -> None:
        self._halt.set()
        self.join(30)

    def summary(self) -> dict[str, object]:
        out: dict[str, object] = {"lag_samples": len(self.samples), "lag_sample_errors": self.errors}
        for name in self.groups:
            values = [s[name] for s in self.samples if name in s]
            if values:
                out[f"{name}_lag_max"] = int(max(values))
                out[f"{name}_lag_mean"] = round(sum(values) / len(values))
        return out


# ---- invariants --------------------------------------------------------------------------------


def check_invariants(pipe: Pipeline, expected: set[str]) -> dict[str, int]:
    """no duplicate row, no missing row, no half round, no tool executed twice; returns counts."""
    with pipe.connect() as conn:
        rows = conn.execute(
            "SELECT id, role, content, tool_call_id FROM agent_messages ORDER BY seq"
        ).fetchall()
    ids = [r[0] for r in rows]
    dupes = [i for i, c in Counter(ids).items() if c > 1]
    assert not dupes, f"duplicate rows: {dupes[:5]}"
    missing, extra = expected - set(ids), set(ids) - expected
    assert not missing, f"{len(missing)} rows missing, e.g. {sorted(missing)[:5]}"
    assert not extra, f"{len(extra)} unexpected rows, e.g. {sorted(extra)[:5]}"
    tool_calls = {r[3] for r in rows if r[1] == "tool"}
    for _id, role, content, _ in rows:
        if role == "ai":
            for call in content.get("tool_calls") or []:
                assert call["id"] in tool_calls, f"half round visible: {_id} without tool row {call['id']}"
    calls: dict[tuple[str, str, str], set[str]] = {}
    for m in read_all(pipe.bootstrap, pipe.topics["events"]):
        try:
            e = parse_event(m.value())
        except Exception:
            continue
        if isinstance(e, ToolResult):
            calls.setdefault((e.thread_ts, e.tool, canonical_json(e.args)), set()).add(e.message_id)
    twice = [k for k, c in calls.items() if len(c) > 1]  # the same call re-run under a new id
    assert not twice, f"tools executed twice: {twice[:3]}"
    return {"rows": len(ids), "expected": len(expected)}


def clean_compacts(events: Sequence[EventBase]) -> dict[str, str]:
    """What a clean, fault-free compaction of the same raws gives (the same code, in process)."""
    from services.compactor.stream import Compacted, process

    out = {}
    for e in events:
        if isinstance(e, ToolResult):
            r = process(e.to_bytes(), key=e.key(), topic="t", partition=0, offset=0, recorded=lambda _k: None)
            assert isinstance(r, Compacted)
            out[e.message_id] = canonical_json(r.event.compact)
    return out


def assert_compacts_identical(pipe: Pipeline, events: Sequence[EventBase]) -> None:
    """Every projected compact equals, as canonical JSON, a clean compaction of its raw."""
    live = {k: canonical_json(json.loads(v)) for k, v in compacts(pipe).items()}
    assert live == clean_compacts(events)


def compacts(pipe: Pipeline) -> dict[str, Any]:
    with pipe.connect() as conn:
        return dict(
            conn.execute("SELECT id, compact::text FROM agent_messages WHERE role = 'tool'").fetchall()
        )
