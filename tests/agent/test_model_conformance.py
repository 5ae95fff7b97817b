"""Model conformance: the agent against an endpoint that plays what real models and servers do badly.

The seed alert's round 1 runs through ChatOpenAI against the OpenAI stand-in (deploy/local/openai_standin.py,
server modes and scripted faults in deploy/local/model_roles.py; a test tool, never a model), in process
as tests/agent/test_openai_wire.py runs it: only the model calls cross a socket, the telemetry MCP server
is the real stdio one. For each role the round either completes with valid answers, or records a truthful
failure (the reason, the model's text kept as raw), and the rows show which.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from langchain_openai.chat_models._client_utils import _cached_async_httpx_client
from langchain_openai.chat_models.base import _convert_message_to_dict

from deploy.local.model_roles import LLAMA_CPP_REFUSAL, ServerMode
from deploy.local.openai_standin import MODEL, OpenAIStandin, WireCall, running
from services.agent import structured
from services.agent.config import ModelConfig
from services.agent.mcp_client import McpToolbox
from services.agent.models import build_models
from services.agent.playbooks import PLAYBOOKS_ENV
from services.context_render.context import IncidentState
from services.context_render.model_calls import ModelCall, StoredRow, thread_calls
from services.projector.mapping import Row

from . import inprocess
from .inprocess import Seeded, telemetry_server
from .seedplay import alert_events, alert_wake

pytestmark = pytest.mark.timeout(180)


def _node(call: WireCall) -> str:
    text = json.dumps(call.body.get("messages") if isinstance(call.body, dict) else "")
    for node in ("investigate", "hypothesis", "judge"):
        if f"TASK: {node}" in text:
            return node
    return "other"


class Played:
    def __init__(self, rows: list[Row], calls: list[WireCall], state: IncidentState | None = None) -> None:
        self.rows = rows
        self.calls = calls
        self.state = state

    def row(self, role: str, node: str | None = None) -> dict[str, Any]:
        for r in self.rows:
            value = json.loads(r.content)
            if r.role == role and (node is None or value.get("node") == node):
                return dict(value)
        raise AssertionError(f"no {role} row {node or ''}")

    def sent(self, node: str) -> list[WireCall]:
        return [c for c in self.calls if _node(c) == node]

    def tools(self) -> list[str]:
        calls = {
            c["id"]: c["name"]
            for r in self.rows
            if r.role == "ai"
            for c in json.loads(r.content)["tool_calls"]
        }
        return [calls[r.tool_call_id] for r in self.rows if r.role == "tool" and r.tool_call_id]


@pytest.fixture
def no_playbook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Playbooks that match no alert: what the model does with tools is then all there is."""
    path = tmp_path / "none.yaml"
    path.write_text(
        "playbooks:\n  - name: never\n    match: {alertname: [NoSuchAlert]}\n    calls: [{tool: query_loki}]\n"
    )
    monkeypatch.setenv(PLAYBOOKS_ENV, str(path))


def _play(oai: OpenAIStandin) -> Played:
    # langchain-openai caches its async HTTP client per base URL; a later stand-in may get a freed port,
    # and that cached client is bound to an earlier test's closed event loop.
    _cached_async_httpx_client.cache_clear()
    with pytest.MonkeyPatch.context() as mp:
        for key, value in oai.env().items():
            mp.setenv(key, value)
        models = build_models(ModelConfig(agent=MODEL, judge=MODEL))
        mp.setattr(inprocess, "DeterministicStandInModel", lambda: models.agent)
        mp.setattr(inprocess, "MODEL_NAME", models.agent_name)
        thread = Seeded()

        async def go() -> None:
            async with McpToolbox((telemetry_server(),)) as toolbox:
                for event in alert_events():
                    thread.projection.apply(event)
                await thread.run(toolbox, alert_wake())

        asyncio.run(go())
    rows = list(thread.projection.rows)
    return Played(rows, oai.calls(), thread.projection.context(rows[0].thread_ts).state)


