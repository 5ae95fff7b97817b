"""The call path: budgets enforced (never trusted), determinism, tool mapping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deploy.local.seed import generate_loki, seed_incident
from schemas.events import canonical_json
from schemas.tokens import count_value_tokens
from services.compaction import registry
from services.compaction.fit import fit, omitted_text
from services.compaction.model import BUDGET_FLOOR, Draft, Item
from services.compaction.registry import (
    BUILTIN,
    COMPACTOR_VERSION,
    DEFAULT_BUDGETS,
    BudgetExceeded,
    CompactorConfig,
    compact_tool_result,
    compactor_for,
    load_config,
)
from services.runtime.errors import UserFacingError


@pytest.fixture
def liar() -> CompactorConfig:
    """A compactor whose smallest header is far over any budget: only the guard can answer."""

    def draft(raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft:
        huge = {"blob": "word " * 5000}
        item = Item(id="a", forms=("x",), pinned=True, level="error")
        return Draft(headers=(huge,), section="items", kind="items", unit="things", items=(item,))

    return BUILTIN.with_plugin("liar", draft, budget=400, version="1").with_tools({"liar_tool": "liar"})


def test_over_budget_digest_raises(liar: CompactorConfig) -> None:
    with pytest.raises(BudgetExceeded) as info:
        compact_tool_result("liar_tool", {"anything": 1}, {}, budget=400, config=liar)
    assert info.value.tokens > 400 and info.value.budget == 400


def test_errors_alone_over_the_budget_fold_or_are_counted_never_raise() -> None:
    raw = generate_loki(3, lines=300, patterns=8)  # many distinct FATAL/error lines
    out = compact_tool_result("query_loki", raw, {}, budget=BUDGET_FLOOR)
    assert out.tokens <= BUDGET_FLOOR


def test_tokens_are_counted_by_the_call_path() -> None:
    s = seed_incident()
    for budget in (BUDGET_FLOOR, 150, 200, 250, 300):
        out = compact_tool_result("query_prometheus", s.prometheus, {}, budget=budget)
        assert out.tokens == count_value_tokens(out.compact) <= budget


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
    assert compact_tool_result("x", raw, {"evidence_id": "T:1:tools:2"}).compact["evidence"] == "T:1:tools:2"
    out = compact_tool_result("x", raw, {})
    assert out.compact["evidence"] == f"sha256:{out.raw_sha256[:16]}"
    s = seed_incident()
    for tool in ("query_loki", "query_prometheus", "get_pod_events", "query_tempo"):
        digest = compact_tool_result(tool, s.raw_for(tool), s.alert_context("1773458070.000100:1:tools:0"))
        assert canonical_json(digest.compact).count("1773458070.000100:1:tools:0") == 1  # named once


def test_tool_mapping_defaults_and_env() -> None:
    assert compactor_for("query_loki") == "query_loki"
    assert compactor_for("query_loki_logs") == "query_loki"  # Grafana MCP's name
    assert compactor_for("never_heard_of_it") == "passthrough"
    env = {
        "COMPACTOR_TOOL_MAP": '{"my_logs": "query_loki", "bad": "nope"}',
        "COMPACTOR_BUDGETS": '{"my_logs": 123}',
    }
    config = load_config(env)
    assert config.compactor_for("my_logs") == "query_loki"
    assert config.compactor_for("bad") == "passthrough"
    assert config.budget_for("my_logs") == 123
    assert config.budget_for("query_loki") == DEFAULT_BUDGETS["query_loki"] <= 300
    assert compactor_for("my_logs") == "passthrough"  # the built-in value is untouched


def test_the_config_is_read_once_not_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Built once at start: a later change of the environment changes nothing, and the value is read-only."""
    monkeypatch.setenv("COMPACTOR_BUDGETS", '{"query_loki": 200}')
    config = load_config()
    monkeypatch.setenv("COMPACTOR_BUDGETS", '{"query_loki": 999}')
    monkeypatch.setenv("COMPACTOR_TOOL_MAP", '{"my_logs": "query_loki"}')
    assert config.budget_for("query_loki") == 200 and config.compactor_for("my_logs") == "passthrough"
    assert registry.budget_for("query_loki") == DEFAULT_BUDGETS["query_loki"]  # the built-ins ignore it
    with pytest.raises(TypeError):
        config.tools["my_logs"] = "query_loki"  # type: ignore[index]
    with pytest.raises(TypeError):
        registry.COMPACTORS["x"] = registry.COMPACTORS["passthrough"]  # type: ignore[index]


