"""Tool schemas lose pydantic's generated titles, and nothing else."""

from typing import Any

from services.agent.mcp_client import lean_schema


def test_lean_schema_drops_generated_titles_but_keeps_a_property_named_title() -> None:
    schema = {
        "title": "query_lokiArguments",
        "type": "object",
        "properties": {
            "query": {"title": "Query", "type": "string", "description": "LogQL"},
            "title": {"title": "Title", "type": "string"},
        },
        "required": ["query"],
    }
    assert lean_schema(schema) == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "LogQL"},
            "title": {"type": "string"},
        },
        "required": ["query"],
    }


def test_lean_schema_states_an_optional_argument_once() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "pod": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "description": "d"},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}], "default": None},
            "limit": {"type": "integer", "default": 5000},
        },
        "required": [],
    }
    lean = lean_schema(schema)
    assert lean["properties"]["pod"] == {"type": "string", "description": "d"}  # optional: not required
    assert lean["properties"]["either"] == schema["properties"]["either"]  # a real union is kept
    assert lean["properties"]["limit"] == {"type": "integer", "default": 5000}  # a real default is kept


def test_the_telemetry_tool_schemas_are_terse() -> None:
    """What every investigate call pays: the four telemetry tools' schemas and `search_thread`'s (issue 34),
    as the agent sends them."""
    import asyncio

    from schemas.tokens import count_tokens, render_for_model
    from services.agent.mcp_client import tool_spec
    from services.telemetry_mcp import config as config_mod
    from services.telemetry_mcp.server import build_server

    tools = asyncio.run(build_server(config_mod.load({}, None)).list_tools())
    specs = [tool_spec(t) for t in tools if t.name != "get_evidence"]
    assert sorted(s["function"]["name"] for s in specs) == [
        "get_pod_events", "query_loki", "query_prometheus", "query_tempo", "recall_incidents", "search_thread"
    ]  # fmt: skip
    telemetry = [s for s in specs if s["function"]["name"] not in ("search_thread", "recall_incidents")]
    recall = [s for s in specs if s["function"]["name"] == "recall_incidents"]
    assert count_tokens(render_for_model(recall)) < 64  # issue 37's tool
    search = [s for s in specs if s["function"]["name"] == "search_thread"]
    assert count_tokens(render_for_model(telemetry)) < 350  # 495 before terse descriptions, 568 with titles
    assert count_tokens(render_for_model(search)) < 80
