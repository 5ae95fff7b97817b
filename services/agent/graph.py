"""The round's LangGraph graph: investigate (tool loop) -> hypothesis -> judge -> post.

Every node's output becomes an event with a deterministic id `T:R:<node>:<i>`
(tool calls get `schemas.ids.tool_call_id`), so a retried round re-emits the same
ids and the projector ignores the repeats. The round ends with RoundCommitted
listing its ids in order; only then does the projector make them visible.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langgraph.graph import END, START, StateGraph

from schemas.events import (
    AiMessage,
    Claim,
    EventBase,
    JudgeVerdict,
    RecalledIncident,
    RoundCommitted,
    ThreadPost,
    ToolCall,
    canonical_json,
)
from schemas.ids import message_id, tool_call_id
from schemas.tokens import count_tokens, render_for_model
from services.agent import metrics, outcomes
from services.agent.answers import HypothesisAnswer, JudgeAnswer
from services.agent.config import EVIDENCE_TOOL, AgentConfig
from services.agent.judge_input import judge_message
from services.agent.mcp_client import McpToolbox
from services.agent.playbooks import PlaybookPlan
from services.agent.structured import Failed, ask_structured
from services.agent.toolpath import ToolPath
from services.boundary.framing import framed_within
from services.boundary.redact import redact_text
from services.context_render import prompts
from services.context_render.context import LoadedContext, message_tokens, stored_args, to_messages, tool_body
from services.context_render.input_budget import check_input, model_input_tokens, tool_schema_tokens
from services.context_render.preamble import evidence_in_hand, outside_window, pinned_window
from services.context_render.recall_view import concurrent_of_hits, recall_id, recall_message
from services.runtime.emitter import EventEmitter
from services.runtime.logs import about

log = logging.getLogger("agent.graph")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


class RoundState(TypedDict, total=False):
    turn: list[BaseMessage]  # this round's model-visible messages, in order
    emitted: list[str]  # this round's message ids, in order (the marker's list)
    investigate_i: int
    tool_i: int
    pending: list[dict[str, Any]]
    hypothesis: dict[str, Any]
    hypothesis_id: str
    hypothesis_failure: str  # set when the hypothesis answer could not be used
    verdict: dict[str, Any]


@dataclass
class RoundDeps:
    config: AgentConfig
    ctx: LoadedContext
    round: int
    preamble: str
    agent_model: BaseChatModel
    judge_model: BaseChatModel
    agent_model_name: str
    judge_model_name: str
    toolbox: McpToolbox
    tools: ToolPath
    emitter: EventEmitter
    raw_reader: Any  # async (evidence_id) -> raw, used by the judge
    model_inputs: list[tuple[str, int]] = field(default_factory=list)
    playbook: PlaybookPlan | None = None  # an alert's deterministic first calls (services/agent/playbooks.py)
    # An alert's first round recalls other incidents once (services/agent/recall_step.py); None otherwise.
    recall: Callable[[], Awaitable[list[RecalledIncident]]] | None = None
    recalled: list[RecalledIncident] | None = None

    @property
    def thread_ts(self) -> str:
        return self.ctx.thread_ts

    def mid(self, node: str, i: int) -> str:
        return message_id(self.thread_ts, self.round, node, i)


def _now() -> datetime:
    return datetime.now(UTC)


def build_graph(deps: RoundDeps) -> Any:
    """Compile the four-node graph bound to one round's dependencies."""
    context_messages = to_messages(deps.ctx.rows)
    window = pinned_window(deps.ctx)

    def call_key(tool: str, args: dict[str, Any]) -> tuple[str, str]:
        """A call's identity; the pinned window's bounds are implied (re-rendered calls elide them)."""
        return tool, canonical_json(outside_window(args, window))

    earlier = {call_key(tool, args): eid for eid, tool, args in evidence_in_hand(deps.ctx)}
    telemetry = deps.toolbox.tool_specs(exclude=(EVIDENCE_TOOL,))
    investigator = deps.agent_model.bind_tools(telemetry) if telemetry else deps.agent_model

    async def emit(*events: EventBase) -> None:
        await asyncio.to_thread(deps.emitter.send, *events)

    async def ask(model: Any, node: str, messages: list[BaseMessage]) -> AIMessage:
        tools = telemetry if model is investigator else []
        tokens = model_input_tokens(messages, tools)  # the whole input: messages and tool schemas
        schema_tokens = tool_schema_tokens(tools)
        deps.model_inputs.append((node, tokens))
        metrics.MODEL_INPUT_TOKENS.labels(node).observe(tokens)
        name = deps.judge_model_name if model is deps.judge_model else deps.agent_model_name
        check_input(node, name, tokens, deps.config.input_budget_for(name))
        log.info(
            "model call",
            extra=about(
                deps.thread_ts,
                None,
                node=node,
                round=deps.round,
                input_tokens=tokens,
                message_tokens=tokens - schema_tokens,
                tool_schema_tokens=schema_tokens,
            ),
        )
        answer = await model.ainvoke(messages)
        if not isinstance(answer, AIMessage):
            raise TypeError(f"model answered {type(answer).__name__}, not an AIMessage")
        return answer

    async def pause() -> None:
        if deps.config.step_delay > 0:
            await asyncio.sleep(deps.config.step_delay)

    async def playbook_turn(state: RoundState, plan: PlaybookPlan) -> RoundState | None:
        """The playbook's calls as the round's first turn, before any model call (None: nothing new)."""
        calls: list[ToolCall] = []
        for name, planned in plan.calls:
            args = deps.tools.guard.check(name, planned).args  # checked like any call (invariant 13)
            key = call_key(name, args)
            if key in earlier or any(call_key(c.name, c.args) == key for c in calls):
                continue
            calls.append(
                ToolCall(id=tool_call_id(deps.thread_ts, deps.round, name, args), name=name, args=args)
            )
        if not calls:
            return None
        mid = deps.mid("investigate", 0)
        text = f"playbook {plan.playbook}: {len(calls)} calls"
        if plan.skipped:
            text += f" (skipped: {'; '.join(plan.skipped)})"
        await emit(
            AiMessage(
                thread_ts=deps.thread_ts,
                message_id=mid,
                event_time=_now(),
                round=deps.round,
                node="investigate",
                text=text,
                tool_calls=calls,
                model=f"playbook:{plan.playbook}",
            )
        )
        lc_calls = [
            {"name": c.name, "args": stored_args(c.args), "id": c.id, "type": "tool_call"} for c in calls
        ]
        return {
            "turn": [AIMessage(content=text, tool_calls=lc_calls, id=mid)],
            "emitted": [*state.get("emitted", []), mid],
            "investigate_i": 1,
            "pending": [c.model_dump() for c in calls],
        }

    async def investigate(state: RoundState) -> RoundState:
        i = state.get("investigate_i", 0)
        if i == 0 and deps.playbook is not None:
            first = await playbook_turn(state, deps.playbook)
            if first is not None:
                return first
        turn = list(state.get("turn", []))
        system = SystemMessage(content=f"{deps.preamble}\n\n{prompts.INVESTIGATE}")
        answer = await ask(investigator, "investigate", [system, *context_messages, *turn])
        calls: list[ToolCall] = []
        skipped: list[str] = []
        done_now = {
            call_key(c["name"], c["args"]) for m in turn if isinstance(m, AIMessage) for c in m.tool_calls
        }
        checked_notes: list[str] = []
        for call in answer.tool_calls if i < deps.config.max_tool_turns else []:
            checked = deps.tools.guard.check(call["name"], dict(call.get("args") or {}))
            args = checked.args  # clamped to the window and limits; a refusal is answered by tools
            if checked.notes:
                checked_notes.append(f"{call['name']}: {checked.note_text()}")
            key = call_key(call["name"], args)
            if key in earlier:  # already in evidence: never repeat it
                skipped.append(f"{call['name']} -> {earlier[key]}")
                continue
            if key in done_now or any(call_key(c.name, c.args) == key for c in calls):
                continue
            cid = tool_call_id(deps.thread_ts, deps.round, call["name"], args)
            calls.append(ToolCall(id=cid, name=call["name"], args=args))
        text = answer.content if isinstance(answer.content, str) else render_for_model(answer.content)
        if skipped:
            text = f"{text} (already in evidence, not repeated: {'; '.join(skipped)})".strip()
        if answer.invalid_tool_calls:  # arguments that are not JSON: said in the thread, never run
            bad = "; ".join(
                f"{c.get('name')}: {c.get('error') or 'bad arguments'}" for c in answer.invalid_tool_calls
            )
            text = f"{text} (invalid tool calls, not run: {outcomes.clip(bad, 200)})".strip()
        if checked_notes:
            text = f"{text} (checked before running: {'; '.join(checked_notes)})".strip()
        calls, no_room = calls_with_room(deps, text, calls, deps.model_inputs[-1][1])
        if no_room:
            text = f"{text} (not run, no room under the input budget: {'; '.join(no_room)})".strip()
        mid = deps.mid("investigate", i)
        await emit(
            AiMessage(
                thread_ts=deps.thread_ts,
                message_id=mid,
                event_time=_now(),
                round=deps.round,
                node="investigate",
                text=text,
                tool_calls=calls,
                model=deps.agent_model_name,
            )
        )
        lc_calls = [
            {"name": c.name, "args": stored_args(c.args), "id": c.id, "type": "tool_call"} for c in calls
        ]
        turn.append(AIMessage(content=text, tool_calls=lc_calls, id=mid))
        await pause()
        return {
            "turn": turn,
            "emitted": [*state.get("emitted", []), mid],
            "investigate_i": i + 1,
            "pending": [c.model_dump() for c in calls],
        }

    async def tools(state: RoundState) -> RoundState:
        turn = list(state.get("turn", []))
        emitted = list(state.get("emitted", []))
        k = state.get("tool_i", 0)
        for call in state.get("pending", []):
            mid = deps.mid("tools", k)
            outcome = await deps.tools.run(
                deps.thread_ts, deps.round, mid, call["id"], call["name"], call["args"]
            )
            if outcome.message_id.startswith(f"{deps.thread_ts}:{deps.round}:"):
                mid = outcome.message_id  # a retry that planned in another order: the staged row stands
            body = tool_body(mid, f"tool result of {call['name']}", outcome.compact)
            if outcome.note:  # the clamp is said with the result it shaped
                body = f"[checked: {outcome.note}] {body}"
            turn.append(ToolMessage(content=body, tool_call_id=call["id"], id=mid))
            emitted.append(mid)
            k += 1
        await pause()
        return {"turn": turn, "emitted": emitted, "tool_i": k, "pending": []}

    def after_investigate(state: RoundState) -> str:
        return "tools" if state.get("pending") else "hypothesis"

    async def hypothesis(state: RoundState) -> RoundState:
        turn = list(state.get("turn", []))
        if deps.recall is not None and deps.recalled is None:  # after the investigation: a cause to match
            deps.recalled = await deps.recall()
            turn.append(recall_message(recall_id(deps.thread_ts), deps.recalled))
        system = SystemMessage(content=f"{deps.preamble}\n\n{prompts.HYPOTHESIS}")
        result = await ask_structured(
            lambda m, msgs: ask(m, "hypothesis", msgs),
            deps.agent_model,
            [system, *context_messages, *turn],
            HypothesisAnswer,
        )
        mid = deps.mid("hypothesis", 0)
        if isinstance(result, Failed):
            failure: str | None = result.reason
            claims: list[Claim] = []
            summary = outcomes.hypothesis_failed_text(result.reason)
        else:
            failure, summary = None, result.value.summary
            claims = [Claim(**c.model_dump()) for c in result.value.claims]
        await emit(
            AiMessage(
                thread_ts=deps.thread_ts,
                message_id=mid,
                event_time=_now(),
                round=deps.round,
                node="hypothesis",
                text=summary,
                claims=claims,
                model=deps.agent_model_name,
                failure=failure,
                raw_answer=result.text if failure else None,
            )
        )
        told = (
            summary
            if failure
            else canonical_json({"summary": summary, "claims": [c.model_dump() for c in claims]})
        )
        turn.append(AIMessage(content=told, id=mid))
        await pause()
        return {
            "turn": turn,
            "emitted": [*state.get("emitted", []), mid],
            "hypothesis": {"summary": summary, "claims": [c.model_dump() for c in claims]},
            "hypothesis_id": mid,
            **({"hypothesis_failure": failure} if failure else {}),
        }

    async def judge(state: RoundState) -> RoundState:
        if state.get("hypothesis_failure"):
            return await nothing_to_judge(state)
        hyp: dict[str, Any] = state.get("hypothesis") or {"summary": "", "claims": []}
        evidence = evidence_index(deps, state.get("turn", []))
        cited = {e for c in hyp["claims"] for e in c["evidence_ids"]}
        shown = {eid: evidence[eid] for eid in sorted(cited) if eid in evidence}
        raw_checks = []
        raws: dict[str, str] = {}
        for k, claim in enumerate(hyp["claims"]):
            numbers = sorted(set(_NUMBER.findall(claim["text"])))
            haystack = ""
            for eid in claim["evidence_ids"]:
                if eid not in evidence:
                    continue
                if eid not in raws:
                    raws[eid] = render_for_model(await deps.raw_reader(eid))
                haystack += raws[eid] + render_for_model(evidence[eid]["digest"])
            missing = [n for n in numbers if n not in haystack]
            raw_checks.append({"claim": k, "missing": missing})
        payload = {
            "hypothesis_id": state.get("hypothesis_id"),
            "service": deps.ctx.state.service if deps.ctx.state else None,
            "summary": hyp["summary"],
            "claims": hyp["claims"],
            "evidence": shown,
            "raw_checks": raw_checks,
        }
        messages: list[BaseMessage] = [
            SystemMessage(content=prompts.JUDGE),
            judge_message(payload),  # framed as data (services/agent/judge_input.py)
        ]
        result = await ask_structured(
            lambda m, msgs: ask(m, "judge", msgs), deps.judge_model, messages, JudgeAnswer
        )
        if isinstance(result, Failed):
            return await judge_failed(state, result)
        verdict = result.value.model_dump()
        grounded = bool(verdict.get("grounded"))
        questions = [] if grounded else [str(q) for q in verdict.get("questions") or []][:2]
        graded = terse_grades(verdict.get("graded_claims"), hyp["claims"])
        mid = deps.mid("judge", 0)
        await emit(
            JudgeVerdict(
                thread_ts=deps.thread_ts,
                message_id=mid,
                event_time=_now(),
                round=deps.round,
                grounded=grounded,
                questions=questions,
                graded_claims=graded,
                hypothesis_id=str(state.get("hypothesis_id")),
                model=deps.judge_model_name,
            )
        )
        await pause()
        return {
            "emitted": [*state.get("emitted", []), mid],
            "verdict": {"grounded": grounded, "questions": questions, "graded_claims": graded},
        }

    async def record_verdict(state: RoundState, verdict: JudgeVerdict) -> RoundState:
        await emit(verdict)
        await pause()
        return {
            "emitted": [*state.get("emitted", []), verdict.message_id],
            "verdict": {"grounded": False, "questions": [], "graded_claims": [], "failure": verdict.failure},
        }

    async def nothing_to_judge(state: RoundState) -> RoundState:
        """The judge never grades a failed hypothesis: it records that there was nothing to grade."""
        hid = str(state.get("hypothesis_id"))
        return await record_verdict(
            state, outcomes.nothing_judged(deps.mid("judge", 0), deps.round, hid, _now())
        )

    async def judge_failed(state: RoundState, result: Failed) -> RoundState:
        hid, mid = str(state.get("hypothesis_id")), deps.mid("judge", 0)
        verdict = outcomes.judge_failed(mid, deps.round, hid, deps.judge_model_name, result, _now())
        return await record_verdict(state, verdict)

    async def post(state: RoundState) -> RoundState:
        verdict: dict[str, Any] = state.get("verdict") or {"grounded": False, "questions": []}
        hyp: dict[str, Any] = state.get("hypothesis") or {"summary": "", "claims": []}
        kind: Literal["summary", "questions", "failure"]
        if verdict.get("failure"):
            kind = "failure"
            hyp_failure = state.get("hypothesis_failure")
            text = outcomes.failure_post(str(state.get("hypothesis_id")), hyp_failure, verdict["failure"])
        elif verdict["grounded"]:
            kind = "summary"
            # The claims' evidence ids are in the hypothesis; the post names it once.
            lines = [
                hyp["summary"],
                *(f"• {c['text']}" for c in hyp["claims"]),
                f"evidence: {state.get('hypothesis_id')}",
            ]
            text = "\n".join(lines)
        else:
            kind = "questions"
            qs = verdict["questions"] or ["What else should I look at?"]
            text = "Before I conclude, I need answers to:\n" + "\n".join(
                f"{n}. {q}" for n, q in enumerate(qs, 1)
            )
        mid = deps.mid("post", 0)
        emitted = [*state.get("emitted", []), mid]
        await emit(
            ThreadPost(
                thread_ts=deps.thread_ts,
                message_id=mid,
                event_time=_now(),
                round=deps.round,
                kind=kind,
                text=redact_text(text),  # the model's words, as recorded and posted (invariant 13)
                concurrent=concurrent_of_hits(deps.recalled),  # the first post names them (issue 37)
                model=deps.agent_model_name
                if kind == "summary" or state.get("hypothesis_failure")
                else deps.judge_model_name,
            ),
            RoundCommitted(
                thread_ts=deps.thread_ts,
                message_id=deps.mid("commit", 0),
                event_time=_now(),
                round=deps.round,
                message_ids=emitted,
            ),
        )
        return {"emitted": emitted}

    graph = StateGraph(RoundState)
    graph.add_node("investigate", investigate)
    graph.add_node("tools", tools)
    graph.add_node("hypothesis", hypothesis)
    graph.add_node("judge", judge)
    graph.add_node("post", post)
    graph.add_edge(START, "investigate")
    graph.add_conditional_edges(
        "investigate", after_investigate, {"tools": "tools", "hypothesis": "hypothesis"}
    )
    graph.add_edge("tools", "investigate")
    graph.add_edge("hypothesis", "judge")
    graph.add_edge("judge", "post")
    graph.add_edge("post", END)
    return graph.compile()


