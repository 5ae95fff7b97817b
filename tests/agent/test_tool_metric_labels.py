"""The tool metric's label comes from a closed set: a model choosing tool names cannot grow it."""

from __future__ import annotations

from services.agent import metrics


def test_known_tools_keep_their_name_and_anything_else_is_other() -> None:
    assert metrics.tool_label("query_loki") == "query_loki"
    assert {metrics.tool_label(f"made_up_{k}") for k in range(100)} == {"other"}
