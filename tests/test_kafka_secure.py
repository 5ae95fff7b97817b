"""Kafka over SASL_SSL with one principal per service, on the local stack's secured node (`up --secure`).

The node is real: Apache Kafka with a SASL_SSL listener (SCRAM), a certificate from the local CA,
and StandardAuthorizer ACLs (deploy/local/kafka_secure.py). It is started once per run, beside the
plaintext broker. Every rule here is one a platform team's cluster enforces.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from test_demo import SEED_ROLES, _table_rows

from deploy.local import kafka_secure, tls
from deploy.local.external import local_stack_only
from deploy.local.pipeline import Proc
from deploy.local.stack import StackInfo, up
from schemas import topics
from schemas.events import ToolResult
from services.runtime.kafka import admin_config, consumer_config, producer_config

CLI = str(Path(sys.executable).with_name("incident-memory"))
pytestmark = [
    pytest.mark.stack,
    pytest.mark.slow,
    local_stack_only("starts the local stack's SASL_SSL Kafka node (`up --secure`)"),
]


@pytest.fixture(scope="module")
def secured() -> Iterator[tuple[StackInfo, kafka_secure.SecureKafka]]:
    info = up(secure=True)
    assert info.secure_kafka is not None
    yield info, info.secure_kafka


def _env(node: kafka_secure.SecureKafka, user: str, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
    return {**base, **node.env(user), **extra}


def _one_line_failure(argv: list[str], env: dict[str, str]) -> str:
    """Run a service that must refuse to start: it ends (a hang fails by the timeout), its stderr one line.

    That it ends at once, not at the start-up check's deadline, is shown by the line itself: a refusal is
    read from librdkafka's error callback and named (`services/runtime/checks.py`), while the deadline says
    "did not answer a metadata request". No wall-clock bound here: in the parallel pass it would measure
    the machine's load (wall-clock bounds run in the serial pass, tests/conftest.py)."""
    done = subprocess.run([CLI, *argv], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0, done.stdout[-1500:] + done.stderr[-1500:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-3000:]
    return lines[0]


def test_the_seed_incident_runs_over_sasl_ssl_with_one_principal_per_service(
    secured: tuple[StackInfo, kafka_secure.SecureKafka], tmp_path: Path
) -> None:
    _info, node = secured
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_BOOTSTRAP_SERVERS", "DATABASE_URL")}
    proc = subprocess.run(
        [CLI, "demo", "--secure", "--cache-dir", str(tmp_path), "--timeout", "90"],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert [r[2] for r in _table_rows(proc.stdout)] == SEED_ROLES
    assert "over SASL_SSL" in proc.stdout
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    passwords = json.loads(node.users_file.read_text())
    for service in kafka_secure.SERVICES:
        log = (run_dir / f"{service}.log").read_text(errors="replace")
        checked = [json.loads(line) for line in log.splitlines() if '"kafka access checked"' in line]
        assert checked, f"{service} never checked its Kafka access:\n{log[-1500:]}"
        described = checked[0]["kafka"]
        assert f"SASL_SSL, SCRAM-SHA-512 as {service} (password ***)" in described, described
        assert node.bootstrap in described
        assert all(pw not in log for pw in passwords.values()), f"a password in {service}'s log"


def test_a_wrong_password_ends_the_service_in_one_line(
    secured: tuple[StackInfo, kafka_secure.SecureKafka],
) -> None:
    _info, node = secured
    wrong = "not-" + uuid.uuid4().hex
    line = _one_line_failure(
        ["projector", "--schema", "never_created"], _env(node, "projector", KAFKA_SASL_PASSWORD=wrong)
    )
    assert "refused the SCRAM-SHA-512 credentials of user 'projector'" in line, line
    assert "invalid credentials" in line and wrong not in line


def test_a_ca_that_did_not_sign_the_broker_ends_the_service_in_one_line(
    secured: tuple[StackInfo, kafka_secure.SecureKafka], tmp_path: Path
) -> None:
    _info, node = secured
    other = tls.ensure_ca(tmp_path / "other-ca", name="some other CA")
    line = _one_line_failure(
        ["agent", "--schema", "never_created"], _env(node, "agent", KAFKA_SSL_CA_LOCATION=str(other.cert))
    )
    assert line.startswith("incident-memory agent: TLS with Kafka at 127.0.0.1:"), line
    assert "certificate verify failed" in line and str(other.cert) in line, line


@pytest.mark.timeout(600)  # the liveness wait below, on top of the refused run and the setup
def test_another_services_principal_is_refused_and_nothing_is_lost(
    secured: tuple[StackInfo, kafka_secure.SecureKafka], tmp_path: Path
) -> None:
    _info, node = secured
    run = uuid.uuid4().hex[:8]
    names = kafka_secure.Names(
        events=f"acl.{run}.events",
        compacted=f"acl.{run}.compacted",
        wake=f"acl.{run}.wake",
        dlq=f"acl.{run}.dlq",
        selections=f"acl.{run}.selections",
        groups={service: f"acl.{run}.{service}" for service in kafka_secure.SERVICES},
    )
    admin = node.client()
    topics.ensure_topics(
        admin_config(admin),
        tuple(topics.TopicSpec(name, 2) for name in (names.events, names.compacted, names.wake, names.dlq)),
    )
    kafka_secure.grant(admin, kafka_secure.service_acls(names))
    results = [
        ToolResult(
            thread_ts=f"17000000{i:02d}.000100",
            message_id=f"17000000{i:02d}.000100:1:tools:0",
            event_time=datetime.now(UTC),
            round=1,
            tool_call_id=f"call_{i}",
            tool="query_prometheus",
            args={},
            raw={"status": "success", "data": {"resultType": "vector", "result": []}},
        )
        for i in range(12)
    ]
    producer = Producer(producer_config(node.client("ingest")))  # ingest writes the events
    for event in results:
        producer.produce(names.events, key=event.thread_ts.encode(), value=event.to_bytes())
    assert producer.flush(30) == 0

    compactor = [
        "compactor", "--app-id", names.groups["compactor"], "--events-topic", names.events,
        "--compacted-topic", names.compacted, "--dlq-topic", names.dlq, "--selections-topic", names.selections,
        "--workers-dir", str(tmp_path / "faust"), "--worker-name", "w0",
    ]  # fmt: skip
    line = _one_line_failure(compactor, _env(node, "projector"))
    assert "Kafka refuses user 'projector'" in line and "the compactor needs" in line, line
    assert f"READ on topic {names.events}" in line and f"WRITE on topic {names.compacted}" in line, line

    # The refusal consumed nothing: the compactor's group has no offsets, and run as itself it
    # compacts every event.
    probe = Consumer(consumer_config(admin, names.groups["compactor"]))
    committed = probe.committed([TopicPartition(names.events, p) for p in range(2)], timeout=10)
    probe.close()
    assert all(tp.offset < 0 for tp in committed), committed
    worker = Proc("compactor", [CLI, *compactor], _env(node, "compactor"), tmp_path / "compactor.log").start()
    try:
        reader = Consumer(consumer_config(admin, f"acl.{run}.reader"))
        reader.subscribe([names.compacted])
        seen: set[str] = set()
        # A liveness bound, not a speed claim: a faust worker joining a fresh group on a loaded CI machine
        # (the parallel pass) has taken over 90 s to compact its first event.
        deadline = time.monotonic() + 180
        while len(seen) < len(results) and time.monotonic() < deadline:
            msg = reader.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.add(json.loads(msg.value() or b"")["message_id"])
            assert worker.alive(), worker.tail(2000)
        reader.close()
    finally:
        worker.stop(30)
    assert seen == {event.message_id for event in results}, worker.tail(3000)
    text = worker.text()
    assert re.search(r"SASL_SSL, SCRAM-SHA-512 as compactor", text), text[-2000:]


def test_migrate_as_a_service_principal_cannot_create_topics_and_says_so(
    secured: tuple[StackInfo, kafka_secure.SecureKafka], pg_schema: str
) -> None:
    info, node = secured
    env = _env(node, "agent", DATABASE_URL=info.database_url, KAFKA_BOOTSTRAP_SERVERS=node.bootstrap)
    line = _one_line_failure(["migrate", "--schema", pg_schema], env)
    assert line.startswith(
        "incident-memory migrate: could not create the topics as agent: Authorization failed"
    ), line
    admin_env = _env(node, "admin", DATABASE_URL=info.database_url)
    done = subprocess.run(
        [CLI, "migrate", "--schema", pg_schema], env=admin_env, capture_output=True, text=True
    )
    assert done.returncode == 0 and "topics: all exist" in done.stdout, done.stderr
