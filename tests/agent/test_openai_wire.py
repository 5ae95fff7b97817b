"""The OpenAI wire (issue 18, item 5): ChatOpenAI sends real requests, to `deploy/local/openai_standin.py`.

The stand-in answers from the same deterministic logic as the in-process local model, so the seed
thread played through ChatOpenAI (agent, judge and the compactor's selector, configured the way a
deployment is: OPENAI_BASE_URL, OPENAI_API_KEY, a model name that is not "local",
COMPACTOR_SELECTOR=openai) must commit exactly the rows the in-process run commits, apart from the
model label. And it rejects what real providers reject: a torn round (an assistant message whose
tool calls were not all answered, as a killed agent leaves in the table) is a 400 on the wire, and
the same thread after `repair_dangling_tool_calls` passes: invariant 9 against the wire.

No Kafka and no Postgres: the rounds run in process (tests/agent/inprocess.py); only the model
calls cross a socket.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_openai.chat_models.base import _convert_message_to_dict

from deploy.local.openai_standin import LABEL_HEADER, MODEL, STANDIN, OpenAIStandin, WireCall, running
from deploy.local.pipeline import Proc
from deploy.local.seed import seed_incident
from schemas.events import Selection
from schemas.tokens import count_tokens
from services.agent.config import EVIDENCE_TOOL, ModelConfig
from services.agent.mcp_client import McpToolbox
from services.agent.models import build_models
from services.agent.stand_in_model import MODEL_NAME, DeterministicStandInModel
from services.boundary.framing import PREAMBLE_RULE
from services.compaction.registry import budget_for, compact_tool_result
from services.compaction.selector import Candidate, LocalDeterministicSelector
from services.compactor.stream import compact_event
from services.compactor.stream_selector import load_selector
from services.context_render import prompts
from services.context_render.context import ContextRow, repair_dangling_tool_calls, to_messages
from services.context_render.judge_input import PREFIX as JUDGE_PREFIX
from services.context_render.judge_input import read_judge_input
from services.context_render.model_calls import StoredRow, thread_calls
from services.projector.mapping import Row

from . import inprocess
from .inprocess import Seeded, telemetry_server
from .seedplay import mention_wake

pytestmark = pytest.mark.timeout(120)
Json = dict[str, Any]


@pytest.fixture(scope="module")
def oai() -> Iterator[OpenAIStandin]:
    with running() as standin:
        yield standin


@pytest.fixture
def wire_env(oai: OpenAIStandin) -> Iterator[None]:
    """The configuration a deployment uses, pointed at the stand-in."""
    with pytest.MonkeyPatch.context() as mp:
        for key, value in _env(oai).items():
            mp.setenv(key, value)
        yield


def _env(oai: OpenAIStandin) -> dict[str, str]:
    return {**oai.env(), "COMPACTOR_SELECTOR": "openai", "COMPACTOR_SELECTOR_MODEL": MODEL}


@dataclass
class Played:
    thread: Seeded
    tool_specs: list[dict[str, Any]]


async def _play() -> Played:
    """The seed thread's two rounds, exactly as tests/agent/test_round2_budget.py plays them."""
    thread = Seeded()
    async with McpToolbox((telemetry_server(),)) as toolbox:
        await thread.play_seed(toolbox)
        specs = toolbox.tool_specs(exclude=(EVIDENCE_TOOL,))
    return Played(thread, specs)


@dataclass
class Both:
    local: Played
    wire: Played
    calls: list[WireCall]
    selections: tuple[list[Selection], list[Selection]]  # (local, wire), as recorded on the compacted events


@pytest.fixture(scope="module")
def both(oai: OpenAIStandin) -> Both:
    """The seed thread in process (local model), then through ChatOpenAI and the stand-in."""
    recorded: list[Selection] = []

    def recording(event: Any, **kwargs: Any) -> Any:
        result = compact_event(event, **kwargs)
        if result.event.selection is not None:
            recorded.append(result.event.selection)
        return result

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(inprocess, "compact_event", recording)
        mp.delenv("COMPACTOR_SELECTOR", raising=False)
        local = asyncio.run(_play())
        local_selections, recorded[:] = list(recorded), []
        for key, value in _env(oai).items():
            mp.setenv(key, value)
        models = build_models(ModelConfig(agent=MODEL, judge=MODEL))  # the deployment's path
        assert type(models.agent).__name__ == "ChatOpenAI" and models.agent_name == MODEL
        # inprocess.Seeded builds its model as DeterministicStandInModel() for both agent and judge:
        # the same graph, with ChatOpenAI (both roles are the same ChatOpenAI configuration) instead.
        mp.setattr(inprocess, "DeterministicStandInModel", lambda: models.agent)
        mp.setattr(inprocess, "MODEL_NAME", models.agent_name)
        before = len(oai.calls())
        wire = asyncio.run(_play())
        calls = oai.calls()[before:]
    return Both(local, wire, calls, (local_selections, list(recorded)))


