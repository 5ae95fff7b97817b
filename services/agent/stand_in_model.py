"""A deterministic stand-in for a chat model, behind LangChain's BaseChatModel: not a model.

For tests and the offline demo (no model service can be reached from here); it follows rules over
the messages it is given, so nothing it writes is a model's judgement, and every event it leads to
says so (model="local-deterministic").

It is not a transcript: every answer is derived from the messages it is given, and it is
terse, as a real model is prompted to be (every token of its output is paid again on every
later round that loads it).
- investigate: plans the tools the evidence lacks (logs, metrics, pod events for an alert;
  a trace once someone asks about one and a trace id is in the thread), inside the
  preamble's pinned window; answers without calls once results are back.
- hypothesis: one fact per new tool result (values copied verbatim from the digest), the
  people's report that best says what changed since the last verdict, and a cause citing them.
- judge: grades claims by number on the raw checks it is handed, with a reason only for a
  failure, and asks for what a causal claim lacks (the request path, what changed); at most 2 questions.
Every event it leads to is labeled model="local-deterministic".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from schemas.events import canonical_json
from services.boundary.framing import framed_within
from services.context_render.facts import salient_facts
from services.context_render.judge_input import read_judge_input

MODEL_NAME = "local-deterministic"
_WINDOW = re.compile(r"Alert window: (\S+) \.\. (\S+)")
_TASK = re.compile(r"^TASK: (\w+)", re.M)
_TRACE_ID = re.compile(r"\b[0-9a-f]{32}\b")
_EVIDENCE_PREFIX = re.compile(r"^(?:\[checked: [^\]]*\] )?\[evidence ([^\]]+)\] ")
_HUMAN_ID = re.compile(r"^\[([^\]]+)\] ")
_HUMAN_USER = re.compile(r"^<[^>]*> ")
_TRACE_WORDS = ("trace", "span", "request path")
_TRACE_TOOLS = ("query_tempo", "get_trace", "tempo")


def _text(m: BaseMessage) -> str:
    """The message's text with its data frame opened (services/boundary/framing.py): the rules read
    what the frame holds, as a model is told to read it as data."""
    return framed_within(m.content) if isinstance(m.content, str) else json.dumps(m.content)


class DeterministicStandInModel(BaseChatModel):
    """Same interface as ChatOpenAI; same input, same output, on every machine."""

    model_name: str = MODEL_NAME

    @property
    def _llm_type(self) -> str:
        return MODEL_NAME

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        system = "\n".join(_text(m) for m in messages if isinstance(m, SystemMessage))
        task_match = _TASK.search(system)
        task = task_match.group(1) if task_match else "investigate"
        if task == "hypothesis":
            message = AIMessage(content=canonical_json(_hypothesis(messages)))
        elif task == "judge":
            message = AIMessage(content=canonical_json(_judge(messages)))
        else:
            message = _investigate(messages, system, kwargs.get("tools") or [])
        return ChatResult(generations=[ChatGeneration(message=message)])


# --- reading the input -----------------------------------------------------------------------


def _alert(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    for m in messages:
        text = _text(m)
        if isinstance(m, HumanMessage) and text.startswith("ALERT "):
            found: dict[str, Any] = {"labels": {}}
            service = re.search(r"for service (\S+)", text)
            found["service"] = service.group(1) if service else ""
            found["alertname"] = text.split()[1]
            for line in text.splitlines():
                if line.startswith("labels "):
                    found["labels"] = json.loads(line[len("labels ") :])
            return found
    return {"labels": {}, "service": "", "alertname": ""}


def _calls(messages: Sequence[BaseMessage]) -> dict[str, dict[str, Any]]:
    return {str(c["id"]): dict(c) for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}


def _evidence(messages: Sequence[BaseMessage]) -> list[tuple[str, str, Any]]:
    """(evidence id, tool name, digest) of every tool result in the input."""
    calls = _calls(messages)
    found = []
    for m in messages:
        if not isinstance(m, ToolMessage):
            continue
        text = _text(m)
        prefix = _EVIDENCE_PREFIX.match(text)
        body = text[prefix.end() :] if prefix else text
        try:
            digest: Any = json.loads(body)
        except ValueError:
            digest = body
        eid = (
            prefix.group(1)
            if prefix
            else str(
                (digest.get("evidence") or digest.get("evidence_id")) if isinstance(digest, dict) else m.id
            )
        )
        found.append((eid, str(calls.get(m.tool_call_id, {}).get("name", "tool")), digest))
    return found


def _humans_since_verdict(messages: Sequence[BaseMessage]) -> list[tuple[str, str, bool]]:
    """(id, text, mentions the bot) of human turns after the last judge verdict."""
    return _humans(messages, since_verdict=True)


def _humans(messages: Sequence[BaseMessage], since_verdict: bool = False) -> list[tuple[str, str, bool]]:
    """(id, text, mentions the bot) of the thread's human turns (all, or after the last verdict)."""
    out: list[tuple[str, str, bool]] = []
    for m in messages:
        text = _text(m)
        if since_verdict and isinstance(m, AIMessage) and text.startswith("judge ("):
            out = []
        elif isinstance(m, HumanMessage) and not text.startswith("ALERT "):
            mention = text.startswith("(mentions the bot) ")
            body = text.removeprefix("(mentions the bot) ")
            hid = _HUMAN_ID.match(body)
            if hid:
                out.append((hid.group(1), body[hid.end() :], mention))
    return out


