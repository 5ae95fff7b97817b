"""The local broker's GC log: kafka-server-start.sh's heap and `-loggc`, and the pauses the e2e bench reads.

The parser is checked on lines of the format Java 17 writes, then on the running local broker itself:
a GC it is asked for (`jcmd GC.run`) must show up as pauses in the window around it.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from confluent_kafka.admin import AdminClient

from deploy.local import kafka_node
from deploy.local.external import local_stack_only
from deploy.local.pipeline import Names, Pipeline
from services.runtime.settings import Settings

LINES = """\
[2026-12-03T19:21:38.723+0000][609.321s] GC(114) Pause Young (Mixed) (G1 Evacuation Pause) 304M->273M(512M) 17.169ms
[2026-12-03T19:21:39.001+0000][609.600s] GC(115) Concurrent Mark Cycle 120.250ms
[2026-12-03T19:21:42.433+0000][613.032s] GC(118) Pause Remark 267M->267M(512M) 10.713ms
[2026-12-03T19:21:47.251+0000][617.849s] GC(119) Pause Young (Prepare Mixed) (G1 Evacuation Pause) 333M->263M(512M) 12.827ms
[2026-12-03T20:21:47.251+0100][617.849s] GC(120) Pause Cleanup 220M->220M(512M) 0.311ms
"""


def _epoch(stamp: str) -> float:
    from datetime import datetime

    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def test_pauses_are_read_in_their_window_and_nothing_else() -> None:
    since, until = _epoch("2026-12-03T19:21:38.000+0000"), _epoch("2026-12-03T19:21:45.000+0000")
    assert kafka_node.gc_pauses(LINES, since, until) == [17.169, 10.713]  # not the concurrent cycle
    whole = kafka_node.gc_pauses(LINES, 0, 2e9)
    assert whole == [17.169, 10.713, 12.827, 0.311]  # an offset zone is read as such (19:21:47 UTC)
    assert kafka_node.gc_pauses(LINES, until, until + 1) == []


def test_the_broker_runs_with_kafkas_default_heap_and_its_gc_log(tmp_path: Path) -> None:
    argv = kafka_node._java(kafka_node.KafkaPaths(tmp_path), kafka_node.MARKER, "x", heap=kafka_node.HEAP)
    assert argv[1:3] == ["-Xms1g", "-Xmx1g"]  # kafka-server-start.sh: KAFKA_HEAP_OPTS="-Xmx1G -Xms1G"


@local_stack_only("reads the local broker's GC log and asks its JVM for a collection")
@pytest.mark.skipif(shutil.which("jcmd") is None, reason="no jcmd (a JDK tool) to ask the broker for a GC")
def test_the_local_broker_logs_each_pause(stack: Settings) -> None:
    p = kafka_node.paths()
    pid = kafka_node.running_pid(p)
    assert pid is not None, "the local broker is not running"
    since = time.time()
    subprocess.run(["jcmd", str(pid), "GC.run"], check=True, capture_output=True, timeout=60)
    deadline = time.monotonic() + 30
    pauses: list[float] = []
    while not pauses and time.monotonic() < deadline:  # a concurrent cycle: its remark comes a moment later
        pauses = kafka_node.gc_pauses(p.gc_log.read_text(errors="replace"), since, time.time() + 1)
        time.sleep(0.2)
    assert pauses, f"no pause in {p.gc_log} after a GC was asked for"
    assert all(0 <= ms < 10_000 for ms in pauses)


def test_deprovision_removes_the_runs_topics_and_schema(stack: Settings, tmp_path: Path) -> None:
    run_id = uuid.uuid4().hex[:8]
    names = Names.fresh(f"deprov.{run_id}", f"deprov_{run_id}")
    pipe = Pipeline(stack.kafka_bootstrap_servers, stack.database_url, names.schema, names.topics, tmp_path)
    pipe.provision()
    admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap_servers})
    assert set(names.topics.values()) - {names.selections} <= set(admin.list_topics(timeout=10).topics)

    pipe.deprovision()

    deadline = time.monotonic() + 30
    left = set(names.topics.values())
    while left and time.monotonic() < deadline:  # deletion is asynchronous in the controller
        left &= set(admin.list_topics(timeout=10).topics)
        time.sleep(0.2)
    assert not left, f"topics left behind: {sorted(left)}"
    with psycopg.connect(stack.database_url) as conn:
        row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (names.schema,)).fetchone()
    assert row is None
