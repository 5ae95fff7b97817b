"""RECALL_CHANNEL_GROUPS, the operator's channel mapping: read at start-up, a bad value is one line and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from schemas.recall import RecallError, channel_groups


def test_channel_groups_parse_and_refuse_what_is_not_a_list_of_channel_ids() -> None:
    assert channel_groups("") == ()
    assert channel_groups('[["C0PAY", "C0CHECKOUT"]]') == (frozenset({"C0PAY", "C0CHECKOUT"}),)
    for bad, says in (
        ("nope", "not JSON"),
        ('{"C0PAY": "C0CHECKOUT"}', "list of lists"),
        ('[["C0PAY", ""]]', "list of lists"),
        ('[["#payments", "C0CHECKOUT"]]', "'#payments' is not a Slack channel id"),
    ):
        with pytest.raises(RecallError, match=says):
            channel_groups(bad)


@pytest.mark.parametrize("service", ["agent", "telemetry-mcp"])
def test_a_service_that_recalls_refuses_a_bad_mapping_at_start(service: str) -> None:
    """Before any connection: the first alert must not be the moment the operator learns of the typo."""
    env = {**os.environ, "RECALL_CHANNEL_GROUPS": '[["#payments"]]', "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"}
    done = subprocess.run(
        [sys.executable, "-m", "services.cli", service], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "RECALL_CHANNEL_GROUPS: '#payments' is not a Slack channel id" in lines[0]
