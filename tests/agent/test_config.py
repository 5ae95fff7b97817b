"""The agent's configuration: the tool map is the compactor's, mapped in one place."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from schemas.tools import TOOL_COMPACTORS
from services.agent.config import TELEMETRY_ENV, build_config
from services.runtime.errors import UserFacingError
from services.runtime.kafka_client import KafkaClient

KAFKA = KafkaClient.plaintext("unused:9092")


def test_tools_map_as_schemas_tools_plus_compactor_tool_map() -> None:
    plain = build_config({}, env={}, kafka=KAFKA, database_url="postgresql://unused")
    assert dict(plain.tool_compactors) == dict(TOOL_COMPACTORS)
    assert plain.compactor_for("query_loki_logs") == "query_loki"  # Grafana's name, as the compactor maps it
    assert plain.compactor_for("my_logs") == "my_logs"  # unmapped: its own name (the passthrough)
    env = {"COMPACTOR_TOOL_MAP": '{"my_logs": "query_loki"}'}
    mapped = build_config({}, env=env, kafka=KAFKA, database_url="postgresql://unused")
    assert mapped.compactor_for("my_logs") == "query_loki"
    with pytest.raises(TypeError):
        mapped.tool_compactors["x"] = "query_loki"  # type: ignore[index]


@pytest.mark.parametrize(
    ("file_data", "env", "message"),
    [
        ({"tool_compactors": {"my_logs": "query_loki"}}, {}, "'tool_compactors' is gone.*COMPACTOR_TOOL_MAP"),
        ({}, {"COMPACTOR_TOOL_MAP": "{nope"}, "COMPACTOR_TOOL_MAP is not a JSON object"),
        ({}, {"COMPACTOR_TOOL_MAP": '{"my_logs": ""}'}, "expected a compactor name"),
    ],
)
def test_a_tool_map_it_cannot_use_is_one_clear_error(
    file_data: dict[str, object], env: dict[str, str], message: str
) -> None:
    with pytest.raises(UserFacingError, match=message):
        build_config(file_data, env=env, kafka=KAFKA, database_url="postgresql://unused")


def test_the_command_line_overrides_the_config_file_key_by_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """services/agent/main.py: a flag given wins over the file's key, a flag not given leaves it."""
    from services.agent import main

    for var in (
        "AGENT_MODEL",
        "JUDGE_MODEL",
        "KAFKA_BOOTSTRAP_SERVERS",
        "KAFKA_CLIENT_CONFIG",
        "DATABASE_URL",
    ):
        monkeypatch.delenv(var, raising=False)
    file = tmp_path / "agent.json"
    file.write_text(
        json.dumps(
            {"events_topic": "file.events", "context_budget": 1000, "bootstrap_servers": "file:9092",
             "schema": "file_schema", "database_url": "postgresql://file", "models": {"judge": "j-file"}}
        )
    )  # fmt: skip
    parser = argparse.ArgumentParser()
    main.add_arguments(parser)
    args = parser.parse_args(
        ["--config", str(file), "--wake-topic", "flag.wake", "--context-budget", "2000", "--max-concurrency", "3",
         "--round-timeout", "4.5", "--step-delay", "0.5", "--wake-window", "1", "--wake-window-max", "9",
         "--group", "g", "--model", "m", "--dsn", "postgresql://flag", "--mcp-command", "telemetry --x"]
    )  # fmt: skip
    config = main.config_from_args(args)
    assert config.events_topic == "file.events" and config.kafka.bootstrap_servers == "file:9092"
    assert (config.schema, config.database_url) == ("file_schema", "postgresql://flag")
    flags = (config.wake_topic, config.context_budget, config.max_concurrency, config.round_timeout)
    assert flags == ("flag.wake", 2000, 3, 4.5)
    assert (config.step_delay, config.wake_window, config.wake_window_max, config.group_id) == (
        0.5,
        1.0,
        9.0,
        "g",
    )
    assert (config.models.agent, config.models.judge) == ("m", "j-file")
    (server,) = config.mcp_servers
    assert (server.name, server.command, server.url) == ("cli", ["telemetry", "--x"], None)
    assert server.env == {"DATABASE_URL": "postgresql://flag", "TELEMETRY_MCP_SCHEMA": "file_schema"}
    assert server.pass_env == TELEMETRY_ENV
