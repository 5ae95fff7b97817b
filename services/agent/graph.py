"""The round's LangGraph graph: investigate (tool loop) -> hypothesis -> judge -> post.

Every node's output becomes an event with a deterministic id `T:R:<node>:<i>`
(tool calls get `schemas.ids.tool_call_id`), so a retried round re-emits the same
ids and the projector ignores the repeats. The round ends with RoundCommitted
listing its ids in order; only then does the projector make them visible.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable
from langgraph.graph import END, START, StateGraph

from schemas.events import (
    AiMessage,
    Claim,
    EventBase,
    JudgeVerdict,
    MadeFor,
    RoundCommitted,
    ThreadPost,
    ToolCall,
    canonical_json,
)
from schemas.ids import tool_call_id
from schemas.tokens import count_tokens, render_for_model
from services.agent import metrics, outcomes
from services.agent.answers import HypothesisAnswer, JudgeAnswer
from services.agent.config import EVIDENCE_TOOL
from services.agent.judge_evidence import claim_numbers, terse_grades
from services.agent.playbooks import PlaybookPlan
from services.agent.round_state import ClaimDraft, HypothesisDraft, RoundDeps, RoundState, VerdictDraft
from services.agent.sent_calls import SentLog, response_format_of
from services.agent.structured import Failed, ask_structured, format_reserve
from services.boundary.redact import redact_text
from services.context_render import prompts
from services.context_render.context import message_tokens, stored_args, to_messages, tool_body
from services.context_render.input_budget import (
    check_input,
    model_input_tokens,
    response_format_tokens,
    tool_schema_tokens,
)
from services.context_render.judge_input import evidence_index, judge_message, judge_payload
from services.context_render.judge_shape import judge_input_tokens, shape_judge_payload
from services.context_render.preamble import evidence_in_hand, outside_window, pinned_window
from services.context_render.recall_view import concurrent_of_hits, recall_id, recall_message
from services.runtime.logs import about

log = logging.getLogger("agent.graph")
_NO_HYPOTHESIS: HypothesisDraft = {"summary": "", "claims": []}
_NO_VERDICT: VerdictDraft = {"grounded": False, "questions": [], "graded_claims": []}


def _now() -> datetime:
    return datetime.now(UTC)


def _lc_calls(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """Calls as the model is shown them on the next turn (stored args: the window's bounds elided)."""
    return [{"name": c.name, "args": stored_args(c.args), "id": c.id, "type": "tool_call"} for c in calls]


def _joined(text: str, label: str, items: list[str]) -> str:
    """The turn's text with a parenthesised note the thread shows (nothing when there is nothing to say)."""
    return f"{text} ({label}: {'; '.join(items)})".strip() if items else text


class RoundGraph:
    """One round's graph bound to its dependencies: one method per node, the state typed.

    Built once per round (the context, the pinned window and the evidence already in hand are read
    once here), then `run` invokes the compiled graph and returns its final state.
    """

    def __init__(self, deps: RoundDeps) -> None:
        self.deps = deps
        self.context_messages = to_messages(deps.ctx.rows)
        self.window = pinned_window(deps.ctx)
        self.earlier = {self.call_key(tool, args): eid for eid, tool, args in evidence_in_hand(deps.ctx)}
        self.telemetry = deps.toolbox.tool_specs(exclude=(EVIDENCE_TOOL,))
        self.telemetry_tokens = tool_schema_tokens(self.telemetry)  # fixed for the round: counted once
        self.investigator: Runnable[Any, BaseMessage] = (
            deps.agent_model.bind_tools(self.telemetry) if self.telemetry else deps.agent_model
        )
        self.sent = SentLog()  # each call's input beside the rows, on the row it produced

    def compile(self) -> Any:
        """The compiled StateGraph: investigate loops through tools, then hypothesis, judge, post."""
        graph = StateGraph(RoundState)
        graph.add_node("investigate", self.investigate)
        graph.add_node("tools", self.tools)
        graph.add_node("hypothesis", self.hypothesis)
        graph.add_node("judge", self.judge)
        graph.add_node("post", self.post)
        graph.add_edge(START, "investigate")
        graph.add_conditional_edges(
            "investigate", self.after_investigate, {"tools": "tools", "hypothesis": "hypothesis"}
        )
        graph.add_edge("tools", "investigate")
        graph.add_edge("hypothesis", "judge")
        graph.add_edge("judge", "post")
        graph.add_edge("post", END)
        return graph.compile()

    async def run(self) -> RoundState:
        """Run the round to its post; the limit allows every tool turn the config allows, and no loop."""
        limit = 4 * self.deps.config.max_tool_turns + 10
        final: RoundState = await self.compile().ainvoke({}, config={"recursion_limit": limit})
        return final

    # -- shared steps ------------------------------------------------------------------------------

    def call_key(self, tool: str, args: dict[str, Any]) -> tuple[str, str]:
        """A call's identity; the pinned window's bounds are implied (re-rendered calls elide them)."""
        return tool, canonical_json(outside_window(args, self.window))

    async def emit(self, *events: EventBase) -> None:
        """Send events off the event loop: the producer's flush blocks."""
        await asyncio.to_thread(self.deps.emitter.send, *events)

    async def emit_ai(
        self,
        node: Literal["investigate", "hypothesis"],
        i: int,
        text: str,
        model: str,
        *,
        calls: Sequence[ToolCall] = (),
        claims: Sequence[Claim] = (),
        failure: str | None = None,
        raw_answer: str | None = None,
    ) -> str:
        """The one place an AiMessage is built and sent, so every model turn is recorded alike."""
        envelope = self.deps.envelope(node, i)
        await self.emit(
            AiMessage(
                **envelope,
                node=node,
                text=text,
                tool_calls=list(calls),
                model=model,
                claims=list(claims),
                failure=failure,
                raw_answer=raw_answer,
                sent=self.sent.take(),
            )
        )
        return envelope["message_id"]

    async def ask(self, model: Any, node: str, messages: list[BaseMessage]) -> AIMessage:
        """One model call, its whole input (messages and tool schemas) counted and checked first."""
        deps = self.deps
        tools = self.telemetry if model is self.investigator else []
        response_format = response_format_of(model)
        tokens = model_input_tokens(messages, tools, response_format)
        schema_tokens = self.telemetry_tokens if tools else 0
        format_tokens = response_format_tokens(response_format)
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
                message_tokens=tokens - schema_tokens - format_tokens,
                tool_schema_tokens=schema_tokens,
                response_format_tokens=format_tokens,
            ),
        )
        answer = await self.sent.invoke(model, messages, tools)
        if not isinstance(answer, AIMessage):
            raise TypeError(f"model answered {type(answer).__name__}, not an AIMessage")
        return answer

    async def pause(self) -> None:
        """The configured pause between steps (a demo's pace; zero in production)."""
        if self.deps.config.step_delay > 0:
            await asyncio.sleep(self.deps.config.step_delay)

    # -- investigate and tools ---------------------------------------------------------------------

    async def investigate(self, state: RoundState) -> RoundState:
        """A model turn that may call tools; an alert's first turn is its playbook, without a model."""
        deps, i = self.deps, state.get("investigate_i", 0)
        if i == 0 and deps.playbook is not None:
            first = await self.playbook_turn(state, deps.playbook)
            if first is not None:
                return first
        turn = list(state.get("turn", []))
        system = SystemMessage(content=f"{deps.preamble}\n\n{prompts.INVESTIGATE}")
        answer = await self.ask(self.investigator, "investigate", [system, *self.context_messages, *turn])
        asked = answer.tool_calls if i < deps.config.max_tool_turns else []
        calls, skipped, checked_notes = self.new_calls(asked, turn)
        text = answer.content if isinstance(answer.content, str) else render_for_model(answer.content)
        text = _joined(text, "already in evidence, not repeated", skipped)
        if answer.invalid_tool_calls:  # arguments that are not JSON: said in the thread, never run
            bad = "; ".join(
                f"{c.get('name')}: {c.get('error') or 'bad arguments'}" for c in answer.invalid_tool_calls
            )
            text = _joined(text, "invalid tool calls, not run", [outcomes.clip(bad, 200)])
        text = _joined(text, "checked before running", checked_notes)
        swap = format_reserve(HypothesisAnswer) - self.telemetry_tokens
        calls, no_room = calls_with_room(deps, text, calls, deps.model_inputs[-1][1], swap)
        text = _joined(text, "not run, no room under the input budget", no_room)
        update = await self.record_turn(state, i, text, calls, deps.agent_model_name)
        await self.pause()
        return update

    def new_calls(
        self, asked: list[Any], turn: list[BaseMessage]
    ) -> tuple[list[ToolCall], list[str], list[str]]:
        """The model's calls checked (clamped, invariant 13) and new: (to run, already in evidence, notes).

        A call already in evidence is never repeated (it is named instead); one already made this
        round, or twice in this answer, is dropped silently.
        """
        deps = self.deps
        done_now = {
            self.call_key(c["name"], c["args"])
            for m in turn
            if isinstance(m, AIMessage)
            for c in m.tool_calls
        }
        calls: list[ToolCall] = []
        skipped: list[str] = []
        notes: list[str] = []
        for call in asked:
            checked = deps.tools.guard.check(call["name"], dict(call.get("args") or {}))
            args = checked.args  # clamped to the window and limits; a refusal is answered by tools
            if checked.notes:
                notes.append(f"{call['name']}: {checked.note_text()}")
            key = self.call_key(call["name"], args)
            if key in self.earlier:
                skipped.append(f"{call['name']} -> {self.earlier[key]}")
                continue
            if key in done_now or any(self.call_key(c.name, c.args) == key for c in calls):
                continue
            cid = tool_call_id(deps.thread_ts, deps.round, call["name"], args)
            calls.append(ToolCall(id=cid, name=call["name"], args=args))
        return calls, skipped, notes

    async def playbook_turn(self, state: RoundState, plan: PlaybookPlan) -> RoundState | None:
        """The playbook's calls as the round's first turn, before any model call (None: nothing new)."""
        deps = self.deps
        calls: list[ToolCall] = []
        for name, planned in plan.calls:
            args = deps.tools.guard.check(name, planned).args  # checked like any call (invariant 13)
            key = self.call_key(name, args)
            if key in self.earlier or any(self.call_key(c.name, c.args) == key for c in calls):
                continue
            calls.append(
                ToolCall(id=tool_call_id(deps.thread_ts, deps.round, name, args), name=name, args=args)
            )
        if not calls:
            return None
        text = f"playbook {plan.playbook}: {len(calls)} calls"
        if plan.skipped:
            text += f" (skipped: {'; '.join(plan.skipped)})"
        return await self.record_turn(state, 0, text, calls, f"playbook:{plan.playbook}")

    async def record_turn(
        self, state: RoundState, i: int, text: str, calls: list[ToolCall], model: str
    ) -> RoundState:
        """Emit an investigate turn and add it to the round's messages, its calls pending."""
        mid = await self.emit_ai("investigate", i, text, model, calls=calls)
        turn = [*state.get("turn", []), AIMessage(content=text, tool_calls=_lc_calls(calls), id=mid)]
        return {
            "turn": turn,
            "emitted": [*state.get("emitted", []), mid],
            "investigate_i": i + 1,
            "pending": calls,
        }

    async def tools(self, state: RoundState) -> RoundState:
        """Run the pending calls through the tool path; each result joins the turn as a ToolMessage."""
        deps = self.deps
        turn = list(state.get("turn", []))
        emitted = list(state.get("emitted", []))
        k = state.get("tool_i", 0)
        for call in state.get("pending", []):
            mid = deps.mid("tools", k)
            outcome = await deps.tools.run(deps.thread_ts, deps.round, mid, call.id, call.name, call.args)
            if outcome.message_id.startswith(f"{deps.thread_ts}:{deps.round}:"):
                mid = outcome.message_id  # a retry that planned in another order: the staged row stands
            body = tool_body(mid, f"tool result of {call.name}", outcome.compact)
            if outcome.note:  # the clamp is said with the result it shaped
                body = f"[checked: {outcome.note}] {body}"
            turn.append(ToolMessage(content=body, tool_call_id=call.id, id=mid))
            emitted.append(mid)
            k += 1
        await self.pause()
        return {"turn": turn, "emitted": emitted, "tool_i": k, "pending": []}

    @staticmethod
    def after_investigate(state: RoundState) -> str:
        """Tools while the last turn asked for calls; the hypothesis once it asked for none."""
        return "tools" if state.get("pending") else "hypothesis"

    # -- hypothesis, judge, post -------------------------------------------------------------------

    async def hypothesis(self, state: RoundState) -> RoundState:
        """The cause and its claims, each citing evidence; a failed answer is recorded as a failure."""
        deps = self.deps
        turn = list(state.get("turn", []))
        if deps.recall is not None and deps.recalled is None:  # after the investigation: a cause to match
            deps.recalled = await deps.recall(MadeFor(round=deps.round, node="hypothesis"))
            turn.append(recall_message(recall_id(deps.thread_ts), deps.recalled))
        system = SystemMessage(content=f"{deps.preamble}\n\n{prompts.HYPOTHESIS}")
        result = await ask_structured(
            lambda m, msgs: self.ask(m, "hypothesis", msgs),
            deps.agent_model,
            [system, *self.context_messages, *turn],
            HypothesisAnswer,
        )
        failure: str | None = None
        if isinstance(result, Failed):
            failure, claims = result.reason, []
            summary = outcomes.hypothesis_failed_text(result.reason)
        else:
            summary = result.value.summary
            claims = [Claim(**c.model_dump()) for c in result.value.claims]
        mid = await self.emit_ai(
            "hypothesis",
            0,
            summary,
            deps.agent_model_name,
            claims=claims,
            failure=failure,
            raw_answer=result.text if failure else None,
        )
        drafts = [ClaimDraft(text=c.text, evidence_ids=list(c.evidence_ids)) for c in claims]
        told = summary if failure else canonical_json({"summary": summary, "claims": drafts})
        turn.append(AIMessage(content=told, id=mid))
        await self.pause()
        update: RoundState = {
            "turn": turn,
            "emitted": [*state.get("emitted", []), mid],
            "hypothesis": {"summary": summary, "claims": drafts},
            "hypothesis_id": mid,
        }
        if failure:
            update["hypothesis_failure"] = failure
        return update

    async def judge(self, state: RoundState) -> RoundState:
        """A second model grades each claim against the evidence it cites, shown as data."""
        if state.get("hypothesis_failure"):
            return await self.nothing_to_judge(state)
        deps = self.deps
        hyp = state.get("hypothesis") or _NO_HYPOTHESIS
        # the room for the payload: the judge model's budget less what its response_format may take
        budget = deps.config.input_budget_for(deps.judge_model_name) - format_reserve(JudgeAnswer)
        payload = shape_judge_payload(  # services/context_render/judge_shape.py
            await self.judge_payload(state, hyp), budget, judge_input_tokens
        )
        self.sent.judged_from(payload["raw_checks"], budget)  # what the review page rebuilds it from
        messages: list[BaseMessage] = [
            SystemMessage(content=prompts.JUDGE),
            judge_message(payload),  # framed as data (services/context_render/judge_input.py)
        ]
        result = await ask_structured(
            lambda m, msgs: self.ask(m, "judge", msgs), deps.judge_model, messages, JudgeAnswer
        )
        if isinstance(result, Failed):
            return await self.judge_failed(state, result)
        verdict = result.value.model_dump()
        grounded = bool(verdict.get("grounded"))
        questions = [] if grounded else [str(q) for q in verdict.get("questions") or []][:2]
        graded = terse_grades(verdict.get("graded_claims"), hyp["claims"])
        envelope = deps.envelope("judge", 0)
        await self.emit(
            JudgeVerdict(
                **envelope,
                grounded=grounded,
                questions=questions,
                graded_claims=graded,
                hypothesis_id=str(state.get("hypothesis_id")),
                model=deps.judge_model_name,
                sent=self.sent.take(),
            )
        )
        await self.pause()
        return {
            "emitted": [*state.get("emitted", []), envelope["message_id"]],
            "verdict": {"grounded": grounded, "questions": questions, "graded_claims": graded},
        }

    async def judge_payload(self, state: RoundState, hyp: HypothesisDraft) -> dict[str, Any]:
        """What the judge reads: the claims, the evidence they cite, and the numbers it lacks (raw too)."""
        deps = self.deps
        turn = state.get("turn", [])
        evidence = evidence_index(deps.ctx, turn)
        raws: dict[str, str] = {}
        raw_checks = []
        for k, claim in enumerate(hyp["claims"]):
            haystack = ""
            for eid in claim["evidence_ids"]:
                if eid not in evidence:
                    continue
                if eid not in raws:
                    raws[eid] = render_for_model(await deps.raw_reader(eid))
                haystack += raws[eid] + render_for_model(evidence[eid]["digest"])
            missing = [n for n in claim_numbers(claim) if n not in haystack]
            raw_checks.append({"claim": k, "missing": missing})
        hid = state.get("hypothesis_id")
        return judge_payload(deps.ctx, turn, hyp, hid, raw_checks)  # services/context_render/judge_input.py

    async def record_verdict(self, state: RoundState, verdict: JudgeVerdict) -> RoundState:
        """Emit a verdict that grades nothing (a failure), so the post says why there is no answer."""
        await self.emit(verdict.model_copy(update={"sent": self.sent.take()}))
        await self.pause()
        return {
            "emitted": [*state.get("emitted", []), verdict.message_id],
            "verdict": {"grounded": False, "questions": [], "graded_claims": [], "failure": verdict.failure},
        }

    async def nothing_to_judge(self, state: RoundState) -> RoundState:
        """The judge never grades a failed hypothesis: it records that there was nothing to grade."""
        hid, mid = str(state.get("hypothesis_id")), self.deps.mid("judge", 0)
        return await self.record_verdict(state, outcomes.nothing_judged(mid, self.deps.round, hid, _now()))

    async def judge_failed(self, state: RoundState, result: Failed) -> RoundState:
        """The judge's own answer never validated: recorded with its reason, no grades."""
        deps = self.deps
        hid, mid = str(state.get("hypothesis_id")), deps.mid("judge", 0)
        verdict = outcomes.judge_failed(mid, deps.round, hid, deps.judge_model_name, result, _now())
        return await self.record_verdict(state, verdict)

    async def post(self, state: RoundState) -> RoundState:
        """The round's one Slack post and its commit marker, sent together (the post is exactly once)."""
        deps = self.deps
        kind, text = post_text(state)
        envelope = deps.envelope("post", 0)
        emitted = [*state.get("emitted", []), envelope["message_id"]]
        model = (
            deps.agent_model_name
            if kind == "summary" or state.get("hypothesis_failure")
            else deps.judge_model_name
        )
        await self.emit(
            ThreadPost(
                **envelope,
                kind=kind,
                text=redact_text(text),  # the model's words, as recorded and posted (invariant 13)
                answers=list(deps.answers),
                concurrent=concurrent_of_hits(deps.recalled),  # the first post names them (issue 37)
                model=model,
            ),
            RoundCommitted(**deps.envelope("commit", 0), message_ids=emitted),
        )
        return {"emitted": emitted}


