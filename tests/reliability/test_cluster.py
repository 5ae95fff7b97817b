"""A three-broker cluster under a running pipeline: kill -9 a partition's leader, then a rolling restart.

One cluster of this module's own (deploy/local/kafka_cluster.isolated: three KRaft nodes, each broker
and controller, on their own ports and directory, the local stack's jars) is started once for the
module; the shared broker is never touched. Each test gets its own topics (replication 3,
min.insync.replicas 2), Postgres schema and services (ingest, compactor, projector: real
subprocesses), and two steady streams that keep flowing through the fault:

- Slack messages posted one after another to ingest's HTTP endpoint, re-posted on any non-200 the
  way Slack re-delivers (ingest answers 503 when the broker does not ack within 2.5 s);
- raw agent threads (tool results, rounds) produced straight onto the events topic by one
  idempotent producer, in chunks of whole threads, so the compactor compacts under the fault.

A poller notes when each row first becomes visible in Postgres. The recovery figure is measured
where things happen: from the moment of the fault (just before the SIGKILL / SIGTERM) to the first
event *sent after it* being visible in Postgres. Then the harness's invariants: every row there
once (no loss, no duplicate, no half round, no tool executed twice), compacts identical to a clean
compaction, and no service process restarted or exited.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient

from deploy.local import kafka_cluster
from deploy.local.stack import kafka_jars
from schemas.events import EventBase
from schemas.ids import thread_key
from schemas.topics import COMPACTED, DLQ, EVENTS, TOPICS, WAKE, ensure_topics
from services.runtime.kafka import producer_config
from services.runtime.settings import Settings

from .harness import (
    Pipeline,
    Proc,
    assert_compacts_identical,
    check_invariants,
    expected_ids,
    free_port,
    raw_threads,
    read_all,
    wait_until,
)
from .test_broker_restart import listener_port
from .test_ingest_kill import BOT, CHANNEL, SECRET, TOKEN, signed_headers, slack_message

pytestmark = pytest.mark.reliability

RAW_RATE = 40.0  # raw events/s (tool results, rounds) produced onto the events topic
SLACK_RATE = 10.0  # Slack messages/s posted to ingest (one at a time, so fewer while ingest answers 503)
THREADS_PER_CHUNK = 3  # the raw stream stops only between chunks of whole threads (66 events)


# ---- the cluster, once for the module ----------------------------------------------------------

STARTUP: dict[str, float] = {}  # the cluster's start, recorded with each test's figures


@pytest.fixture(scope="module")
def cluster(stack: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[kafka_cluster.Cluster]:
    """Three nodes of this module's own, on the local stack's jars (resolved here too under the
    external-stack mode)."""
    kafka_jars()
    free: list[int] = []
    while len(free) < 2 * kafka_cluster.REPLICATION:  # six distinct ports, below the ephemeral range
        if (port := listener_port()) not in free:
            free.append(port)
    ports = tuple(zip(free[::2], free[1::2], strict=True))
    t0 = time.monotonic()
    c = kafka_cluster.isolated(tmp_path_factory.mktemp("cluster"), ports)
    STARTUP["cluster_start_s"] = round(time.monotonic() - t0, 1)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def healthy(cluster: kafka_cluster.Cluster) -> kafka_cluster.Cluster:
    """The cluster with every node running and no partition under-replicated (a failed test may
    have left a node down)."""
    for node in cluster.nodes:
        if node.pid() is None:
            cluster.start_node(node.node_id)
    cluster.wait_brokers(60)
    cluster.wait_fully_replicated(120)
    return cluster


@pytest.fixture
def pipe(
    healthy: kafka_cluster.Cluster, stack: Settings, pg_schema: str, tmp_path: Path
) -> Iterator[Pipeline]:
    suffix = uuid.uuid4().hex[:12]
    specs = tuple(replace(spec, name=f"{spec.name}.{suffix}") for spec in TOPICS)
    ensure_topics(
        healthy.bootstrap,
        specs,
        replication_factor=kafka_cluster.REPLICATION,
        min_insync_replicas=kafka_cluster.MIN_INSYNC_REPLICAS,
    )
    keys = {EVENTS: "events", COMPACTED: "compacted", WAKE: "wake", DLQ: "dlq"}
    topics = {keys[spec.name]: f"{spec.name}.{suffix}" for spec in TOPICS}
    pipeline = Pipeline(healthy.bootstrap, stack.database_url, pg_schema, topics, tmp_path)
    try:
        yield pipeline
    finally:
        pipeline.stop_all()


# ---- the streams and the watchers --------------------------------------------------------------


class Visibility(threading.Thread):
    """Polls the test's agent_messages; notes when each row was first seen (time.monotonic()).

    Rows come in seq order: one projector, one transaction at a time, so `seq > last` sees them all."""

    def __init__(self, pipe: Pipeline, every: float = 0.1) -> None:
        super().__init__(name="visibility", daemon=True)
        self.pipe, self.every = pipe, every
        self.seen: dict[str, float] = {}
        self.errors = 0
        self._halt = threading.Event()

    def run(self) -> None:
        last = 0
        while not self._halt.is_set():
            try:
                with self.pipe.connect() as conn:
                    while not self._halt.is_set():
                        rows = conn.execute(
                            "SELECT id, seq FROM agent_messages WHERE seq > %s ORDER BY seq", (last,)
                        ).fetchall()
                        now = time.monotonic()
                        for row_id, seq in rows:
                            self.seen.setdefault(row_id, now)
                            last = max(last, seq)
                        self._halt.wait(self.every)
            except Exception:  # the shared Postgres hiccuped: reconnect, the seq cursor is kept
                self.errors += 1
                self._halt.wait(0.5)

    def stop(self) -> None:
        self._halt.set()
        self.join(10)


@dataclass
class Sent:
    """When each event of a stream was first handed over, and when it was acknowledged."""

    first: dict[str, float] = field(default_factory=dict)  # message id -> first send attempt
    acked: dict[str, float] = field(default_factory=dict)  # message id -> ack (HTTP 200 / delivery)
    attempts: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def after(self, t: float) -> list[str]:
        """The ids first sent after `t`, in the order they were sent."""
        return [i for i, at in sorted(self.first.items(), key=lambda kv: kv[1]) if at > t]


class SlackStream(threading.Thread):
    """Slack messages in one thread, posted one at a time at `rate`/s; each is posted again until
    ingest answers 200 (Slack re-delivers what was not acked), for at most `give_up` seconds."""

    def __init__(self, url: str, rate: float = SLACK_RATE, give_up: float = 120.0) -> None:
        super().__init__(name="slack-stream", daemon=True)
        self.url, self.rate, self.give_up = url, rate, give_up
        self.thread = f"{int(time.time()) - 3600}.{uuid.uuid4().int % 1_000_000:06d}"
        self.key = thread_key(CHANNEL, self.thread)
        self.sent = Sent()
        self.non_200 = 0
        self._halt = threading.Event()

    def message_id(self, ts: str) -> str:
        return f"{self.key}:-:human:{ts}"

    def run(self) -> None:
        base_s, base_us = self.thread.split(".")
        t0 = time.monotonic()
        with httpx.Client(timeout=5) as client:
            for i in itertools.count(1):
                if self._halt.is_set():
                    return
                ts = f"{base_s}.{(int(base_us) + i) % 1_000_000:06d}"
                body, mid = slack_message(self.thread, ts, f"checkout 502s, note {i}"), self.message_id(ts)
                self.sent.first[mid] = time.monotonic()
                while True:
                    self.sent.attempts[mid] = self.sent.attempts.get(mid, 0) + 1
                    with contextlib.suppress(httpx.HTTPError):
                        if (
                            client.post(self.url, content=body, headers=signed_headers(body)).status_code
                            == 200
                        ):
                            self.sent.acked[mid] = time.monotonic()
                            break
                    self.non_200 += 1
                    if time.monotonic() - self.sent.first[mid] > self.give_up:
                        self.sent.errors.append(f"{mid} not acked after {self.give_up:g}s")
                        return
                    time.sleep(0.2)
                self._halt.wait(max(0.0, t0 + i / self.rate - time.monotonic()))

    def stop(self) -> None:
        self._halt.set()
        self.join(self.give_up + 10)


class RawStream(threading.Thread):
    """Agent threads (raw tool results, rounds) produced at `rate`/s by one idempotent producer, in
    chunks of whole threads; stops between chunks, so every round it began is whole."""

    def __init__(self, bootstrap: str, topic: str, rate: float = RAW_RATE) -> None:
        super().__init__(name="raw-stream", daemon=True)
        self.bootstrap, self.topic, self.rate = bootstrap, topic, rate
        self.events: list[EventBase] = []
        self.sent = Sent()
        self._halt = threading.Event()

    def run(self) -> None:
        producer = Producer(producer_config(self.bootstrap, **{"linger.ms": 5}))
        t0, n = time.monotonic(), 0
        for chunk in itertools.count():
            if self._halt.is_set():
                break
            for event in raw_threads(THREADS_PER_CHUNK, prefix=str(1700 + chunk)):
                mid = event.message_id
                self.sent.first[mid] = time.monotonic()
                producer.produce(
                    self.topic, key=event.key(), value=event.to_bytes(), on_delivery=self._ack(mid)
                )
                self.events.append(event)
                n += 1
                producer.poll(max(0.0, t0 + n / self.rate - time.monotonic()))
        left = producer.flush(120)
        if left:
            self.sent.errors.append(f"{left} raw events not delivered within 120 s")

    def _ack(self, mid: str) -> Any:
        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            if err is None:
                self.sent.acked[mid] = time.monotonic()
            else:
                self.sent.errors.append(f"{mid}: {err}")

        return on_delivery

    def stop(self) -> None:
        self._halt.set()
        self.join(180)


class LeaderWatch(threading.Thread):
    """After a node is killed: when the metadata first shows `topic`'s partition led by another node,
    and when the killed node first drops out of the broker list (fenced by the controllers)."""

    def __init__(self, cluster: kafka_cluster.Cluster, topic: str, partition: int, killed: int) -> None:
        super().__init__(name="leader-watch", daemon=True)
        self.admin = cluster.admin()
        self.topic, self.partition, self.killed = topic, partition, killed
        self.moved_at: float | None = None
        self.new_leader: int | None = None
        self.fenced_at: float | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set() and (self.moved_at is None or self.fenced_at is None):
            with contextlib.suppress(Exception):
                meta = self.admin.list_topics(timeout=2)
                now = time.monotonic()
                leader = meta.topics[self.topic].partitions[self.partition].leader
                if self.moved_at is None and leader not in (-1, self.killed):
                    self.moved_at, self.new_leader = now, leader
                if self.fenced_at is None and self.killed not in meta.brokers:
                    self.fenced_at = now
            self._halt.wait(0.1)

    def stop(self) -> None:
        self._halt.set()
        self.join(10)


@dataclass
class Run:
    """A pipeline with its services, its streams and its visibility poller, all running."""

    pipe: Pipeline
    cluster: kafka_cluster.Cluster
    services: list[Proc]
    slack: SlackStream
    raw: RawStream
    seen: Visibility

    def services_alive(self) -> None:
        for proc in self.services:
            assert proc.alive() and proc.starts == 1, f"{proc.name} restarted or exited\n{proc.tail()}"

    def recovery(self, t_fault: float) -> dict[str, float]:
        """Seconds from the fault to the first event sent after it being visible in Postgres, per stream."""
        out: dict[str, float] = {}
        for name, sent in (("slack_via_ingest", self.slack.sent), ("raw_produced", self.raw.sent)):
            times = [self.seen.seen[i] for i in sent.after(t_fault) if i in self.seen.seen]
            if times:
                out[f"recovery_{name}_s"] = round(min(times) - t_fault, 2)
        return out

    def wait_recovered(self, t_fault: float, timeout: float = 120.0) -> dict[str, float]:
        """Both streams have an event sent after the fault visible; the services still run."""

        def recovered() -> bool:
            self.services_alive()
            return len(self.recovery(t_fault)) == 2

        wait_until(recovered, timeout, "an event sent after the fault to be visible in Postgres", every=0.1)
        return self.recovery(t_fault)

    def longest_stall(self, since: float) -> float:
        """The longest time with no new row visible, from `since` to the last row seen."""
        times = sorted({t for t in self.seen.seen.values() if t >= since})
        return round(max((b - a for a, b in itertools.pairwise([since, *times])), default=0.0), 2)

    def finish(self) -> dict[str, object]:
        """Stop the streams, wait for every acked event in Postgres, check the invariants."""
        self.slack.stop()
        self.raw.stop()
        assert not self.slack.sent.errors and not self.raw.sent.errors, (
            self.slack.sent.errors,
            self.raw.sent.errors,
        )
        assert set(self.raw.sent.acked) == set(self.raw.sent.first), "a raw event was never acked"
        slack_ids = set(self.slack.sent.acked)
        expected = expected_ids(self.raw.events) | slack_ids
        t0 = time.monotonic()
        self.pipe.wait_rows(expected, 240)
        drained_s = time.monotonic() - t0
        self.seen.stop()
        self.services_alive()
        counts = check_invariants(self.pipe, expected)
        assert_compacts_identical(self.pipe, self.raw.events)
        self.services_alive()
        latency = [self.slack.sent.acked[i] - self.slack.sent.first[i] for i in slack_ids]
        return {
            **counts,
            "slack_messages": len(slack_ids),
            "raw_events": len(self.raw.events),
            "slack_non_200_answers": self.slack.non_200,
            "slack_longest_ack_s": round(max(latency), 2),
            "drained_after_streams_stopped_s": round(drained_s, 1),
            "service_starts": {p.name: p.starts for p in self.services},
        }


def start_run(pipe: Pipeline, cluster: kafka_cluster.Cluster) -> Run:
    port = free_port()
    ingest = pipe.ingest(port, SECRET, TOKEN, BOT, team="T123ABC456", app="A123ABC456")
    compactor, projector = pipe.compactor(), pipe.projector(batch_size=100)
    seen = Visibility(pipe)
    seen.start()
    slack = SlackStream(f"http://127.0.0.1:{port}/slack/events")
    raw = RawStream(pipe.bootstrap, pipe.topics["events"])
    run = Run(pipe, cluster, [ingest, compactor, projector], slack, raw, seen)

    def ingest_answers() -> bool:
        run.services_alive()
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
        return False

    wait_until(ingest_answers, 60, "ingest to answer")
    slack.start()
    raw.start()

    def flowing() -> bool:
        run.services_alive()
        ids = set(seen.seen)
        return len(ids) > 100 and any(i.startswith(slack.key) for i in ids)

    wait_until(flowing, 180, "rows of both streams in Postgres")
    return run


def slack_partition(run: Run) -> int:
    """The events partition the Slack thread is written to (its key's partition)."""
    key = run.slack.key.encode()
    for msg in read_all(run.pipe.bootstrap, run.pipe.topics["events"]):
        if msg.key() == key:
            return int(msg.partition())
    raise AssertionError("no Slack event on the events topic yet")


def leaderships(cluster: kafka_cluster.Cluster, node_id: int, pipe: Pipeline) -> dict[str, object]:
    """What `node_id` leads right now: partitions per topic of this test, the consumer-offsets
    partitions, and which consumer groups it coordinates."""
    admin = cluster.admin()
    meta = admin.list_topics(timeout=10)
    led: dict[str, object] = {}
    names = {**pipe.topics, "selections": pipe.names.selections, "consumer_offsets": "__consumer_offsets"}
    for short, name in names.items():
        parts = meta.topics[name].partitions if name in meta.topics else {}
        led[f"led_{short}"] = f"{sum(1 for p in parts.values() if p.leader == node_id)}/{len(parts)}"
    groups = {"compactor": pipe.names.group("compactor"), "projector": pipe.group}
    coordinated = []
    with contextlib.suppress(Exception):
        described = admin.describe_consumer_groups(list(groups.values()))
        for short, group in groups.items():
            if described[group].result(timeout=10).coordinator.id == node_id:
                coordinated.append(short)
    led["coordinator_of"] = coordinated
    return led


def selections_replicas(cluster: kafka_cluster.Cluster, pipe: Pipeline) -> set[int]:
    name = pipe.names.selections
    meta = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(name, timeout=10).topics[name]
    return {len(p.replicas) for p in meta.partitions.values()}


# ---- the tests ---------------------------------------------------------------------------------


@pytest.mark.timeout(900)
def test_kill_9_the_leader_of_a_partition_being_written(
    pipe: Pipeline, healthy: kafka_cluster.Cluster, record: dict[str, object]
) -> None:
    run = start_run(pipe, healthy)
    # the compactor created its selections changelog itself: as replicated as the events topic
    assert selections_replicas(healthy, pipe) == {kafka_cluster.REPLICATION}
    partition = slack_partition(run)
    victim = healthy.leader(pipe.topics["events"], partition)
    roles = leaderships(healthy, victim, pipe)
    time.sleep(3)  # steady flow for a moment
    rows_before = len(run.seen.seen)

    t_kill = time.monotonic()
    healthy.kill_node(victim)
    killed_s = time.monotonic() - t_kill
    watch = LeaderWatch(healthy, pipe.topics["events"], partition, victim)
    watch.start()
    recovery = run.wait_recovered(t_kill)
    watch.stop()
    assert watch.moved_at is not None and watch.new_leader not in (None, victim)
    time.sleep(5)  # the pipeline keeps running on two nodes

    t_restart = time.monotonic()
    healthy.start_node(victim)
    restarted_s = time.monotonic() - t_restart
    in_sync_s = healthy.wait_fully_replicated(180)
    time.sleep(3)  # and on three again
    stall = run.longest_stall(t_kill - 5)
    figures = run.finish()

    record.update(
        figures,
        **recovery,
        **STARTUP,
        fault="kill -9 the leader of the Slack thread's events partition",
        partition=partition,
        killed_node=victim,
        **roles,
        rows_at_kill=rows_before,
        kill_s=round(killed_s, 2),
        leader_moved_after_s=round(watch.moved_at - t_kill, 2),
        new_leader=watch.new_leader,
        killed_node_fenced_after_s=round(watch.fenced_at - t_kill, 2) if watch.fenced_at else None,
        longest_stall_s=stall,
        node_restart_s=round(restarted_s, 1),
        fully_replicated_after_restart_s=round(in_sync_s, 1),
    )
    print(record)
    # the bound a failover of the default broker.session.timeout.ms (9 s) plus client retries fits in
    assert max(recovery.values()) < 60, recovery


@pytest.mark.timeout(900)
def test_rolling_restart_of_all_three_brokers(
    pipe: Pipeline, healthy: kafka_cluster.Cluster, record: dict[str, object]
) -> None:
    run = start_run(pipe, healthy)
    assert selections_replicas(healthy, pipe) == {kafka_cluster.REPLICATION}
    time.sleep(3)
    t_first = time.monotonic()
    steps: list[dict[str, object]] = []
    for node in healthy.nodes:
        t_stop = time.monotonic()
        assert healthy.stop_node(node.node_id), f"node {node.node_id} was not running"
        stopped_s = time.monotonic() - t_stop
        healthy.start_node(node.node_id)
        up_s = time.monotonic() - t_stop
        in_sync_s = healthy.wait_fully_replicated(180)
        recovery = run.wait_recovered(t_stop)
        steps.append(
            {
                "node": node.node_id,
                "stop_s": round(stopped_s, 1),
                "down_until_answering_s": round(up_s, 1),
                "under_replicated_0_after_s": round(in_sync_s, 1),
                **recovery,
                "longest_stall_s": run.longest_stall(t_stop),
            }
        )
        run.services_alive()
        time.sleep(2)
    rolling_s = time.monotonic() - t_first
    time.sleep(3)
    figures = run.finish()
    record.update(
        figures,
        **STARTUP,
        fault="rolling restart (SIGTERM, start, under-replicated partitions back to 0) of nodes 1, 2, 3",
        rolling_restart_s=round(rolling_s, 1),
        steps=steps,
    )
    print(record)
    for step in steps:
        for key, value in step.items():
            if key.startswith("recovery_"):
                assert isinstance(value, float) and value < 60, step