def terse_grades(graded: Any, claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The judge's grades as recorded: claim by index, a reason only for a failure.

    A grade that names its claim by text (a model that ignored the format) is mapped to the
    claim's index when the text matches one; otherwise it is kept as the model gave it.
    """
    texts = {str(c.get("text")): k for k, c in enumerate(claims)}
    out: list[dict[str, Any]] = []
    for g in graded if isinstance(graded, list) else []:
        if not isinstance(g, dict):
            continue
        claim = g.get("claim")
        if isinstance(claim, str) and claim in texts:
            claim = texts[claim]
        grounded = bool(g.get("grounded"))
        grade: dict[str, Any] = {"claim": claim, "grounded": grounded}
        if not grounded and g.get("reason"):
            grade["reason"] = str(g["reason"])
        out.append(grade)
    return out


def calls_with_room(
    deps: RoundDeps, text: str, calls: list[ToolCall], sent: int
) -> tuple[list[ToolCall], list[str]]:
    """The calls whose results fit under the input budget of the calls that follow, and those that do not.

    The next call is sent what this one was (`sent` tokens), this answer with its calls, and each
    call's result (at most `tool_result_tokens`); the hypothesis call swaps the tool schemas for its
    own prompt, so the larger of the two prompts is held in reserve too.
    """
    budget = deps.config.input_budget_for(deps.agent_model_name)
    reserve = max(0, count_tokens(prompts.HYPOTHESIS) - count_tokens(prompts.INVESTIGATE))
    kept: list[ToolCall] = []
    for call in calls:
        trial = [*kept, call]
        lc = [{"name": c.name, "args": c.args, "id": c.id, "type": "tool_call"} for c in trial]
        answer = message_tokens([AIMessage(content=text, tool_calls=lc)])
        if sent + reserve + answer + len(trial) * deps.config.tool_result_tokens > budget:
            break
        kept.append(call)
    return kept, [c.name for c in calls[len(kept) :]]


def evidence_index(deps: RoundDeps, turn: list[BaseMessage]) -> dict[str, dict[str, Any]]:
    """Every citable id -> its kind (tool name or 'human') and what the model saw of it."""
    calls = {str(c["id"]): str(c["name"]) for r in deps.ctx.rows for c in r.tool_calls()}
    calls.update({str(c["id"]): c["name"] for m in turn if isinstance(m, AIMessage) for c in m.tool_calls})
    index: dict[str, dict[str, Any]] = {}
    for row in deps.ctx.rows:
        if row.role == "tool":
            index[row.id] = {"kind": calls.get(row.tool_call_id or "", "tool"), "digest": row.value}
        elif row.role == "human" and isinstance(row.value, dict):
            index[row.id] = {
                "kind": "human",
                "digest": {"user": row.value.get("user"), "text": row.value.get("text")},
            }
    for m in turn:
        if isinstance(m, ToolMessage) and m.id:
            body = m.content if isinstance(m.content, str) else render_for_model(m.content)
            body = re.sub(r"^(\[checked: [^\]]*\] )?\[evidence [^\]]+\] ", "", framed_within(body))
            try:
                digest: Any = json.loads(body)
            except ValueError:
                digest = body
            index[m.id] = {"kind": calls.get(m.tool_call_id, "tool"), "digest": digest}
    return index
