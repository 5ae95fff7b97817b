"""The real local stack: events cross the real broker, `up` reuses, bad settings fail fast in one line."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from confluent_kafka import Consumer, Producer

from deploy.local import procs
from deploy.local.external import local_stack_only
from deploy.local.pipeline import delete_topics
from deploy.local.ports import free_port
from schemas.events import EventBase, HumanMessage, parse_event
from schemas.ids import message_id
from services.runtime.settings import Settings

T = "1700000000.000200"


def _event(i: int) -> HumanMessage:
    ts = f"1700000001.{i:06d}"
    return HumanMessage(thread_ts=T, message_id=message_id(T, None, "human", ts), ts=ts, user="U1",
                        text=f"message {i} — ünïcode", event_time=datetime(2026, 3, 1, 12, 0, i, tzinfo=UTC))  # fmt: skip


def _produce(bootstrap: str, topic: str, events: list[HumanMessage]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for event in events:
        producer.produce(topic, value=event.to_bytes(), key=event.key())
    assert producer.flush(30) == 0


def _consume_confluent(
    bootstrap: str, topic: str, n: int, timeout: float = 30
) -> list[tuple[bytes, EventBase]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})  # fmt: skip
    consumer.subscribe([topic])
    got: list[tuple[bytes, EventBase]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.key() or b"", parse_event(msg.value() or b"")))
    finally:
        consumer.close()
    return got


async def _consume_aiokafka(
    bootstrap: str, topic: str, n: int, timeout: float = 30
) -> list[tuple[bytes, EventBase]]:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"t-{uuid.uuid4().hex}",
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                isolation_level="read_committed")  # fmt: skip
    await consumer.start()
    got: list[tuple[bytes, EventBase]] = []
    try:
        async with asyncio.timeout(timeout):
            while len(got) < n:
                msg = await consumer.getone()
                got.append((msg.key or b"", parse_event(msg.value or b"")))
    finally:
        await consumer.stop()
    return got


def test_event_round_trip_through_the_real_broker(kafka_bootstrap: str, topic_names: dict[str, str]) -> None:
    events = [_event(i) for i in range(5)]
    _produce(kafka_bootstrap, topic_names["events"], events)
    expected = [(e.key(), e) for e in events]  # one key: one partition, in order
    assert _consume_confluent(kafka_bootstrap, topic_names["events"], len(events)) == expected
    assert asyncio.run(_consume_aiokafka(kafka_bootstrap, topic_names["events"], len(events))) == expected


def test_topic_names_fixture_matches_production_partitions(
    kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    from confluent_kafka.admin import AdminClient

    from schemas.topics import TOPICS

    metadata = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10)
    partitions = {name: len(metadata.topics[name].partitions) for name in topic_names.values()}
    assert sorted(partitions.values()) == sorted(spec.partitions for spec in TOPICS)
    assert partitions[topic_names["events"]] == 8


@local_stack_only("checks that `up` reuses the local stack's processes (their pids)")
def test_up_twice_reuses_the_running_processes(stack: Settings) -> None:
    from deploy.local.stack import up

    first, second = up(), up()
    assert first.started == second.started == ()  # the session fixture already started or found it
    assert first.kafka_pid == second.kafka_pid is not None
    assert first.postgres_pid == second.postgres_pid is not None
    assert first.kafka_pid is not None and "kafka.Kafka" in procs.cmdline(first.kafka_pid)
    assert first.settings == second.settings == stack


def _cli(
    *argv: str, env: dict[str, str], timeout: float = 30
) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "deploy.local.devcli", *argv], capture_output=True, text=True,
                            env={**os.environ, **env}, timeout=timeout, check=False)  # fmt: skip
    return result, time.monotonic() - t0


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A loopback port that accepts connections and never answers: a broker that hangs."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield int(s.getsockname()[1])


def _assert_one_line_error(result: subprocess.CompletedProcess[str], took: float, *needles: str) -> None:
    assert result.returncode != 0
    assert took < 30
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0]


def test_up_with_an_unreachable_broker_is_a_fast_one_line_error() -> None:
    bad = f"127.0.0.1:{free_port()}"
    result, took = _cli("up", env={"KAFKA_BOOTSTRAP_SERVERS": bad})
    _assert_one_line_error(result, took, "KAFKA_BOOTSTRAP_SERVERS", bad, "Connection refused")


def test_migrate_with_an_unreachable_broker_is_a_fast_one_line_error(pg_dsn: str) -> None:
    bad = f"127.0.0.1:{free_port()}"
    result, took = _cli("migrate", env={"KAFKA_BOOTSTRAP_SERVERS": bad, "DATABASE_URL": pg_dsn})
    _assert_one_line_error(result, took, "KAFKA_BOOTSTRAP_SERVERS", bad)


@pytest.mark.slow
def test_a_hanging_broker_is_a_one_line_error_within_the_timeout(silent_listener: int) -> None:
    bad = f"127.0.0.1:{silent_listener}"
    result, took = _cli("up", "--check-timeout", "3", env={"KAFKA_BOOTSTRAP_SERVERS": bad})
    _assert_one_line_error(result, took, "KAFKA_BOOTSTRAP_SERVERS", bad)


def _bad_dsn() -> str:
    return f"postgresql://nobody:s3cret@127.0.0.1:{free_port()}/nothing"


def test_unreachable_database_is_a_fast_one_line_error() -> None:
    result, took = _cli("migrate", "--no-topics", env={"DATABASE_URL": _bad_dsn()})
    _assert_one_line_error(result, took, "DATABASE_URL", "nobody:***@")
    assert "s3cret" not in result.stderr


def test_wrong_password_is_a_fast_one_line_error(pg_dsn: str, kafka_bootstrap: str) -> None:
    url = urlsplit(pg_dsn)  # the local stack's DSN or an external one: its user, another password
    user, _, host = url.netloc.rpartition("@")
    wrong = urlunsplit(url._replace(netloc=f"{user.partition(':')[0]}:wrong-password@{host}"))
    assert wrong != pg_dsn
    result, took = _cli("up", env={"DATABASE_URL": wrong, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap})
    _assert_one_line_error(result, took, "DATABASE_URL", "password authentication failed")
    assert "wrong-password" not in result.stderr


def test_stop_signals_only_a_process_started_with_the_marker(tmp_path: Path) -> None:
    marker = f"im-test-{uuid.uuid4().hex}"
    proc = procs.spawn(
        [sys.executable, "-c", "import time; time.sleep(60)", marker], tmp_path / "log", cwd=tmp_path
    )
    pid_file = tmp_path / "x.pid"
    pid_file.write_text(f"{proc.pid}\n")
    # until the child has exec'd, /proc/<pid>/cmdline is still the parent's: wait for the exec, not a time
    deadline = time.monotonic() + 10
    while procs.running_pid(pid_file, marker) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert procs.running_pid(pid_file, marker) == proc.pid
    assert procs.running_pid(pid_file, "some-other-marker") is None  # a reused pid is not ours
    assert procs.stop(proc.pid, "some-other-marker") is False
    assert proc.poll() is None  # untouched
    assert procs.stop(proc.pid, marker, timeout=10) is True
    assert proc.wait(timeout=5) is not None
    assert procs.running_pid(pid_file, marker) is None


def test_ensure_topics_returns_only_once_new_topics_are_visible_with_every_partition(
    kafka_bootstrap: str,
) -> None:
    from confluent_kafka.admin import AdminClient

    from schemas.topics import TopicSpec, ensure_topics

    specs = tuple(TopicSpec(f"visible.{uuid.uuid4().hex[:10]}", 8) for _ in range(4))
    try:
        assert sorted(ensure_topics(kafka_bootstrap, specs)) == sorted(s.name for s in specs)
        metadata = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).topics
        assert {s.name: len(metadata[s.name].partitions) for s in specs} == {s.name: 8 for s in specs}
    finally:
        delete_topics(kafka_bootstrap, [s.name for s in specs])


def test_partitions_once_visible_waits_out_a_lagging_metadata_cache() -> None:
    """What the broker answered right after creating a topic, in order: not listed, listed with no
    partitions, then listed in full. The wait must return the full count, not the first answer."""
    from types import SimpleNamespace

    from schemas.topics import partitions_once_visible

    answers = [
        {},
        {"t": SimpleNamespace(error=None, partitions={})},
        {"t": SimpleNamespace(error=None, partitions=dict.fromkeys(range(8)))},
    ]

    class LaggingAdmin:
        def list_topics(self, topic: str, timeout: float) -> SimpleNamespace:
            return SimpleNamespace(topics=answers.pop(0) if len(answers) > 1 else answers[0])

    assert partitions_once_visible(LaggingAdmin(), "t", timeout=5) == 8