def _unlabelled(row: Row, label: str) -> tuple[Any, ...]:
    """A row with its `model` label taken out (and checked to be `label` where there is one)."""

    labelled = False

    def strip(text: str | None) -> Any:
        nonlocal labelled
        if text is None:
            return None
        value = json.loads(text)
        if isinstance(value, dict) and str(value.get("model")).startswith("playbook:"):
            return value  # the playbook's turn: the same in both runs, no model wrote it
        if isinstance(value, dict) and "model" in value:
            assert value["model"] == label, (row.id, value["model"])
            value = {k: v for k, v in value.items() if k != "model"}
            labelled = True
        return value

    content, compact = strip(row.content), strip(row.compact)
    # a row's tokens count the text it is shown by (its compact, else its content), model label included:
    # `standin-deterministic` is one token longer
    counted = row.compact if row.compact is not None else row.content
    shown_labelled = labelled and counted is not None and json.loads(counted).get("model") == label
    tokens = row.tokens - (count_tokens(label) if shown_labelled else 0)
    return (row.id, row.round, row.role, row.tool_call_id, content, compact, tokens)


def test_the_seed_thread_through_chatopenai_commits_what_the_local_model_commits(both: Both) -> None:
    local, wire = both.local.thread.projection.rows, both.wire.thread.projection.rows
    assert len(wire) == len(local) == 20
    assert [_unlabelled(r, MODEL) for r in wire] == [_unlabelled(r, MODEL_NAME) for r in local]
    labelled = [json.loads(r.content).get("model") for r in wire if r.role in ("ai", "judge", "post")]
    # never presented as a real model's output; the alert's first calls are the playbook's, labelled so
    assert labelled and set(labelled) == {MODEL, "playbook:kube-oom"}
    assert labelled.count("playbook:kube-oom") == 1
    # the same calls, the same input sizes (the tokens the graph counts before each call)
    assert both.wire.thread.calls == both.local.thread.calls
    # the compactor's selections: the same ids, by the stand-in's label
    local_sel, wire_sel = both.selections
    assert len(wire_sel) == len(local_sel) >= 1
    assert [s.ids for s in wire_sel] == [s.ids for s in local_sel]
    assert {s.model for s in local_sel} == {MODEL_NAME} and {s.model for s in wire_sel} == {MODEL}


def test_every_model_call_of_the_thread_crossed_the_wire(both: Both) -> None:
    calls = both.calls
    assert calls and all(c.status == 200 for c in calls), [(c.status, c.error) for c in calls]
    selector = [c for c in calls if "Candidates (JSON lines)" in json.dumps(c.body["messages"])]
    chat = [c for c in calls if c not in selector]
    # one request per model call the graph made. Round 1: the alert's playbook made the tool calls
    # (no model call), then investigate (done), hypothesis, judge; round 2: investigate x2, hypothesis, judge.
    assert len(chat) == len(both.wire.thread.calls) == 7
    nodes = [node for _, node, _ in both.wire.thread.calls]
    assert nodes == [
        "investigate",
        "hypothesis",
        "judge",
        "investigate",
        "investigate",
        "hypothesis",
        "judge",
    ]
    for call, node in zip(chat, nodes, strict=True):
        assert call.body["model"] == MODEL and call.body["stream"] is False
        # every call is capped: OpenAI's name, and the legacy one local servers read
        assert call.body["max_completion_tokens"] == call.body["max_tokens"] == 1024
        assert ("tools" in call.body) == (node == "investigate"), node
        # the hypothesis and the judge ask for their schema, strict (OpenAI's structured outputs)
        fmt = call.body.get("response_format")
        if node == "investigate":
            assert fmt is None
        else:
            assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True, node
            assert (
                fmt["json_schema"]["name"] == {"hypothesis": "HypothesisAnswer", "judge": "JudgeAnswer"}[node]
            )
        assert call.response is not None
        assert call.response["model"] == MODEL and call.response["system_fingerprint"] == STANDIN
        if node == "judge":  # the judge's one input crossed the wire framed as data (invariant 13)
            system, judged = call.body["messages"][0], call.body["messages"][-1]
            assert PREAMBLE_RULE in system["content"]
            assert judged["content"].startswith(JUDGE_PREFIX + "<data ")
            payload = read_judge_input(judged["content"])
            assert payload is not None and payload["claims"], judged["content"][:200]
    assert [c.response["choices"][0]["finish_reason"] for c in chat if c.response][3:5] == [
        "tool_calls",
        "stop",
    ]
    # the compactor's selector: structured output (json_schema, strict) through ChatOpenAI
    assert len(selector) >= 1
    fmt = selector[0].body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    answered = selector[0].response
    assert answered is not None
    assert set(json.loads(answered["choices"][0]["message"]["content"])) == {"ids", "reason"}


