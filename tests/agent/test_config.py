"""The agent's configuration: the tool map is the compactor's, mapped in one place."""

from __future__ import annotations

import pytest

from schemas.tools import TOOL_COMPACTORS
from services.agent.config import build_config
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