@pytest.fixture
def serve() -> Iterator[Any]:
    def start(mode: ServerMode) -> OpenAIStandin:
        ctx = running(mode=mode)
        started.append(ctx)
        return ctx.__enter__()

    started: list[Any] = []
    yield start
    for ctx in started:
        ctx.__exit__(None, None, None)


def _valid_hypothesis(played: Played) -> dict[str, Any]:
    hyp = played.row("ai", "hypothesis")
    assert "failure" not in hyp and hyp["claims"], hyp
    assert all(c["text"] and c["evidence_ids"] for c in hyp["claims"])
    return hyp


# --- servers that enforce the schema -------------------------------------------------------------


def test_openai_mode_enforces_the_strict_schema_whatever_the_model_would_write(serve: Any) -> None:
    oai = serve("openai")
    oai.misbehave("unquoted_keys", times=-1)
    played = _play(oai)
    _valid_hypothesis(played)
    assert "failure" not in played.row("judge")
    for node in ("hypothesis", "judge"):
        (call,) = played.sent(node)  # no refusal, no repair
        assert call.body["response_format"]["type"] == "json_schema" and call.status == 200


def test_llama_cpp_mode_refuses_json_schema_once_then_json_object_with_schema(serve: Any) -> None:
    oai = serve("llama-cpp")
    oai.misbehave("unquoted_keys", times=-1)
    played = _play(oai)
    hypothesis = played.sent("hypothesis")
    assert [c.status for c in hypothesis] == [400, 200]
    assert hypothesis[0].error is not None and LLAMA_CPP_REFUSAL in hypothesis[0].error["message"]
    fmt = hypothesis[1].body["response_format"]
    assert fmt["type"] == "json_object" and fmt["schema"]["title"] == "HypothesisAnswer"
    _valid_hypothesis(played)
    # the endpoint's mode is remembered: the judge goes straight to json_object
    (judge,) = played.sent("judge")
    assert judge.body["response_format"]["type"] == "json_object" and judge.status == 200
    assert "failure" not in played.row("judge")
    assert structured.MEMORY.start(f"{oai.base_url}/|{MODEL}") == "json_object"  # as the client resolved it


# --- a server that enforces nothing: tolerant reading, one repair, truthful failure ----------------


@pytest.mark.parametrize("fault", ["unquoted_keys", "prose_around_json", "html_entities"])
def test_what_can_be_read_safely_is_read_without_a_repair(serve: Any, fault: Any) -> None:
    oai = serve("none")
    oai.misbehave(fault, node="hypothesis", times=-1)
    played = _play(oai)
    assert len(played.sent("hypothesis")) == 1
    _valid_hypothesis(played)


def test_an_answer_without_json_is_repaired_once_quoting_the_error(serve: Any) -> None:
    oai = serve("none")
    oai.misbehave("no_json", node="hypothesis", times=1)
    played = _play(oai)
    first, repair = played.sent("hypothesis")
    last = repair.body["messages"][-1]
    assert last["role"] == "user" and "holds no JSON object" in last["content"]
    assert first.response is not None
    assert repair.body["messages"][-2]["content"] == first.response["choices"][0]["message"]["content"]
    _valid_hypothesis(played)


def test_a_hypothesis_that_never_validates_is_a_recorded_failure_never_an_empty_hypothesis(
    serve: Any,
) -> None:
    oai = serve("none")
    oai.misbehave("no_json", node="hypothesis", times=-1)
    played = _play(oai)
    assert len(played.sent("hypothesis")) == 2  # the answer, one repair
    hyp = played.row("ai", "hypothesis")
    assert hyp["claims"] == [] and hyp["text"].startswith("hypothesis failed: ")
    assert "no JSON object" in hyp["failure"] and hyp["raw_answer"].startswith("The checkout-api container")
    # the judge grades nothing: no model call, and it says so
    assert played.sent("judge") == []
    judge = played.row("judge")
    assert judge["grounded"] is False and judge["graded_claims"] == [] and judge["questions"] == []
    assert judge["failure"].startswith("nothing to judge")
    post = played.row("post")
    assert post["kind"] == "failure" and "could not form a hypothesis" in post["text"]
    assert played.rows[-1].role == "post"  # the round committed