def test_the_agent_reads_the_compactors_tool_map() -> None:
    """One map: for every tool, the name the agent stamps on its raw is fed to the compactor the
    compactor itself would choose, with or without a deployment's COMPACTOR_TOOL_MAP."""
    from services.agent.config import build_config
    from services.runtime.kafka_client import KafkaClient

    for env in ({}, {"COMPACTOR_TOOL_MAP": '{"my_logs": "query_loki", "query_loki_logs": "passthrough"}'}):
        agent = build_config(
            {}, env=env, kafka=KafkaClient.plaintext("unused:9092"), database_url="postgresql://unused"
        )
        compactor = load_config(env)
        assert dict(agent.tool_compactors) == dict(compactor.tools)
        for tool in [*compactor.tools, "never_heard_of_it"]:
            assert compactor.compactor_for(agent.compactor_for(tool)) == compactor.compactor_for(tool), tool


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"COMPACTOR_TOOL_MAP": "[1]"}, "COMPACTOR_TOOL_MAP is not a JSON object"),
        (
            {"COMPACTOR_TOOL_MAP": '{"my_logs": 3}'},
            "COMPACTOR_TOOL_MAP['my_logs']: expected a compactor name",
        ),
        (
            {"COMPACTOR_BUDGETS": '{"query_loki": 0}'},
            "COMPACTOR_BUDGETS['query_loki']: expected a positive int",
        ),
        (
            {"COMPACTOR_BUDGETS": '{"query_loki": "300"}'},
            "COMPACTOR_BUDGETS['query_loki']: expected a positive",
        ),
        ({"COMPACTOR_BUDGETS": "{nope"}, "COMPACTOR_BUDGETS is not a JSON object: Expecting"),
    ],
)
def test_a_bad_setting_is_one_clear_error_at_start(env: dict[str, str], message: str) -> None:
    with pytest.raises(UserFacingError, match=message.replace("[", r"\[")):
        load_config(env)


# --- the fitter, on drafts of any shape --------------------------------------------------


_levels = st.sampled_from(["debug", "info", "warn", "error", "fatal"])
_item = st.tuples(
    st.lists(st.text(alphabet="abc xyz0123456789…", min_size=1, max_size=60), min_size=1, max_size=4),
    st.integers(min_value=1, max_value=10_000),
    _levels,
    st.integers(min_value=1, max_value=30),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_item, max_size=60), st.integers(min_value=BUDGET_FLOOR, max_value=800))
def test_fit_keeps_a_prefix_errors_first_and_counts_the_rest_exactly(
    specs: list[tuple[list[str], int, str, int]], budget: int
) -> None:
    items = [
        Item(
            id=f"i{k}",
            forms=tuple(f"{n}× {f}" for f in sorted(forms, key=len, reverse=True)),
            n=n,
            level=lv,
            pinned=lv in ("error", "fatal"),
            members=m,
        )
        for k, (forms, n, lv, m) in enumerate(specs)
    ]
    order = [*(i for i in items if i.pinned), *(i for i in items if not i.pinned)]
    headers = (
        {"evidence": "1773458070.000100:1:tools:0", "summary": "s" * 200},
        {"evidence": "1773458070.000100:1:tools:0"},
    )
    draft = Draft(headers=headers, section="items", kind="items", unit="units", items=tuple(items))
    fitted = fit(draft, order, budget)
    assert fitted is not None and fitted.tokens == count_value_tokens(fitted.compact) <= budget
    shown = fitted.compact.get("items", [])
    assert len(shown) == fitted.kept
    for item, form in zip(order, shown, strict=False):
        assert form in item.forms  # a prefix of the order, each at one of its own forms
    left = order[fitted.kept :]
    assert fitted.compact.get("omitted") == omitted_text(left, "items", "units")
    if any(i.pinned for i in left):
        assert all(i.pinned for i in order[: fitted.kept])  # no error dropped while less is shown