# --- investigate -----------------------------------------------------------------------------


def _fill(tool: dict[str, Any], values: dict[str, Any]) -> dict[str, Any] | None:
    """Arguments for a tool from its JSON schema; None when a required one is unknown."""
    params = tool.get("function", {}).get("parameters", {})
    props = params.get("properties", {})
    required = set(params.get("required", []))
    args = {}
    for name in props:
        if name in values and values[name] is not None:
            args[name] = values[name]
        elif name in required:
            return None
    return args


def _investigate(messages: Sequence[BaseMessage], system: str, tools: list[dict[str, Any]]) -> AIMessage:
    if messages and isinstance(messages[-1], ToolMessage):
        got = _evidence(messages)
        return AIMessage(content=f"{len(got)} results in evidence.")
    by_name = {t["function"]["name"]: t for t in tools if "function" in t}
    done = {c["name"] for c in _calls(messages).values()}
    window = _WINDOW.search(system)
    alert = _alert(messages)
    labels = alert["labels"]
    ns = labels.get("namespace")
    container = labels.get("container") or alert["service"]
    all_text = "\n".join(_text(m) for m in messages)
    trace_ids = sorted(set(_TRACE_ID.findall(all_text)))
    asks_trace = any(
        word in text.lower() for _, text, _ in _humans_since_verdict(messages) for word in _TRACE_WORDS
    ) or any(word in system.lower().split("open questions:")[-1] for word in ("trace", "span"))
    memory = any(w in alert["alertname"].lower() for w in ("oom", "memory"))
    where = f'namespace="{ns}",container="{container}"'
    # Matchers go inside the selector (`rate(m[5m]){...}` is not PromQL: Prometheus answers 400). Outside
    # memory, any request counter of the container: services prefix theirs (`ingest_requests_total`).
    metric_query = (
        f"container_memory_working_set_bytes{{{where}}}"
        if memory
        else f'rate({{__name__=~".+_requests_total",{where}}}[5m])'
    )
    values: dict[str, Any] = {
        "start": window.group(1) if window else None,
        "end": window.group(2) if window else None,
        "namespace": ns,
        "limit": 5000,
        "step": "15s",
        "trace_id": trace_ids[0] if trace_ids else None,
    }
    queries = {
        "query_loki": f'{{namespace="{ns}"}}',
        "query_prometheus": metric_query,
    }
    wanted = []
    if not done:
        wanted = ["query_loki", "query_prometheus", "get_pod_events"]
    elif asks_trace and not any(t in name for name in done for t in _TRACE_TOOLS):
        wanted = [n for n in by_name if any(t in n for t in _TRACE_TOOLS)]
    calls: list[dict[str, Any]] = []
    for name in wanted:
        if name not in by_name:
            continue
        args = _fill(by_name[name], {**values, "query": queries.get(name)})
        if args is not None:
            calls.append({"name": name, "args": args, "id": f"local_{len(calls)}", "type": "tool_call"})
    if not calls:
        note = (
            " (a trace was asked for, but no trace id is in the thread)"
            if asks_trace and not trace_ids
            else ""
        )
        return AIMessage(content=f"No further tool calls{note}.")
    names = ", ".join(c["name"] for c in calls)
    return AIMessage(content=f"Querying {names}.", tool_calls=calls)


# --- hypothesis ------------------------------------------------------------------------------

_CHANGE = re.compile(
    r"\b\d+\.\d+\.\d+\b|PR #?\d+|\b(?:deploy\w*|went out|releas\w*|roll\w* back|config\w*|chang\w*|upgrad\w*)",
    re.I,
)


