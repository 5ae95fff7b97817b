"""Restart the Kafka broker under a running pipeline: nothing lost, nothing doubled, compacts identical.

The broker hurt here is a DEDICATED one (its own state dir under tmp_path, its own ports), started
with deploy/local's own `kafka_node.start_isolated`, so the shared broker at 127.0.0.1:29092 that
other test runs use is never touched. Its jars are the local stack's; it starts in seconds.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from deploy.local import kafka_node, procs
from deploy.local.stack import kafka_jars
from schemas.topics import COMPACTED, DLQ, EVENTS, TOPICS, WAKE, TopicSpec, ensure_topics
from services.runtime.settings import Settings

from .harness import (
    Pipeline,
    assert_compacts_identical,
    check_invariants,
    expected_ids,
    produce_events,
    raw_threads,
    wait_until,
)

pytestmark = pytest.mark.reliability


@dataclass
class Broker:
    root: Path
    port: int
    controller_port: int
    pid: int = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def paths(self) -> kafka_node.KafkaPaths:
        return kafka_node.KafkaPaths(self.root)

    def start(self) -> float:
        t0 = time.monotonic()
        # A killed JVM's leader thread turns zombie before its other threads have closed the listeners.
        wait_until(
            lambda: not any(_accepts(p) for p in (self.port, self.controller_port)), 60, "ports released"
        )
        self.pid = kafka_node.start_isolated(self.root, self.port, self.controller_port)
        return time.monotonic() - t0

    def kill9(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        wait_until(lambda: not procs.is_running(self.pid, str(self.paths.config)), 30, "the broker to die")

    def stop(self) -> None:
        assert kafka_node.stop(self.paths), "the dedicated broker was not running"


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def listener_port() -> int:
    """A free port BELOW the ephemeral range: a client reconnecting to a dead listener on an ephemeral
    port can connect to itself (TCP simultaneous open) and so hold the port the broker restarts on."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(200):
        port = random.randrange(max(1024, low - 12000), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port below the ephemeral range")


@pytest.fixture
def broker(stack: Settings, tmp_path: Path) -> Iterator[Broker]:
    """A broker of this test's own, on the local stack's jars (resolved here too under the external-stack mode)."""
    kafka_jars()
    b = Broker(tmp_path / "kafka", listener_port(), listener_port())
    b.start()
    try:
        yield b
    finally:
        kafka_node.stop(b.paths)


@pytest.fixture
def own_pipeline(broker: Broker, stack: Settings, pg_schema: str, tmp_path: Path) -> Iterator[Pipeline]:
    suffix = uuid.uuid4().hex[:12]
    specs = tuple(replace(spec, name=f"{spec.name}.{suffix}") for spec in TOPICS)
    ensure_topics(broker.bootstrap, specs)
    keys = {EVENTS: "events", COMPACTED: "compacted", WAKE: "wake", DLQ: "dlq"}
    topics = {keys[spec.name]: f"{spec.name}.{suffix}" for spec in TOPICS}
    pipe = Pipeline(broker.bootstrap, stack.database_url, pg_schema, topics, tmp_path)
    # The compactor creates its selections changelog itself and exits if the metadata it reads right
    # after shows 0 partitions, which a fresh broker under load does answer: create it here (as
    # `migrate` would) and wait until the broker reports every partition of every topic.
    events_spec = next(spec for spec in specs if spec.name == topics["events"])
    selections = TopicSpec(pipe.names.selections, events_spec.partitions, {"cleanup.policy": "compact"})
    ensure_topics(broker.bootstrap, (selections,))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def complete(spec: TopicSpec) -> bool:
        return len(admin.list_topics(spec.name, timeout=10).topics[spec.name].partitions) == spec.partitions

    for spec in (*specs, selections):
        wait_until(partial(complete, spec), 60, f"{spec.name}'s partitions", 0.5)
    try:
        yield pipe
    finally:
        pipe.stop_all()


def _outage(broker: Broker, how: str) -> float:
    """Take the broker down (kill -9 or a graceful stop) and bring it back; returns seconds it was down."""
    t0 = time.monotonic()
    if how == "kill9":
        broker.kill9()
    else:
        broker.stop()
    broker.start()
    return time.monotonic() - t0


def _run(pipe: Pipeline, broker: Broker, how: str, record: dict[str, object]) -> None:
    events = raw_threads(150, prefix="1716")  # 3,300 events
    comp, proj = pipe.compactor(), pipe.projector(batch_size=100)
    half = len(events) // 2
    produce_events(pipe.bootstrap, pipe.topics["events"], events[:half])

    def first_rows() -> bool:
        for proc in (comp, proj):
            assert proc.alive(), f"{proc.name} exited before the outage\n{proc.tail()}"
        return len(pipe.ids()) > 50

    wait_until(first_rows, 120, "the first rows")
    errors: list[BaseException] = []

    def second_half() -> None:  # one idempotent producer that keeps producing through the outage
        try:
            produce_events(pipe.bootstrap, pipe.topics["events"], events[half:])
        except BaseException as exc:
            errors.append(exc)

    producing = threading.Thread(target=second_half)
    producing.start()
    at_outage = len(pipe.ids())
    down_s = _outage(broker, how)
    producing.join(120)
    assert not producing.is_alive() and not errors, f"the producer did not deliver: {errors}"
    expected = expected_ids(events)
    assert at_outage < len(expected), "the outage must land mid-stream"
    t0 = time.monotonic()
    pipe.wait_rows(expected, 240)
    caught_up_s = time.monotonic() - t0
    counts = check_invariants(pipe, expected)
    assert_compacts_identical(pipe, events)
    for proc in (comp, proj):
        assert proc.alive(), f"{proc.name} must survive the broker restart\n{proc.tail()}"
    record.update(counts, how=how, rows_at_outage=at_outage, events=len(events),
                  broker_down_s=round(down_s, 1), caught_up_after_restart_s=round(caught_up_s, 1),
                  restarts=comp.starts + proj.starts - 2)  # fmt: skip


@pytest.mark.fast
def test_kill_9_the_broker_mid_stream_then_start_it(
    own_pipeline: Pipeline, broker: Broker, record: dict[str, object]
) -> None:
    _run(own_pipeline, broker, "kill9", record)


def test_graceful_broker_restart_mid_stream(
    own_pipeline: Pipeline, broker: Broker, record: dict[str, object]
) -> None:
    _run(own_pipeline, broker, "stop", record)