PostKind = Literal["summary", "questions", "failure"]


def post_text(state: RoundState) -> tuple[PostKind, str]:
    """The post's kind and words: the grounded summary, the judge's questions, or what failed."""
    verdict = state.get("verdict") or _NO_VERDICT
    hyp = state.get("hypothesis") or _NO_HYPOTHESIS
    if verdict.get("failure"):
        judge_failure = verdict.get("failure")
        hid = str(state.get("hypothesis_id"))
        return "failure", outcomes.failure_post(hid, state.get("hypothesis_failure"), judge_failure)
    if verdict["grounded"]:
        # The claims' evidence ids are in the hypothesis; the post names it once.
        lines = [hyp["summary"], *(f"• {c['text']}" for c in hyp["claims"])]
        return "summary", "\n".join([*lines, f"evidence: {state.get('hypothesis_id')}"])
    qs = verdict["questions"] or ["What else should I look at?"]
    return "questions", "Before I conclude, I need answers to:\n" + "\n".join(
        f"{n}. {q}" for n, q in enumerate(qs, 1)
    )


def calls_with_room(
    deps: RoundDeps, text: str, calls: list[ToolCall], sent: int, swap: int
) -> tuple[list[ToolCall], list[str]]:
    """The calls whose results fit under the input budget of the calls that follow, and those that do not.

    The next call is sent what this one was (`sent` tokens), this answer with its calls, and each
    call's result (at most `tool_result_tokens`); the hypothesis call swaps the investigate prompt and
    the tool schemas for its own prompt and response_format (`swap`: the format's reserve less the
    schemas' tokens); what either of the two may add is held in reserve.
    """
    budget = deps.config.input_budget_for(deps.agent_model_name)
    reserve = max(0, count_tokens(prompts.HYPOTHESIS) - count_tokens(prompts.INVESTIGATE)) + max(0, swap)
    kept: list[ToolCall] = []
    for call in calls:
        trial = [*kept, call]
        lc = [{"name": c.name, "args": c.args, "id": c.id, "type": "tool_call"} for c in trial]
        answer = message_tokens([AIMessage(content=text, tool_calls=lc)])
        if sent + reserve + answer + len(trial) * deps.config.tool_result_tokens > budget:
            break
        kept.append(call)
    return kept, [c.name for c in calls[len(kept) :]]