def test_a_judge_answer_that_never_validates_is_recorded_and_posted_as_such(serve: Any) -> None:
    oai = serve("none")
    oai.misbehave("no_json", node="judge", times=-1)
    played = _play(oai)
    _valid_hypothesis(played)
    judge = played.row("judge")
    assert judge["grounded"] is False and judge["failure"].startswith("judge failed: ")
    assert judge["raw_answer"].startswith("The checkout-api container")
    post = played.row("post")
    assert post["kind"] == "failure" and "ungraded" in post["text"]


def test_output_cut_at_max_tokens_is_repaired_or_failed_saying_so(serve: Any) -> None:
    oai = serve("openai")
    oai.misbehave("truncated", node="hypothesis", times=1)
    played = _play(oai)
    first, _repair = played.sent("hypothesis")
    assert first.response is not None
    assert first.response["choices"][0]["finish_reason"] == "length"
    _valid_hypothesis(played)
    oai = serve("openai")
    oai.misbehave("truncated", node="hypothesis", times=-1)
    hyp = _play(oai).row("ai", "hypothesis")
    assert "cut off at max_tokens" in hyp["failure"]


# --- tools ------------------------------------------------------------------------------------------


def test_a_model_that_calls_no_tool_still_gets_the_playbooks_evidence(serve: Any) -> None:
    oai = serve("openai")
    oai.misbehave("no_tool_calls", node="investigate", times=-1)
    played = _play(oai)
    assert played.tools() == ["query_loki", "query_prometheus", "get_pod_events"]
    assert played.row("ai", "investigate")["model"] == "playbook:kube-oom"
    assert not [
        c
        for c in played.sent("investigate")
        if c.response and c.response["choices"][0]["message"].get("tool_calls")
    ]


def test_without_a_playbook_a_model_that_calls_no_tool_leaves_no_evidence(
    serve: Any, no_playbook: None
) -> None:
    oai = serve("openai")
    oai.misbehave("no_tool_calls", node="investigate", times=-1)
    played = _play(oai)
    assert played.tools() == []  # what the playbook is for
    assert played.row("ai", "investigate")["text"] == "1773458070.545498:-:alert:0"


def test_tool_calls_with_invalid_json_arguments_are_said_and_not_run(serve: Any, no_playbook: None) -> None:
    oai = serve("openai")
    oai.misbehave("invalid_tool_args", node="investigate", times=1)
    played = _play(oai)
    first = played.row("ai", "investigate")
    assert first["tool_calls"] == [] and "invalid tool calls, not run: query_loki" in first["text"]
    assert played.rows[-1].role == "post"


def test_an_unknown_tool_name_is_answered_with_a_truthful_error(serve: Any, no_playbook: None) -> None:
    oai = serve("openai")
    oai.misbehave("unknown_tool", node="investigate", times=1)
    played = _play(oai)
    assert "run_shell" in played.tools()
    errors = [r.content for r in played.rows if r.role == "tool" and "run_shell" in r.content]
    assert errors and "error" in errors[0]
    assert played.rows[-1].role == "post"


# --- the server's own errors --------------------------------------------------------------------


@pytest.mark.parametrize(("fault", "status"), [("status_429", 429), ("status_500", 500)])
def test_a_transient_429_or_500_is_retried_and_the_round_completes(
    serve: Any, fault: Any, status: int
) -> None:
    oai = serve("openai")
    oai.misbehave(fault, node="hypothesis", times=1)
    played = _play(oai)
    assert [c.status for c in played.sent("hypothesis")] == [status, 200]
    _valid_hypothesis(played)


def test_a_server_that_keeps_failing_fails_the_round_after_the_clients_retries(serve: Any) -> None:
    oai = serve("openai")
    oai.misbehave("status_500", node="hypothesis", times=-1)
    with pytest.raises(openai.InternalServerError):
        _play(oai)
    assert {c.status for c in oai.calls() if _node(c) == "hypothesis"} == {500}


