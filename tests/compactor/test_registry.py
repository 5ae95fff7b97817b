"""The call path: budgets enforced (never trusted), determinism, tool mapping."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from schemas.events import canonical_json
from schemas.tokens import count_value_tokens
from services.compactor import registry
from services.compactor.model import Draft, Item
from services.compactor.registry import (
    COMPACTOR_VERSION,
    DEFAULT_BUDGETS,
    BudgetExceeded,
    compact_tool_result,
    compactor_for,
)
from services.seed import generate_loki, seed_incident


@pytest.fixture
def liar() -> Iterator[str]:
    """A compactor that claims nothing and always renders far over any budget."""

    def draft(raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft:
        huge = {"blob": "word " * 5000}
        return Draft(
            header=huge, section="items", unit="things", levels=((Item(id="a", body={"x": 1}, pinned=True),),)
        )

    registry.COMPACTORS["liar"] = draft
    registry.TOOL_COMPACTORS["liar_tool"] = "liar"
    try:
        yield "liar_tool"
    finally:
        registry.COMPACTORS.pop("liar")
        registry.TOOL_COMPACTORS.pop("liar_tool")


def test_over_budget_digest_raises(liar: str) -> None:
    with pytest.raises(BudgetExceeded) as info:
        compact_tool_result(liar, {"anything": 1}, {}, budget=400)
    assert info.value.tokens > 400 and info.value.budget == 400


def test_pinned_errors_never_dropped_to_fit() -> None:
    raw = generate_loki(3, lines=300, patterns=8)  # many distinct FATAL/error lines
    with pytest.raises(BudgetExceeded):
        compact_tool_result("query_loki", raw, {}, budget=300)


def test_tokens_are_counted_by_the_call_path() -> None:
    s = seed_incident()
    for budget in (150, 200, 250, 300):
        try:
            out = compact_tool_result("query_prometheus", s.prometheus, {}, budget=budget * 2)
        except BudgetExceeded:
            continue
        assert out.tokens == count_value_tokens(out.compact) <= budget * 2


def test_byte_identical_compacts() -> None:
    s = seed_incident()
    for tool in ("query_loki", "query_prometheus", "get_pod_events", "query_tempo", "other"):
        raw = s.raw_for(tool) if tool != "other" else s.alertmanager_webhook
        a = compact_tool_result(tool, raw, s.alert_context("T:1:tools:0"))
        b = compact_tool_result(
            tool, seed_incident().raw_for(tool) if tool != "other" else raw, s.alert_context("T:1:tools:0")
        )
        assert canonical_json(a.compact) == canonical_json(b.compact)
        assert a.raw_sha256 == b.raw_sha256 and a.compactor_version == COMPACTOR_VERSION


def test_stream_order_does_not_change_the_compact() -> None:
    raw = generate_loki(11, lines=200, patterns=4)
    flipped = {**raw, "data": {**raw["data"], "result": list(reversed(raw["data"]["result"]))}}
    a = compact_tool_result("query_loki", raw, {"evidence_id": "x"}, budget=5000)
    b = compact_tool_result("query_loki", flipped, {"evidence_id": "x"}, budget=5000)
    assert canonical_json(a.compact) == canonical_json(b.compact)


def test_evidence_id_from_context_or_raw_hash() -> None:
    raw = {"k": 1}
    assert (
        compact_tool_result("x", raw, {"evidence_id": "T:1:tools:2"}).compact["evidence_id"] == "T:1:tools:2"
    )
    out = compact_tool_result("x", raw, {})
    assert out.compact["evidence_id"] == f"sha256:{out.raw_sha256[:16]}"


def test_tool_mapping_defaults_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert compactor_for("query_loki") == "query_loki"
    assert compactor_for("query_loki_logs") == "query_loki"  # Grafana MCP's name
    assert compactor_for("never_heard_of_it") == "passthrough"
    monkeypatch.setenv("COMPACTOR_TOOL_MAP", '{"my_logs": "query_loki", "bad": "nope"}')
    assert compactor_for("my_logs") == "query_loki"
    assert compactor_for("bad") == "passthrough"
    monkeypatch.setenv("COMPACTOR_BUDGETS", '{"my_logs": 123}')
    assert registry.budget_for("my_logs") == 123
    assert registry.budget_for("query_loki") == DEFAULT_BUDGETS["query_loki"] <= 300


def test_register_tool_rejects_unknown_compactor() -> None:
    with pytest.raises(ValueError):
        registry.register_tool("x", "nope")