def test_the_selector_through_chatopenai_chooses_what_the_local_rule_chooses(wire_env: None) -> None:
    """Every selection the seed's raws need at budgets from 120 up, by the worker's `--selector openai`."""
    seed = seed_incident()
    wire = load_selector("openai")
    assert getattr(wire, "model", None) == MODEL
    compared = 0
    for tool in ("query_loki", "query_prometheus", "get_pod_events", "query_tempo"):
        raw, context = seed.raw_for(tool), seed.alert_context(f"{seed.thread_ts}:1:tools:0")
        for budget in range(120, budget_for(tool) + 1, 40):
            local = compact_tool_result(
                tool, raw, context, budget=budget, selector=LocalDeterministicSelector()
            )
            if local.selection is None:
                continue
            over = compact_tool_result(tool, raw, context, budget=budget, selector=wire)
            assert over.selection is not None and over.selection.model == MODEL
            assert over.selection.ids == local.selection.ids, (tool, budget)
            assert over.compact == local.compact, (tool, budget)
            compared += 1
    print(f"{compared} selections compared over the wire")
    assert compared >= 3


def test_the_selector_prompt_carries_the_earliest_tie_break(wire_env: None) -> None:
    tied = [
        Candidate(
            id=f"p{k}", text=f"line {k}", n=1, level="info", pinned=False, tokens=10, first=f"03:0{9 - k}"
        )
        for k in range(3)
    ]
    local = LocalDeterministicSelector().select(tied, 20, {})
    assert local.ids == ["p2", "p1"]
    assert load_selector("openai").select(tied, 20, {}).ids == local.ids


# --- invariant 9 against the wire --------------------------------------------------------------------


def _torn(both: Both) -> tuple[list[ContextRow], str]:
    """The finished seed thread plus a round 3 that died between its two tool results."""
    ctx = both.local.thread.projection.context(mention_wake().thread_ts)
    t = ctx.thread_ts
    calls = [
        {"id": "c3-tempo", "name": "query_tempo", "args": {"trace_id": "0" * 32}},
        {"id": "c3-events", "name": "get_pod_events", "args": {"namespace": "shop"}},
    ]
    torn = [
        ContextRow(f"{t}:3:investigate:0", "ai", None, {"text": "Querying.", "tool_calls": calls}, 10),
        ContextRow(f"{t}:3:tools:0", "tool", "c3-tempo", {"summary": "1 trace"}, 5),
        ContextRow(f"{t}:-:human:1773480000.000100", "human", None, {"user": "U1", "text": "any news?"}, 5),
    ]
    return [*ctx.rows, *torn], "c3-events"


def _system() -> SystemMessage:
    return SystemMessage(
        content="Alert window: 2026-03-14T03:00:00+00:00 .. 2026-03-14T03:15:00+00:00\n\n"
        + prompts.INVESTIGATE
    )


