"""Kafka's own console producer on ingest's alerts topic (issue 18, item 4).

`kafka-console-producer` (org.apache.kafka.tools.ConsoleProducer, from kafka-tools in the local
broker's pom, run on its cached classpath) sends one record per line of its stdin. Alertmanager
JSON one object per line becomes the same events as a webhook; a pretty-printed file becomes one
dead letter per line and nothing else. Together they prove the rule in services/ingest/README.md:
one JSON object per record (per line for the console producer).
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from deploy.local import kafka_node
from deploy.local.stack import kafka_jars
from schemas.events import AlertReceived, DeadLetter, IncidentStateChanged, Wake

from .alerts_topic import new_user_topic, reading
from .helpers import alert_payload, read_events, read_topic, topic_count

CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"  # bin/kafka-console-producer.sh


@pytest.fixture
def user_topic(kafka_bootstrap: str) -> str:
    return new_user_topic(kafka_bootstrap)


def console_produce(bootstrap: str, topic: str, text: str) -> None:
    """`kafka-console-producer.sh --bootstrap-server B --topic T --property parse.key=false < text`."""
    kafka_jars()  # the local stack's (resolved here too when the broker is external)
    started = time.monotonic()
    result = kafka_node.run_tool(
        CONSOLE_PRODUCER, "--bootstrap-server", bootstrap, "--topic", topic,
        "--property", "parse.key=false", stdin=text,
    )  # fmt: skip
    print(f"kafka-console-producer: {time.monotonic() - started:.2f} s, exit {result.returncode}")
    assert result.returncode == 0, f"kafka-console-producer failed:\n{result.stdout}\n{result.stderr}"


def test_one_json_object_per_line_becomes_the_alert_events(
    kafka_bootstrap: str, topic_names: dict[str, str], user_topic: str
) -> None:
    key = f"console-{uuid.uuid4().hex}"
    firing, resolved = alert_payload("firing", group_key=key), alert_payload("resolved", group_key=key)
    console_produce(kafka_bootstrap, user_topic, f"{json.dumps(firing)}\n{json.dumps(resolved)}\n")
    assert topic_count(kafka_bootstrap, user_topic) == 2  # one record per line

    with reading(kafka_bootstrap, topic_names, user_topic) as reader:
        events = read_events(kafka_bootstrap, topic_names["events"], 4)
        wakes = read_events(kafka_bootstrap, topic_names["wake"], 1)
        committed = reader.committed(total=2)
    alerts = [e for e in events if isinstance(e, AlertReceived)]
    assert {a.status for a in alerts} == {"firing", "resolved"}
    assert {a.alert["groupKey"] for a in alerts} == {key}
    assert next(a.alert for a in alerts if a.status == "firing") == firing  # the line, kept as sent
    thread = alerts[0].thread_ts
    assert {e.message_id for e in events} == {
        f"{thread}:-:alert:0", f"{thread}:-:state:open", f"{thread}:-:alert:resolved", f"{thread}:-:state:resolved",
    }  # fmt: skip
    assert {e.status for e in events if isinstance(e, IncidentStateChanged)} == {"open", "resolved"}
    assert [(w.message_id, w.reason) for w in wakes if isinstance(w, Wake)] == [
        (f"{thread}:-:wake:alert", "alert")
    ]
    assert committed == 2
    assert topic_count(kafka_bootstrap, topic_names["dlq"]) == 0


def test_a_pretty_printed_file_is_one_dead_letter_per_line_and_nothing_else(
    kafka_bootstrap: str, topic_names: dict[str, str], user_topic: str, tmp_path: Path
) -> None:
    pretty = tmp_path / "alert.json"  # what `jq .` or an editor leaves: one webhook over many lines
    pretty.write_text(json.dumps(alert_payload("firing"), indent=2) + "\n")
    lines = pretty.read_text().splitlines()
    console_produce(kafka_bootstrap, user_topic, pretty.read_text())
    assert topic_count(kafka_bootstrap, user_topic) == len(lines)  # one record per line, not per file

    with reading(kafka_bootstrap, topic_names, user_topic) as reader:
        letters = [
            DeadLetter.model_validate_json(v)
            for _, v in read_topic(kafka_bootstrap, topic_names["dlq"], len(lines))
        ]
        committed = reader.committed(total=len(lines))
        dead = reader.server.metric("ingest_dead_letters_total", reason="malformed_json")
    assert committed == len(lines)  # every line consumed, so nothing more is on its way
    assert sorted(letter.payload for letter in letters) == sorted(lines)  # one per line, verbatim
    assert all(letter.reason.startswith("malformed_json: ") for letter in letters), {
        letter.reason for letter in letters
    }
    by_line = {letter.payload: letter.reason for letter in letters}
    print("\n".join(f"{line!r} -> {by_line[line]}" for line in lines[:4]))
    assert all(letter.source_topic == user_topic and letter.offset is not None for letter in letters)
    assert dead == len(lines)
    assert topic_count(kafka_bootstrap, topic_names["events"]) == 0
    assert topic_count(kafka_bootstrap, topic_names["wake"]) == 0
