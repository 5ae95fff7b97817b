"""`incident-memory ingest` configuration errors: one line, exit 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deploy.local import loopback_http
from deploy.local.pipeline import Pipeline

from .helpers import (
    BOT,
    SECRET,
    WORKSPACE_ENV,
    dumps,
    envelope,
    mention,
    signed_headers,
    slack_ts,
    topic_count,
)


@pytest.mark.parametrize(
    ("env", "missing"),
    [
        ({}, "SLACK_SIGNING_SECRET"),
        ({"SLACK_SIGNING_SECRET": "s"}, "SLACK_TEAM_ID"),
        ({"SLACK_SIGNING_SECRET": "s", "SLACK_TEAM_ID": "T1"}, "SLACK_APP_ID"),
        ({"SLACK_SIGNING_SECRET": "s", "SLACK_TEAM_ID": "T1", "SLACK_APP_ID": " "}, "SLACK_APP_ID"),
        ({"SLACK_SIGNING_SECRET": "s", **WORKSPACE_ENV}, "ALERTMANAGER_TOKEN"),
    ],
)
def test_missing_secret_is_one_line_and_exit_1(env: dict[str, str], missing: str) -> None:
    unset = ("SLACK_SIGNING_SECRET", "ALERTMANAGER_TOKEN", *WORKSPACE_ENV)
    clean = {k: v for k, v in os.environ.items() if k not in unset}
    done = subprocess.run(
        [sys.executable, "-m", "services.cli", "ingest", "--port", "0"],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and missing in lines[0] and lines[0].startswith("incident-memory ingest:")


def test_the_cli_serves_logs_json_and_exits_cleanly_on_sigterm(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    secrets = {
        "SLACK_SIGNING_SECRET": SECRET,
        "ALERTMANAGER_TOKEN": "t",
        "SLACK_BOT_USER_ID": BOT,
        **WORKSPACE_ENV,
    }
    pipe = Pipeline(kafka_bootstrap, "", "cli", topic_names, tmp_path, extra_env=secrets)
    proc = pipe.ingest(schema=False)
    try:
        proc.wait_ready(30)
        url = f"http://127.0.0.1:{proc.port}"
        thread, ts = slack_ts(), slack_ts(1)
        body = dumps(envelope(mention(thread, ts)))
        assert (
            loopback_http.post(f"{url}/slack/events", content=body, headers=signed_headers(body)).status_code
            == 200
        )
    finally:
        code = proc.stop(30)  # SIGTERM
    assert code == 0, proc.text()
    records = [json.loads(line) for line in proc.text().splitlines() if line.startswith("{")]
    produced = [r for r in records if r["msg"] == "produced"]
    key = f"C123ABC456-{thread}"  # the thread is its channel and its ts
    assert {(r["thread_ts"], r["message_id"]) for r in produced} == {
        (key, f"{key}:-:human:{ts}"),
        (key, f"{key}:-:wake:{ts}"),
    }
    assert all(r["service"] == "ingest" for r in records)
    assert topic_count(kafka_bootstrap, topic_names["wake"]) == 1