def test_a_torn_round_is_a_400_on_the_wire_and_passes_after_the_repair(both: Both, wire_env: None) -> None:
    rows, unanswered = _torn(both)
    model = build_models(ModelConfig(agent=MODEL, judge=MODEL)).agent.bind_tools(both.local.tool_specs)
    raw: list[BaseMessage] = [_system(), *to_messages(rows)]
    with pytest.raises(openai.BadRequestError) as caught:
        model.invoke(raw)
    assert caught.value.status_code == 400
    error = caught.value.body
    assert isinstance(error, dict)
    assert "must be followed by tool messages responding to each 'tool_call_id'" in error["message"]
    assert error["message"].endswith(unanswered) and error["type"] == "invalid_request_error"
    assert error["param"] == f"messages.[{len(raw) - 3}].role"  # the torn assistant message
    repaired: list[BaseMessage] = [_system(), *to_messages(repair_dangling_tool_calls(rows))]
    assert len(repaired) == len(raw) - 2  # the torn turn and its partial result, nothing invented
    answer = model.invoke(repaired)
    expected = DeterministicStandInModel().bind(tools=both.local.tool_specs).invoke(repaired)
    assert isinstance(answer, AIMessage) and isinstance(expected, AIMessage)
    assert answer.content == expected.content
    assert [(c["name"], c["args"]) for c in answer.tool_calls] == [
        (c["name"], c["args"]) for c in expected.tool_calls
    ]


def test_a_tool_result_that_answers_no_call_is_a_400_and_the_repair_drops_it(
    both: Both, wire_env: None
) -> None:
    ctx = both.local.thread.projection.context(mention_wake().thread_ts)
    orphan = ContextRow(f"{ctx.thread_ts}:3:tools:0", "tool", "c-gone", {"summary": "left behind"}, 5)
    rows = [*ctx.rows, orphan]
    model = build_models(ModelConfig(agent=MODEL, judge=MODEL)).agent
    with pytest.raises(openai.BadRequestError) as caught:
        model.invoke([_system(), *to_messages(rows)])
    assert "messages with role 'tool' must be a response to a preceding message with 'tool_calls'" in str(
        caught.value
    )
    assert isinstance(model.invoke([_system(), *to_messages(repair_dangling_tool_calls(rows))]), AIMessage)


# --- the stand-in's own rules: auth, malformed requests, the response shape ---------------------------


def _post(oai: OpenAIStandin, body: Any, key: str | None = "default") -> httpx.Response:
    headers = {} if key is None else {"Authorization": f"Bearer {oai.api_key if key == 'default' else key}"}
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    with httpx.Client(trust_env=False, timeout=10) as client:
        return client.post(f"{oai.base_url}/chat/completions", content=content, headers=headers)


HELLO = [{"role": "user", "content": "hello"}]


def test_no_key_or_a_wrong_key_is_a_401(oai: OpenAIStandin) -> None:
    body = {"model": MODEL, "messages": HELLO}
    missing = _post(oai, body, key=None)
    assert missing.status_code == 401 and "didn't provide an API key" in missing.json()["error"]["message"]
    wrong = _post(oai, body, key="sk-wrong")
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_api_key"
    assert _post(oai, body).status_code == 200


