"""Pure agent logic: repairing dangling tool calls, the preamble, the local model, re-render policy."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from schemas.tokens import count_tokens, count_value_tokens, render_for_model
from services.agent.judge_evidence import terse_grades
from services.agent.round_state import ClaimDraft
from services.agent.stand_in_model import MODEL_NAME, DeterministicStandInModel
from services.context_render import prompts
from services.context_render.context import (
    ContextRow,
    IncidentState,
    LoadedContext,
    message_tokens,
    repair_dangling_tool_calls,
)
from services.context_render.input_budget import model_input_tokens
from services.context_render.judge_input import judge_message
from services.context_render.preamble import Trigger, render_preamble
from services.context_render.rerender import counted_sources, plan_rerenders

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
    outputs = [DeterministicStandInModel().bind(tools=TOOLS).invoke(_investigate_input()) for _ in range(3)]
    assert all(isinstance(o, AIMessage) for o in outputs)
    first = outputs[0]
    assert isinstance(first, AIMessage)
    assert [c["name"] for c in first.tool_calls] == ["query_loki", "query_prometheus", "get_pod_events"]
    assert all(c["args"]["start"] == "2026-03-14T03:00:00+00:00" for c in first.tool_calls)
    for o in outputs[1:]:
        assert isinstance(o, AIMessage)
        assert o.content == first.content and o.tool_calls == first.tool_calls
    assert MODEL_NAME == "local-deterministic"
    assert DeterministicStandInModel()._llm_type == "local-deterministic"


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
    a = DeterministicStandInModel().invoke(messages)
    b = DeterministicStandInModel().invoke(messages)
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
    plan = plan_rerenders(rows, 4, budget=10, now=NOW)
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


# --- terse outputs: the judge grades by index, the preamble resolves them -----------------------


def _judge_messages(claims: list[dict[str, Any]], evidence: dict[str, Any]) -> list[BaseMessage]:
    payload = {
        "hypothesis_id": f"{T}:2:hypothesis:0",
        "service": "checkout-api",
        "summary": "s",
        "claims": claims,
        "evidence": evidence,
        "raw_checks": [{"claim": k, "missing": []} for k in range(len(claims))],
    }
    return [SystemMessage(content=prompts.JUDGE), judge_message(payload)]


def test_local_judge_grades_by_index_with_a_reason_only_for_a_failure() -> None:
    tools, human = f"{T}:1:tools:0", f"{T}:-:human:1773458412.000200"
    evidence = {tools: {"kind": "query_loki", "digest": {}}, human: {"kind": "human", "digest": {}}}
    fact = {"text": "198x 'FATAL ERROR'", "evidence_ids": [tools]}
    cause = {"text": "cause: checkout-api ran out of memory", "evidence_ids": [tools, human]}
    answer = DeterministicStandInModel().invoke(_judge_messages([fact, cause], evidence))
    verdict = prompts.parse_json_answer(str(answer.content))
    # the cause cites what changed (a human) but no trace: rejected, with that one reason
    assert verdict["grounded"] is False
    assert verdict["graded_claims"] == [
        {"claim": 0, "grounded": True, "reason": None},  # null: the strict answer schema requires the key
        {"claim": 1, "grounded": False, "reason": "no trace cited"},
    ]
    assert len(verdict["questions"]) == 1 and "span" in verdict["questions"][0]
    trace = f"{T}:2:tools:0"
    evidence[trace] = {"kind": "query_tempo", "digest": {}}
    grounded = {**cause, "evidence_ids": [trace, human]}
    answer = DeterministicStandInModel().invoke(_judge_messages([fact, grounded], evidence))
    verdict = prompts.parse_json_answer(str(answer.content))
    assert verdict == {
        "grounded": True,
        "graded_claims": [
            {"claim": 0, "grounded": True, "reason": None},
            {"claim": 1, "grounded": True, "reason": None},
        ],
        "questions": [],
    }


def test_terse_grades_map_a_claim_quoted_by_text_to_its_index() -> None:
    claims = [ClaimDraft(text="a", evidence_ids=[]), ClaimDraft(text="b", evidence_ids=[])]
    graded = [
        {"claim": "b", "grounded": True, "reason": "fine", "evidence_ids": ["x"]},
        {"claim": 0, "grounded": False, "reason": "no trace"},
        "junk",
    ]
    assert terse_grades(graded, claims) == [
        {"claim": 1, "grounded": True},
        {"claim": 0, "grounded": False, "reason": "no trace"},
    ]


def _indexed_thread(hypothesis_value: dict[str, Any]) -> LoadedContext:
    ctx = thread_after_round_1()
    hyp = row(f"{T}:1:hypothesis:0", "ai", hypothesis_value)
    judge = row(
        f"{T}:1:judge:0",
        "judge",
        {
            "grounded": False,
            "questions": ["Which span?", "What changed?"],
            "graded_claims": [
                {"claim": 0, "grounded": True},
                {"claim": 1, "grounded": False, "reason": "no trace cited"},
            ],
            "hypothesis_id": hyp.id,
        },
    )
    rows = tuple(r for r in ctx.rows if r.role != "judge")
    return LoadedContext(T, (*rows[:3], hyp, judge, *rows[3:]), ctx.state)


def test_preamble_resolves_index_grades_from_the_hypothesis_in_full_or_re_rendered() -> None:
    trigger = Trigger("mention", f"{T}:-:human:1773472870.000600", "U04CAROL")
    full = {
        "text": "s",
        "claims": [
            {"text": "OOMKilled 3 times", "evidence_ids": [f"{T}:1:tools:0"]},
            {"text": "cause: a leak", "evidence_ids": [f"{T}:1:tools:0"]},
        ],
    }
    text = render_preamble(_indexed_thread(full), 2, trigger, NOW)
    assert f"Established so far (with evidence ids): OOMKilled 3 times [{T}:1:tools:0]\n" in text
    assert "cause: a leak" not in text
    cut = {"re_rendered": "headline", "headline": "s", "evidence_ids": [f"{T}:1:tools:0"]}
    text = render_preamble(_indexed_thread(cut), 2, trigger, NOW)
    assert f"Established so far (with evidence ids): claims 0 of {T}:1:hypothesis:0 [{T}:1:tools:0]\n" in text


# --- re-rendering keeps the calls, and the pinned window is implied -------------------------------


def test_rerendered_calls_elide_the_pinned_window_and_keep_everything_else() -> None:
    window = {"start": "2026-03-14T02:44:30+00:00", "end": "2026-03-14T03:44:30+00:00"}
    alert = row(
        f"{T}:-:alert:0",
        "alert",
        {"alertname": "A", "window_start": "2026-03-14T02:44:30Z", "window_end": "2026-03-14T03:44:30Z"},
    )
    calls = ai_calls(
        f"{T}:1:investigate:0",
        ("c1", "query_loki", {"query": '{namespace="shop"}', "limit": 5000, **window}),
        ("c2", "get_pod_events", {"namespace": "shop"}),
    )
    result = row(f"{T}:1:tools:0", "tool", {"summary": "x " * 300}, call="c1")
    plan = plan_rerenders([alert, calls, result], 2, budget=1, now=NOW)
    (ai,) = [e for e in plan.events if e.target_id == calls.id]
    assert ai.policy == "headline" and ai.compact["evidence_id"] == calls.id
    assert ai.compact["tool_calls"] == [
        {"id": "c1", "name": "query_loki", "args": {"query": '{namespace="shop"}', "limit": 5000}},
        {"id": "c2", "name": "get_pod_events", "args": {"namespace": "shop"}},
    ]
    assert "alert window" in ai.compact["headline"]
    assert ai.tokens < calls.tokens


def test_a_previous_hypothesis_headline_keeps_the_evidence_ids_it_rests_on() -> None:
    hyp = row(
        f"{T}:1:hypothesis:0",
        "ai",
        {
            "text": "svc A: 2 claims",
            "claims": [
                {"text": "x " * 60, "evidence_ids": ["e1", "e2"]},
                {"text": "y", "evidence_ids": ["e2"]},
            ],
        },
    )
    (event,) = plan_rerenders([hyp], 2, budget=1, now=NOW).events
    assert event.compact == {
        "re_rendered": "headline",
        "evidence_id": hyp.id,
        "headline": "svc A: 2 claims",
        "evidence_ids": ["e1", "e2"],
    }
    (older,) = plan_rerenders([hyp], 3, budget=1, now=NOW).events
    assert older.policy == "one_line" and "evidence_ids" not in older.compact


# --- what a model call costs: the messages and the tool schemas -------------------------------


def test_model_input_counts_the_tool_schemas_sent_beside_the_messages() -> None:
    messages = _investigate_input()
    bare = model_input_tokens(messages, [])
    with_tools = model_input_tokens(messages, TOOLS)
    assert bare == message_tokens(messages) > 0
    assert with_tools == bare + count_tokens(render_for_model(TOOLS)) > bare


def test_a_headline_shrinks_to_its_own_line_keeping_calls_and_without_repeating_itself() -> None:
    fact = (
        "198× 03:12:44–03:14:01 [app=checkout-api] "
        "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory"
    )
    noise = [f"{20 + i}× 03:00:00–03:10:00 GET /healthz 200 in {i} ms " * 3 for i in range(10)]
    loki = {"evidence": f"{T}:1:tools:0", "summary": "412 lines", "patterns": [fact, *noise]}  # errors first
    rows = [
        ai_calls(f"{T}:1:investigate:0", ("c1", "query_loki", {"query": "q"})),
        row(f"{T}:1:tools:0", "tool", loki, call="c1"),
        row(
            f"{T}:1:hypothesis:0",
            "ai",
            {"text": "svc: 1 claim " + "x " * 50, "claims": [{"text": "c " * 80, "evidence_ids": ["e"]}]},
        ),
    ]
    first = {e.target_id: e for e in plan_rerenders(rows, 2, budget=1, now=NOW).events}
    assert (
        first[f"{T}:1:tools:0"]
        .compact["headline"]
        .startswith("198× 03:12:44–03:14:01 [app=checkout-api] FATAL ERROR")  # the framing names the tool
    )
    cut = [row(r.id, r.role, first[r.id].compact, call=r.tool_call_id) if r.id in first else r for r in rows]
    # a round later, round 1's headlines become one line each, from their own text
    second = {e.target_id: e for e in plan_rerenders(cut, 3, budget=1, now=NOW).events}
    tool = second[f"{T}:1:tools:0"].compact
    assert tool["re_rendered"] == "one_line" and tool["line"].count("198×") == 1
    hyp = second[f"{T}:1:hypothesis:0"].compact
    assert hyp["line"].startswith("svc: 1 claim") and "evidence_ids" not in hyp
    assert all(second[k].tokens < first[k].tokens for k in second)


def test_a_headline_counts_the_sources_of_its_fact_and_leaves_their_names_to_the_evidence() -> None:
    fact = "198× 03:12:44–03:14:01 [2 of 4 pods: checkout-api-7d9f8b6c5-{m8p3z,x2k4q}] FATAL ERROR: JS heap"
    rows = [
        ai_calls(f"{T}:1:investigate:0", ("c1", "query_loki", {"query": "q"})),
        row(f"{T}:1:tools:0", "tool", {"summary": "412 lines", "patterns": [fact, "9× x " * 40]}, call="c1"),
    ]
    plan = plan_rerenders(rows, 2, budget=1, now=NOW)
    headline = next(e for e in plan.events if e.target_id == f"{T}:1:tools:0").compact["headline"]
    assert headline == "198× 03:12:44–03:14:01 [2 of 4 pods] FATAL ERROR: JS heap"
    # the other parts of an attribution stay; a source named alone is the fact itself
    assert (
        counted_sources("5× [app=kafka; 2 of 3 pods: kafka-0, kafka-2] E") == "5× [app=kafka; 2 of 3 pods] E"
    )
    assert counted_sources("5× [pod api-0 only] E") == "5× [pod api-0 only] E"
    assert counted_sources("5× [app=api] E: a: b") == "5× [app=api] E: a: b"