def _since_verdict(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages after the last judge verdict: this round's evidence and the people's news."""
    cut = 0
    for k, m in enumerate(messages):
        if isinstance(m, AIMessage) and _text(m).startswith("judge ("):
            cut = k + 1
    return list(messages[cut:])


def _first_sentence(text: str, width: int = 90) -> str:
    head = re.split(r"(?<=[.!?])\s", " ".join(text.split()), maxsplit=1)[0]
    return head if len(head) <= width else head[: width - 1] + "…"


def _hypothesis(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    """Terse: one fact per new tool result, the people's reports of a change, and a cause citing them.

    Evidence graded in an earlier round is not restated (its headline is in the thread);
    the cause cites what this round adds, or every tool result when nothing is new.
    """
    alert = _alert(messages)
    fresh = _evidence(_since_verdict(messages)) if _judged(messages) else _evidence(messages)
    claims: list[dict[str, Any]] = []
    for eid, _tool, digest in fresh:
        for fact in salient_facts(digest)[:1]:
            claims.append({"text": fact, "evidence_ids": [eid]})
    said = [(hid, text) for hid, text, mention in _humans_since_verdict(messages) if not mention]
    changes = sorted(
        ((len(_CHANGE.findall(text)), k, hid, text) for k, (hid, text) in enumerate(said)),
        key=lambda x: (-x[0], x[1]),
    )
    for score, _k, hid, text in changes[:1]:  # the report that best answers "what changed"
        if score:
            claims.append({"text": _first_sentence(_HUMAN_USER.sub("", text)), "evidence_ids": [hid]})
    cited = list(dict.fromkeys(e for c in claims for e in c["evidence_ids"]))
    if not cited:
        cited = [eid for eid, _, _ in _evidence(messages)]
    service = alert["service"] or "the service"
    cause = {"text": f"cause: {service} ran out of memory ({alert['alertname']})", "evidence_ids": cited}
    claims.append(cause)
    summary = f"{service} {alert['alertname']}: {len(claims)} claims"
    return {"summary": summary, "claims": claims}


def _judged(messages: Sequence[BaseMessage]) -> bool:
    return any(isinstance(m, AIMessage) and _text(m).startswith("judge (") for m in messages)


# --- judge -----------------------------------------------------------------------------------


def _judge_input(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    for m in reversed(messages):
        framed = m.content if isinstance(m, HumanMessage) and isinstance(m.content, str) else ""
        value = read_judge_input(framed)  # the frame as sent, not `_text`'s opened one
        if value is not None:
            return value
    return {"claims": [], "evidence": {}, "raw_checks": []}


def _judge(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    """Grade claim by number (the claims themselves are in the hypothesis); a reason only for a failure."""
    data = _judge_input(messages)
    evidence: dict[str, Any] = data.get("evidence", {})
    checks = {c["claim"]: c for c in data.get("raw_checks", [])}
    kinds = {eid: str(e.get("kind", "")) for eid, e in evidence.items()}
    graded: list[dict[str, Any]] = []
    questions: list[str] = []
    service = data.get("service") or "the service"
    for k, claim in enumerate(data.get("claims", [])):
        ids = [i for i in claim.get("evidence_ids", [])]
        reasons = []
        if not ids or not all(i in evidence for i in ids):
            reasons.append("cites an id not in evidence")
        elif checks.get(k, {}).get("missing"):
            reasons.append(f"not in the raw: {', '.join(checks[k]['missing'])}")
        elif claim.get("text", "").startswith("cause"):
            if not any(any(t in kinds[i] for t in _TRACE_TOOLS) for i in ids):
                reasons.append("no trace cited")
                questions.append(
                    f"Which span of a failing {service} request holds the memory? No trace is in evidence."
                )
            if not any(kinds[i] == "human" for i in ids):
                reasons.append("nothing says what changed")
                questions.append(f"What changed in {service} before memory rose (deploy, config, limits)?")
        # `reason` is always present (null when grounded): the strict answer schema requires it
        graded.append({"claim": k, "grounded": not reasons, "reason": "; ".join(reasons) or None})
    grounded = bool(graded) and all(g["grounded"] for g in graded)
    if not grounded and not questions:
        bad = next((g["claim"] for g in graded if not g["grounded"]), None)
        questions.append(
            "What evidence supports the hypothesis?" if bad is None else f"What supports claim {bad}?"
        )
    return {"grounded": grounded, "graded_claims": graded, "questions": [] if grounded else questions[:2]}