def test_chatopenai_with_a_wrong_key_gets_an_authentication_error_and_no_retry(
    oai: OpenAIStandin, wire_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    model = build_models(ModelConfig(agent=MODEL, judge=MODEL)).agent
    before = len(oai.calls())
    with pytest.raises(openai.AuthenticationError):
        model.invoke("hello")
    assert [c.status for c in oai.calls()[before:]] == [401]


TOOL = {
    "type": "function",
    "function": {"name": "query_loki", "parameters": {"type": "object", "properties": {}}},
}
OPEN = {"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "string"}}}}


@pytest.mark.parametrize(
    ("body", "status", "expect"),
    [
        (b"{not json", 400, "could not parse the JSON body"),
        ({"messages": HELLO}, 400, "you must provide a model parameter"),
        ({"model": MODEL}, 400, "Missing required parameter: 'messages'"),
        ({"model": MODEL, "messages": []}, 400, "empty array"),
        ({"model": MODEL, "messages": [*HELLO, {"role": "robot", "content": "x"}]}, 400, "messages[1].role"),
        ({"model": MODEL, "messages": [{"content": "x"}]}, 400, "'messages[0].role'"),
        ({"model": MODEL, "messages": [{"role": "tool", "content": "x"}]}, 400, "tool_call_id"),
        ({"model": MODEL, "messages": HELLO, "temperatur": 0}, 400, "Unrecognized request argument"),
        ({"model": MODEL, "messages": HELLO, "tool_choice": "auto"}, 400, "only allowed when 'tools'"),
        (
            {
                "model": MODEL,
                "messages": HELLO,
                "tools": [TOOL],
                "tool_choice": {"type": "function", "function": {"name": "x"}},
            },
            400,
            "not in 'tools'",
        ),
        (
            {
                "model": MODEL,
                "messages": HELLO,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "c", "schema": OPEN, "strict": True},
                },
            },
            400,
            "'additionalProperties' is required",
        ),
        ({"model": MODEL, "messages": HELLO, "response_format": {"type": "json_object"}}, 400, "word 'json'"),
        (
            {"model": MODEL, "messages": HELLO, "stream": True},
            400,
            f"{STANDIN}: streaming is not implemented",
        ),
        ({"model": "gpt-4o", "messages": HELLO}, 404, f"{STANDIN} serves only `{MODEL}`"),
    ],
)
def test_a_malformed_request_is_a_clear_openai_style_error(
    oai: OpenAIStandin, body: Any, status: int, expect: str
) -> None:
    response = _post(oai, body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert expect in error["message"] or expect in str(error["param"]), error


def _alert_request(*names: str) -> Json:
    """An investigate request for the seed alert, offering the named tools (each takes `namespace`)."""
    seed = seed_incident()
    system = f"Alert window: {seed.window_start} .. {seed.window_end}\n{prompts.INVESTIGATE}"
    alert = f'ALERT {seed.alertname} (firing) for service {seed.service}\nlabels {{"namespace":"shop"}}'
    params = {"type": "object", "properties": {"namespace": {"type": "string"}}, "required": ["namespace"]}
    return {
        "model": MODEL,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": alert}],
        "tools": [{"type": "function", "function": {"name": n, "parameters": params}} for n in names],
    }


def test_the_response_has_the_usual_shape_and_says_it_is_a_stand_in(oai: OpenAIStandin) -> None:
    request = _alert_request("get_pod_events")
    response = _post(oai, request)
    assert response.status_code == 200 and response.headers[LABEL_HEADER] == "deterministic, not a model"
    body = response.json()
    assert set(body) >= {"id", "object", "created", "model", "choices", "usage"}
    assert (
        body["object"] == "chat.completion"
        and body["model"] == MODEL
        and body["system_fingerprint"] == STANDIN
    )
    assert body["id"].startswith("chatcmpl-standin-") and isinstance(body["created"], int)
    (choice,) = body["choices"]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["role"] == "assistant"
    (call,) = choice["message"]["tool_calls"]
    assert call["id"].startswith("call_standin_") and call["type"] == "function"
    assert call["function"]["name"] == "get_pod_events"
    assert json.loads(call["function"]["arguments"]) == {"namespace": "shop"}
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0
    assert _post(oai, request).json()["id"] == body["id"]  # same request, same answer
    with httpx.Client(trust_env=False, timeout=10) as client:
        listed = client.get(
            f"{oai.base_url}/models", headers={"Authorization": f"Bearer {oai.api_key}"}
        ).json()
    assert listed["data"] == [
        {"id": name, "object": "model", "created": 0, "owned_by": STANDIN}
        for name in (MODEL, "standin-hashed-words")  # the chat stand-in, and /v1/embeddings' (not a model)
    ]


def test_tool_choice_narrows_the_planned_calls_and_never_forces_an_unplanned_one(oai: OpenAIStandin) -> None:
    request = _alert_request("query_loki", "get_pod_events", "query_tempo")

    def called(**extra: Any) -> list[str]:
        response = _post(oai, {**request, **extra})
        assert response.status_code == 200, response.text
        message = response.json()["choices"][0]["message"]
        return [c["function"]["name"] for c in message.get("tool_calls") or []]

    planned = ["query_loki", "get_pod_events"]  # no trace asked for yet: query_tempo is not planned
    assert called() == called(tool_choice="auto") == called(tool_choice="required") == planned
    assert called(tool_choice="none") == []
    assert called(parallel_tool_calls=False) == planned[:1]
    assert called(tool_choice={"type": "function", "function": {"name": "get_pod_events"}}) == planned[1:]
    forced = _post(oai, {**request, "tool_choice": {"type": "function", "function": {"name": "query_tempo"}}})
    assert forced.status_code == 400 and forced.json()["error"]["code"] == "standin_unsupported"


def test_no_service_imports_the_standin() -> None:
    """A dev tool: it may import services (their deterministic logic), never the reverse."""
    root = Path(__file__).resolve().parents[2]
    offenders = []
    for path in (root / "services").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import | ast.ImportFrom) else []
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if any("openai_standin" in n for n in [*names, module or ""]):
                offenders.append(str(path.relative_to(root)))
    assert offenders == []


