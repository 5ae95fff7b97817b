"""Model conformance through the real pipeline: Kafka, the compactor, the projector, Postgres, the agent process.

The worst model of tests/agent/test_model_conformance.py, in one run: it calls no tool and never answers
JSON, behind a server that enforces nothing (the OpenAI stand-in, mode `none`; a test tool, not a model).
The committed thread in Postgres must still hold the alert's evidence (the playbook's calls) and say
truthfully that the hypothesis failed, that there was nothing to judge, and post that.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from deploy.local.openai_standin import MODEL, running
from deploy.local.pipeline import Pipeline

from .seedplay import alert_events, alert_wake, produce

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _rows(dsn: str, schema: str) -> list[tuple[str, str, Any]]:
    with psycopg.connect(dsn, autocommit=True, options=f"-c search_path={schema}") as conn:
        return [
            (r[0], r[1], json.loads(r[2]) if isinstance(r[2], str) else r[2])
            for r in conn.execute("SELECT id, role, content FROM agent_messages ORDER BY seq").fetchall()
        ]


def test_a_model_that_calls_no_tool_and_never_answers_json_through_the_pipeline(
    kafka_bootstrap: str, pg_dsn: str, pg_schema: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    with running(mode="none") as oai:
        oai.misbehave("no_tool_calls", node="investigate", times=-1)
        oai.misbehave("no_json", node="hypothesis", times=-1)
        pipe = Pipeline(kafka_bootstrap, pg_dsn, pg_schema, topic_names, tmp_path)
        try:
            pipe.compactor()
            pipe.projector()
            pipe.agent(extra=["--model", MODEL, "--judge-model", MODEL], env={**pipe.env, **oai.env()})
            produce(kafka_bootstrap, topic_names["events"], alert_events())
            produce(kafka_bootstrap, topic_names["wake"], [alert_wake()])
            pipe.wait_until(
                lambda: any(r[1] == "post" for r in _rows(pg_dsn, pg_schema)), 150, "round 1's post"
            )
        finally:
            pipe.stop_all()
        calls = oai.calls()
    rows = _rows(pg_dsn, pg_schema)
    roles = [r[1] for r in rows]
    assert roles == ["alert", "ai", "tool", "tool", "tool", "ai", "ai", "judge", "post"]
    playbook, *_ = [r[2] for r in rows if r[1] == "ai"]
    assert playbook["model"] == "playbook:kube-oom"
    assert [c["name"] for c in playbook["tool_calls"]] == ["query_loki", "query_prometheus", "get_pod_events"]
    hypothesis = rows[6][2]
    assert hypothesis["node"] == "hypothesis" and hypothesis["claims"] == []
    assert hypothesis["text"].startswith("hypothesis failed: ") and hypothesis["raw_answer"]
    assert rows[7][2]["failure"].startswith("nothing to judge") and rows[7][2]["grounded"] is False
    assert rows[8][2]["kind"] == "failure" and rows[8][2]["model"] == MODEL
    # the hypothesis was asked twice (the answer and one repair), the judge never
    text = [json.dumps(c.body.get("messages")) for c in calls]
    assert sum("TASK: hypothesis" in t for t in text) == 2 and not any("TASK: judge" in t for t in text)
