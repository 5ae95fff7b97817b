"""A second worker joining a busy group loses nothing, and what it repeats is byte for byte the same.

faust 0.15.3 forgets a revoked partition's acked offsets before its revocation handler commits,
so everything the first worker processed since its last periodic commit (every 2.8 s) is
processed again by the partition's next owner: at-least-once, as documented in
services/compactor/README.md. The projector keeps one copy by id. This test pins both halves of
that contract with records produced at a steady rate before, during and after the rebalance:
no input is missing from the output, and every repeat is identical to its first copy.

It found a loss (about 1 run in 15 before the fix): a worker keeping a partition through the
rebalance skipped the records it had fetched but not processed, because the first fetch after
faust's seek to the committed offset could still come from the old position. Hole 3 of
`NoLossConsumer` (services/compactor/faust_patch.py) fixes it; tests/compactor/test_seek_guard.py
drives that guard deterministically.
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from benchmarks.bench_compactor_stream import PARTITIONS, settled_split
from deploy.local.pipeline import Pipeline, delete_topics
from schemas.events import parse_event
from schemas.topics import TopicSpec, ensure_topics
from services.runtime.kafka import producer_config

from .test_stream_worker import human

pytestmark = pytest.mark.slow  # two faust workers through a rebalance


@pytest.fixture
def selections(kafka_bootstrap: str) -> Iterator[str]:
    name = f"sel.{uuid.uuid4().hex[:12]}"
    ensure_topics(kafka_bootstrap, (TopicSpec(name, PARTITIONS),))
    yield name
    delete_topics(kafka_bootstrap, [name])


def event(i: int) -> tuple[bytes, bytes]:
    thread = f"17734586{i % 32:02d}.000100"
    return thread.encode(), human(thread, i).to_bytes()


def row(msg: Any) -> tuple[int, int, str, bytes]:
    assert msg.error() is None, msg.error()
    value = bytes(msg.value() or b"")
    return int(msg.partition()), int(msg.offset()), parse_event(value).message_id, value


def test_a_rebalance_in_a_busy_group_loses_nothing_and_repeats_only_identical_copies(
    kafka_bootstrap: str, topic_names: dict[str, str], selections: str, tmp_path: Path
) -> None:
    app_id = f"dup-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    pipe = Pipeline(kafka_bootstrap, "", f"dup_{uuid.uuid4().hex[:8]}", topic_names, tmp_path)
    level = os.environ.get("DUP_TEST_LOG_LEVEL", "WARNING")

    def start(name: str) -> None:
        pipe.compactor(name, app_id=app_id, selections=selections, extra=["--log-level", level])

    def split(k: int) -> bool:
        with contextlib.suppress(Exception):  # the group is not described yet: not split yet
            group = admin.describe_consumer_groups([app_id])[app_id].result(timeout=10)
            return bool(settled_split(group, topic_names["events"], k))
        return False

    produced = 0
    stop = threading.Event()

    where: dict[str, tuple[int, int]] = {}  # message_id -> (partition, offset) on the input topic

    def landed(err: Any, msg: Any) -> None:
        assert err is None, err
        where[parse_event(msg.value()).message_id] = (msg.partition(), msg.offset())

    def produce_steadily() -> None:  # ~250 records/s until stopped
        nonlocal produced
        producer = Producer(producer_config(kafka_bootstrap))
        while not stop.is_set():
            key, value = event(produced)
            producer.produce(topic_names["events"], key=key, value=value, on_delivery=landed)
            producer.poll(0)
            produced += 1
            time.sleep(0.004)
        assert producer.flush(30) == 0

    try:
        start("a")
        pipe.wait_until(lambda: split(1), 60, "worker a to hold every partition", every=0.2)
        producing = threading.Thread(target=produce_steadily)
        producing.start()
        try:
            time.sleep(1.5)
            start("b")
            pipe.wait_until(lambda: split(2), 60, "workers a and b to share the partitions", every=0.2)
            time.sleep(1.5)
        finally:
            stop.set()
            producing.join(60)

        consumer = Consumer(
            {
                "bootstrap.servers": kafka_bootstrap,
                "group.id": f"r-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
            }
        )
        try:
            consumer.assign([TopicPartition(topic_names["compacted"], p, 0) for p in range(PARTITIONS)])
            out: list[tuple[int, int, str, bytes]] = []
            deadline = time.monotonic() + float(os.environ.get("DUP_TEST_WAIT", "30"))
            while len({m for _p, _o, m, _v in out}) < produced and time.monotonic() < deadline:
                out += [row(msg) for msg in consumer.consume(500, timeout=0.5)]
            out += [row(msg) for msg in consumer.consume(500, timeout=2.0)]  # repeats behind the last new one
        finally:
            consumer.close()
    finally:
        pipe.stop_all(30)

    assert produced > 500
    ids = collections.Counter(m for _p, _o, m, _v in out)
    missing = sorted(position for m, position in where.items() if m not in ids)
    last = {p: max(o for q, o in where.values() if q == p) for p, _ in where.values()}
    assert not missing, (
        f"{len(missing)} of {produced} inputs never came out, (partition, offset): {missing}; last offsets {last}"
    )
    copies: dict[str, set[bytes]] = collections.defaultdict(set)
    for _p, _o, m, value in out:
        copies[m].add(value)
    assert all(len(v) == 1 for v in copies.values()), "a repeat differs from its first copy"
    repeated = collections.Counter(p for p, _o, m, _v in out if ids[m] > 1)
    print(
        f"{produced} inputs, {len(out)} outputs, {len(out) - len(ids)} repeats; per partition {dict(repeated)}"
    )
