"""Pure agent logic: repairing dangling tool calls, the preamble, the local model, re-render policy."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from schemas.tokens import count_value_tokens
from services.agent import prompts
from services.agent.context import ContextRow, IncidentState, LoadedContext, repair_dangling_tool_calls
from services.agent.local_model import MODEL_NAME, LocalDeterministicModel
from services.agent.preamble import Trigger, render_preamble
from services.agent.rerender import plan_rerenders

T = "1773458070.000100"
NOW = datetime(2026, 3, 14, 4, 30, tzinfo=UTC)


def row(rid: str, role: str, value: Any, call: str | None = None, tokens: int | None = None) -> ContextRow:
    return ContextRow(rid, role, call, value, count_value_tokens(value) if tokens is None else tokens)


def ai_calls(rid: str, *calls: tuple[str, str, dict[str, Any]]) -> ContextRow:
    value = {"text": "querying", "tool_calls": [{"id": c, "name": n, "args": a} for c, n, a in calls]}
    return row(rid, "ai", value)


# --- repair_dangling_tool_calls ---------------------------------------------------------------


def test_repair_drops_ai_turn_with_a_missing_result_and_its_partial_answers() -> None:
    alert = row(f"{T}:-:alert:0", "alert", {"alertname": "KubePodOOMKilled"})
    whole = ai_calls(f"{T}:1:investigate:0", ("c1", "query_loki", {}))
    whole_result = row(f"{T}:1:tools:0", "tool", {"summary": "loki"}, call="c1")
    dangling = ai_calls(f"{T}:2:investigate:0", ("c2", "query_tempo", {}), ("c3", "get_pod_events", {}))
    partial = row(f"{T}:2:tools:0", "tool", {"summary": "tempo"}, call="c2")
    human = row(f"{T}:-:human:1", "human", {"user": "U1", "text": "hi"})
    kept = repair_dangling_tool_calls([alert, whole, whole_result, dangling, partial, human])
    assert [r.id for r in kept] == [alert.id, whole.id, whole_result.id, human.id]
    # never fabricates: every kept tool row is one that was in the input, nothing new appears
    assert {r.id for r in kept} <= {alert.id, whole.id, whole_result.id, dangling.id, partial.id, human.id}
    assert sum(r.role == "tool" for r in kept) == 1


def test_repair_keeps_complete_turns_and_drops_orphan_results() -> None:
    turn = ai_calls(f"{T}:1:investigate:0", ("c1", "query_loki", {}), ("c2", "query_prometheus", {}))
    r1 = row(f"{T}:1:tools:0", "tool", {"s": 1}, call="c1")
    r2 = row(f"{T}:1:tools:1", "tool", {"s": 2}, call="c2")
    orphan = row(f"{T}:1:tools:9", "tool", {"s": 9}, call="c-unknown")
    assert repair_dangling_tool_calls([turn, r1, r2, orphan]) == [turn, r1, r2]


# --- the preamble -----------------------------------------------------------------------------


def thread_after_round_1() -> LoadedContext:
    rows = (
        row(
            f"{T}:-:alert:0",
            "alert",
            {"alertname": "KubePodOOMKilled", "window_start": "a", "window_end": "b"},
        ),
        ai_calls(f"{T}:1:investigate:0", ("c1", "query_loki", {"query": '{namespace="shop"}'})),
        row(f"{T}:1:tools:0", "tool", {"summary": "412 lines"}, call="c1"),
        row(
            f"{T}:1:judge:0",
            "judge",
            {
                "grounded": False,
                "questions": ["What changed in 3.14.0?", "Where does the memory go on a request?"],
                "graded_claims": [
                    {"claim": "OOMKilled 3 times", "evidence_ids": [f"{T}:1:tools:0"], "grounded": True},
                    {"claim": "the cache leaks", "evidence_ids": [], "grounded": False},
                ],
            },
        ),
        row(
            f"{T}:-:human:1773472870.000600", "human", {"user": "U04CAROL", "text": "trace?", "mention": True}
        ),
    )
    state = IncidentState(
        "checkout-api",
        "investigating",
        datetime(2026, 3, 14, 3, 0, tzinfo=UTC),
        datetime(2026, 3, 14, 3, 20, tzinfo=UTC),
        1,
        datetime(2026, 3, 14, 3, 14, 30, tzinfo=UTC),
    )
    return LoadedContext(T, rows, state)


def test_preamble_has_every_item() -> None:
    trigger = Trigger("mention", f"{T}:-:human:1773472870.000600", "U04CAROL")
    text = render_preamble(thread_after_round_1(), 2, trigger, NOW)
    assert "began 1h 15m ago" in text
    assert "2026-03-14T03:00:00+00:00 .. 2026-03-14T03:20:00+00:00" in text
    assert "Do not query outside it" in text
    assert f"OOMKilled 3 times [{T}:1:tools:0]" in text  # established, with its evidence id
    assert "the cache leaks" not in text  # an ungrounded claim is not established
    assert f"last rejection ({T}:1:judge:0)" in text
    assert "Open questions: What changed in 3.14.0? | Where does the memory go on a request?" in text
    assert f"U04CAROL just tagged you ({T}:-:human:1773472870.000600)" in text
    assert "Do not repeat tool calls" in text and "query_loki" in text and f"-> {T}:1:tools:0" in text
    assert render_preamble(thread_after_round_1(), 2, trigger, NOW) == text  # pure


def test_preamble_without_rejection_has_no_open_questions() -> None:
    ctx = thread_after_round_1()
    rows = tuple(r for r in ctx.rows if r.role != "judge")
    text = render_preamble(LoadedContext(T, rows, ctx.state), 1, Trigger("alert", f"{T}:-:alert:0"), NOW)
    assert "Open questions: none." in text and "rejection" not in text
    assert "The alert just opened this thread" in text


# --- the local deterministic model ------------------------------------------------------------


def _investigate_input() -> list[BaseMessage]:
    alert = (
        "ALERT KubePodOOMKilled (firing) for service checkout-api\n"
        "window 2026-03-14T03:00:00+00:00 .. 2026-03-14T03:20:00+00:00\n"
        'labels {"container":"checkout-api","namespace":"shop"}'
    )
    window = "Alert window: 2026-03-14T03:00:00+00:00 .. 2026-03-14T03:20:00+00:00 (fixed)."
    return [
        SystemMessage(content=window + "\n" + prompts.INVESTIGATE),
        HumanMessage(content=alert, id=f"{T}:-:alert:0"),
    ]


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": name,
            "parameters": {
                "type": "object",
                "properties": {k: {"type": "string"} for k in ("query", "start", "end", "namespace")},
                "required": ["start", "end"],
            },
        },
    }
    for name in ("query_loki", "query_prometheus", "get_pod_events", "query_tempo")
]


def test_local_model_is_deterministic_and_plans_three_calls_from_the_alert() -> None:
    outputs = [LocalDeterministicModel().bind(tools=TOOLS).invoke(_investigate_input()) for _ in range(3)]
    assert all(isinstance(o, AIMessage) for o in outputs)
    first = outputs[0]
    assert isinstance(first, AIMessage)
    assert [c["name"] for c in first.tool_calls] == ["query_loki", "query_prometheus", "get_pod_events"]
    assert all(c["args"]["start"] == "2026-03-14T03:00:00+00:00" for c in first.tool_calls)
    for o in outputs[1:]:
        assert isinstance(o, AIMessage)
        assert o.content == first.content and o.tool_calls == first.tool_calls
    assert MODEL_NAME == "local-deterministic"
    assert LocalDeterministicModel()._llm_type == "local-deterministic"


def test_local_hypothesis_cites_evidence_and_is_stable() -> None:
    digest = '{"summary":"OOMKilled 3 times","facts":["3 OOMKilled events"]}'
    messages: list[BaseMessage] = [
        SystemMessage(content=prompts.HYPOTHESIS),
        *_investigate_input()[1:],
        AIMessage(
            content="",
            tool_calls=[{"name": "get_pod_events", "args": {}, "id": "c1"}],
            id=f"{T}:1:investigate:0",
        ),
        ToolMessage(content=f"[evidence {T}:1:tools:0] {digest}", tool_call_id="c1", id=f"{T}:1:tools:0"),
    ]
    a = LocalDeterministicModel().invoke(messages)
    b = LocalDeterministicModel().invoke(messages)
    assert a.content == b.content
    parsed = prompts.parse_json_answer(str(a.content))
    cited = {e for c in parsed["claims"] for e in c["evidence_ids"]}
    assert cited and cited <= {f"{T}:1:tools:0", f"{T}:-:alert:0"}


# --- re-render policy (invariant 10) ----------------------------------------------------------


def long_thread() -> list[ContextRow]:
    big = {"summary": "digest", "facts": [f"fact {i}: " + "x " * 40 for i in range(20)]}
    rows = [row(f"{T}:-:alert:0", "alert", {"alertname": "A", "window_start": "a", "window_end": "b"})]
    for r in (1, 2, 3):
        rows += [
            ai_calls(f"{T}:{r}:investigate:0", (f"c{r}", "query_loki", {"q": r})),
            row(f"{T}:{r}:tools:0", "tool", big, call=f"c{r}"),
            row(f"{T}:{r}:hypothesis:0", "ai", {"summary": "s " * 80, "claims": [{"text": "claim " * 30}]}),
            row(f"{T}:{r}:judge:0", "judge", {"grounded": False, "questions": ["q1?", "q2?"]}),
            row(f"{T}:-:human:{r}", "human", {"user": "U", "text": "long human text " * 30}),
        ]
    return rows


def test_rerender_policy_by_round_and_untouchables() -> None:
    rows = long_thread()
    tool_names = {r.id: "query_loki" for r in rows if r.role == "tool"}
    plan = plan_rerenders(rows, 4, budget=10, now=NOW, tool_names=tool_names)
    by_target = {e.target_id: e for e in plan.events}
    # the previous round (3) gets a headline with its evidence id; older rounds one line
    assert by_target[f"{T}:3:tools:0"].policy == "headline"
    assert by_target[f"{T}:3:tools:0"].compact["evidence_id"] == f"{T}:3:tools:0"
    assert by_target[f"{T}:1:tools:0"].policy == "one_line"
    assert by_target[f"{T}:2:hypothesis:0"].policy == "one_line"
    # an ai turn that is re-rendered keeps its tool calls (the tool rows still answer them)
    for e in plan.events:
        if ":investigate:" in e.target_id:
            assert e.compact["tool_calls"][0]["name"] == "query_loki"
    # never touched: the alert, human turns, judge rejections
    untouched = {r.id for r in rows if r.role in ("alert", "human", "judge")}
    assert not untouched & set(by_target)
    assert plan.tokens_after < plan.tokens_before
    assert all(e.tokens < next(r.tokens for r in rows if r.id == e.target_id) for e in plan.events)


def test_rerender_leaves_the_current_round_full_and_plans_nothing_under_budget() -> None:
    rows = long_thread()
    plan = plan_rerenders(rows, 3, budget=10, now=NOW)
    assert not any(e.target_id.startswith(f"{T}:3:") for e in plan.events)
    assert plan_rerenders(rows, 4, budget=10**6, now=NOW).events == ()


def test_rerender_is_stable_for_a_retry() -> None:
    rows = long_thread()
    a = plan_rerenders(rows, 4, budget=10, now=NOW)
    b = plan_rerenders(rows, 4, budget=10, now=NOW)
    assert [(e.message_id, e.compact) for e in a.events] == [(e.message_id, e.compact) for e in b.events]
