"""Tool schemas lose pydantic's generated titles, and nothing else."""

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