def test_cli_prints_the_base_url_and_serves(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "deploy.local.openai_standin", "--port", "0", "--api-key", "sk-cli"]
    root = Path(__file__).resolve().parents[2]
    out, err = tmp_path / "standin.out", tmp_path / "standin.err"
    proc = Proc("openai-standin", cmd, dict(os.environ), out, cwd=root, err_log=err).start()
    try:
        printed = proc.wait_line(r"^http://127\.0\.0\.1:\d+/v1$", 15)
        assert printed.string == proc.text().splitlines()[0]  # alone on stdout's first line
        base_url = printed.group()
        with httpx.Client(trust_env=False, timeout=10) as client:
            response = client.post(
                f"{base_url}/chat/completions",
                json={"model": MODEL, "messages": HELLO},
                headers={"Authorization": "Bearer sk-cli"},
            )
        assert response.status_code == 200 and response.json()["model"] == MODEL
    finally:
        proc.stop(15)


def _stored_rows(played: Played) -> list[StoredRow]:
    """The played thread's projection as the review page reads it: rows beside their first digest."""
    projection = played.thread.projection
    first = {d.message_id: (json.loads(d.compact), d.tokens) for d in projection.cache.values()}
    return [
        StoredRow(
            r.id,
            r.role,
            r.tool_call_id,
            r.round,
            json.loads(r.content),
            json.loads(r.compact) if r.compact else None,
            r.tokens,
            *first.get(r.id, (None, None)),
        )
        for r in projection.rows
    ]


def test_the_model_calls_rebuilt_from_the_rows_are_what_crossed_the_wire(both: Both) -> None:
    """Issue 38 item 4: every investigate, hypothesis and judge call, rebuilt from the projected rows by the
    agent's own rendering (services/context_render/model_calls.py), is the request the endpoint got,
    message for message, and its tokens are the agent's own count of that call's input."""
    played = both.wire
    projection = played.thread.projection
    thread_ts = projection.rows[0].thread_ts
    state = projection.context(thread_ts).state
    rebuilt = thread_calls(thread_ts, state, _stored_rows(played))
    assert [(c.round, c.node) for c in rebuilt] == [
        (1, "investigate"), (1, "hypothesis"), (1, "judge"),
        (2, "investigate"), (2, "investigate"), (2, "hypothesis"), (2, "judge"),
    ]  # fmt: skip
    assert all(not c.inexact for c in rebuilt)  # no row of the seed thread is re-rendered
    chat = [c for c in both.calls if "Candidates (JSON lines)" not in json.dumps(c.body["messages"])]
    assert len(chat) == len(rebuilt)
    for call, wire in zip(rebuilt, chat, strict=True):
        mine = [_convert_message_to_dict(m) for m in call.messages]
        assert mine == wire.body["messages"], call.node
        assert ("tools" in wire.body) == call.tool_schemas_sent
        # the tool schemas and response format, as the row recorded them, are what the request carried
        assert call.sent is not None and call.tools == wire.body.get("tools", []), call.node
        assert call.sent.response_format == wire.body.get("response_format"), call.node
    assert [c.tools for c in rebuilt if c.node == "investigate"] == [played.tool_specs] * 3
    assert [(c.round, c.node, c.input_tokens) for c in rebuilt] == played.thread.calls
    # what the page says of the rows round 2 was sent: round 1's re-rendered to headlines (invariant 10), the rest whole
    stored = {r.id: r for r in _stored_rows(played)}
    hypothesis = [c for c in rebuilt if c.node == "hypothesis"][-1]
    assert [s.id for s in hypothesis.rows] == [r.id for r in projection.rows if r.round != 2]
    hows = {s.id: s.how for s in hypothesis.rows}
    assert {i for i, how in hows.items() if how != "whole"} == {i for i, r in stored.items() if r.re_rendered}
    assert set(hows.values()) == {"whole", "re-rendered (headline)"}