# --- the review page's rebuild of refused and repaired calls (issue 38) ------------------------------


def _rebuilt_as_sent(played: Played) -> list[ModelCall]:
    """Every call of the round rebuilt from the rows (services/context_render/model_calls.py), each held
    equal to the request the endpoint received: messages, tool schemas, response format, refusal."""
    rows = [
        StoredRow(r.id, r.role, r.tool_call_id, r.round, json.loads(r.content),
                  json.loads(r.compact) if r.compact else None, r.tokens)
        for r in played.rows
    ]  # fmt: skip
    rebuilt = thread_calls(played.rows[0].thread_ts, played.state, rows)
    wire = [c for c in played.calls if _node(c) != "other"]
    assert [(c.node, _node(w)) for c, w in zip(rebuilt, wire, strict=True)] == [
        (c.node, c.node) for c in rebuilt
    ]
    for call, sent in zip(rebuilt, wire, strict=True):
        assert [_convert_message_to_dict(m) for m in call.messages] == sent.body["messages"], call.node
        assert call.sent is not None and call.tools == sent.body.get("tools", [])
        assert call.sent.response_format == sent.body.get("response_format")
        assert (call.sent.refused is not None) == (sent.status != 200), (call.sent.refused, sent.status)
    return rebuilt


@pytest.mark.parametrize(
    ("mode", "node", "retried"),
    [
        ("llama-cpp", None, ("hypothesis", 2)),
        ("none", "hypothesis", ("hypothesis", 2)),
        ("none", "judge", ("judge", 2)),
    ],
)
def test_refused_and_repaired_calls_are_rebuilt_as_they_were_sent(
    serve: Any, mode: ServerMode, node: str | None, retried: tuple[str, int]
) -> None:
    """A format refusal (llama-cpp's server refuses json_schema) and a repair retry (an answer with no
    JSON) are calls of their own; the rebuild gives each, its appended messages and its refusal."""
    oai = serve(mode)
    if node is not None:
        oai.misbehave("no_json", node=node, times=1)
    rebuilt = _rebuilt_as_sent(_play(oai))
    assert [(c.node, c.attempt) for c in rebuilt if c.attempt > 1] == [retried]
    second = next(c for c in rebuilt if c.attempt == 2)
    assert second.sent is not None
    if mode == "llama-cpp":  # the refused first attempt, then the same messages in JSON mode
        first = next(c for c in rebuilt if c.node == second.node and c.attempt == 1)
        assert first.sent is not None and first.sent.refused and LLAMA_CPP_REFUSAL in first.sent.refused
        assert second.sent.appended == [] and second.messages == first.messages
    else:  # the repair: the first answer and the prompt quoting its error, appended
        assert [m.role for m in second.sent.appended] == ["assistant", "user"]
        assert "holds no JSON object" in second.sent.appended[1].content


def test_a_clamped_tool_call_is_rebuilt_as_it_was_sent(serve: Any, no_playbook: None) -> None:
    """A call the boundary clamps (a range past the pinned window, a limit over the cap) runs clamped and
    says so in its turn; every later call of the round is rebuilt equal to its request."""
    oai = serve("openai")
    wide = {"query": '{namespace="shop"}', "start": "2020-01-01T00:00:00Z", "end": "2030-01-01T00:00:00Z",
            "limit": 100000}  # fmt: skip
    oai.script_tool_calls([{"name": "query_loki", "args": wide}])
    played = _play(oai)
    turn = played.row("ai", "investigate")
    assert "checked before running" in turn["text"] and "clamped" in turn["text"]
    (call,) = turn["tool_calls"]
    assert call["args"]["limit"] < 100000 and call["args"]["start"] != wide["start"]
    rebuilt = _rebuilt_as_sent(played)
    assert [c.node for c in rebuilt][:2] == ["investigate", "investigate"]
