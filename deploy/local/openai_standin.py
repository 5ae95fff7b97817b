"""An OpenAI-compatible chat-completions stand-in on loopback, for tests: the wire, not a model.

No model service is reachable from here, and every test used to call the local deterministic model
in process, so ChatOpenAI had never sent one request. This server speaks what langchain-openai 1.8 /
openai 3.x send to `POST /v1/chat/completions` (non-streaming: our calls send `"stream": false`) with
`tools`, `tool_choice` and `response_format` (`json_schema`, `json_object`), and answers from the
SAME deterministic logic the tests use in process: `services.agent.stand_in_model` for the agent's
nodes and the judge, `services.compaction.selector.LocalDeterministicSelector` for the compactor's
selector (recognised by its prompt and its `ids`/`reason` schema; that prompt carries no candidate's
`first` today, so the rule's "then earliest" tie-break cannot apply over the wire: see the xfail in
tests/agent/test_openai_wire.py). It is labelled everywhere: the only model it serves is
`standin-deterministic`, `system_fingerprint` and `owned_by` are `openai-standin`, and every
response carries `x-openai-standin: deterministic, not a model`.

It enforces the rules real providers enforce with a 400 and an OpenAI-style error body
(`{"error": {"message", "type", "param", "code"}}`), so code that a real endpoint rejects fails here:
- an assistant message with `tool_calls` is followed by one `tool` message per `tool_call_id`
  before any other message, and every `tool` message answers a call of that assistant message;
- `model` and a non-empty `messages` are required, roles are system/developer/user/assistant/tool,
  unknown request arguments are rejected, `tool_choice` needs `tools` (and a named function among
  them), a strict `json_schema` must close every object (`additionalProperties: false`, every
  property required), `json_object` needs the word "json" in the messages;
- `Authorization: Bearer <key>` is required (401 without it or with a wrong key); a model other than
  `standin-deterministic` is a 404 `model_not_found`.
What it cannot answer deterministically (streaming, `n` > 1, a forced tool call its logic did not
plan, a json_schema its logic has no answer for) is a 400 with code `standin_unsupported`: it never
invents an output.

A development tool only: nothing under `services/` may import it.

- Python: `with running() as oai: ...` (a uvicorn thread on a free port); point the client at it with
  `OPENAI_BASE_URL=oai.base_url OPENAI_API_KEY=oai.api_key` (`oai.env()`), model `standin-deterministic`.
- CLI: `python -m deploy.local.openai_standin --port 8089` prints the base URL (`.../v1`) on stdout's
  first line, then serves until interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import re
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from deploy.local import asgi_thread, model_roles, openai_embeddings
from deploy.local.model_roles import Fault, Script, ServerMode
from schemas.events import canonical_json
from schemas.tokens import count_tokens
from services.agent.stand_in_model import DeterministicStandInModel
from services.compaction.selector import Candidate, LocalDeterministicSelector

Json = dict[str, Any]

STANDIN = "openai-standin"
MODEL = "standin-deterministic"
DEFAULT_API_KEY = "sk-openai-standin-not-a-real-key"
LABEL_HEADER = "x-openai-standin"
LABEL = "deterministic, not a model"
ROLES = ("system", "developer", "user", "assistant", "tool")
NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# What the Chat Completions API accepts; anything else is "Unrecognized request argument".
KNOWN_ARGS = frozenset(
    {"model", "messages", "tools", "tool_choice", "parallel_tool_calls", "response_format", "temperature"}
    | {"top_p", "n", "stream", "stream_options", "stop", "max_tokens", "max_completion_tokens", "seed"}
    | {"presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "user"}
    | {"metadata", "store", "service_tier", "reasoning_effort", "modalities", "audio", "prediction"}
    | {"prompt_cache_key", "safety_identifier", "verbosity", "web_search_options", "functions"}
    | {"function_call"}
)
# The compactor's selector prompt (services/compaction/selector.py `_PROMPT`), read back into candidates.
SELECTOR_LINES = "Candidates (JSON lines):\n"
SELECTOR_BUDGET = re.compile(r"sum to at most (\d+)")
SELECTOR_ALERT = re.compile(r"^Alert: (.*)$", re.M)


class WireError(Exception):
    """An error answer: HTTP status plus OpenAI's error object."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.headers = headers or {}
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param
        self.code = code

    def body(self) -> Json:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def bad(message: str, param: str | None = None, code: str | None = None) -> WireError:
    return WireError(400, message, param=param, code=code)


def unsupported(message: str, param: str | None = None) -> WireError:
    """What the deterministic logic cannot answer: said so, never made up."""
    return WireError(400, f"{STANDIN}: {message}", param=param, code="standin_unsupported")


@dataclass(frozen=True)
class WireCall:
    """One request as received and how it was answered, so tests can assert what a client sent."""

    path: str
    status: int
    body: Any
    error: Json | None
    response: Json | None


# --- validating a request --------------------------------------------------------------------------


def _text(content: Any, param: str) -> str:
    """A message's content as text: a string, or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for k, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") not in ("text", "refusal"):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise unsupported(f"content part of type {kind!r} (only text)", f"{param}[{k}]")
            value = part.get("text", part.get("refusal"))
            if not isinstance(value, str):
                raise bad(f"Invalid '{param}[{k}].text': expected a string.", f"{param}[{k}].text")
            parts.append(value)
        return "".join(parts)
    raise bad(f"Invalid type for '{param}': expected a string or an array of parts.", param, "invalid_type")


def check_messages(messages: Any) -> None:
    """Each message's shape, then the tool-call sequence rule real providers enforce."""
    if not isinstance(messages, list):
        raise bad("Invalid type for 'messages': expected an array.", "messages", "invalid_type")
    if not messages:
        raise bad(
            "Invalid 'messages': empty array. Expected an array with minimum length 1.",
            "messages",
            "empty_array",
        )
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise bad(f"Invalid type for '{where}': expected an object.", where, "invalid_type")
        role = m.get("role")
        if role not in ROLES:
            supported = ", ".join(f"'{r}'" for r in ROLES)
            if role is None:
                raise bad(
                    f"Missing required parameter: '{where}.role'.",
                    f"{where}.role",
                    "missing_required_parameter",
                )
            raise bad(
                f"Invalid value: {json.dumps(role)}. Supported values are: {supported}.",
                f"{where}.role",
                "invalid_value",
            )
        calls = m.get("tool_calls")
        if role == "assistant":
            if m.get("content") is None and not calls:
                raise bad(f"Invalid '{where}': an assistant message needs 'content' or 'tool_calls'.", where)
            if m.get("content") is not None:
                _text(m["content"], f"{where}.content")
            if calls is not None:
                _check_calls(calls, f"{where}.tool_calls")
        else:
            if calls is not None:
                raise bad(f"Invalid parameter: 'tool_calls' only on assistant messages ({where}).", where)
            if "content" not in m:
                raise bad(
                    f"Missing required parameter: '{where}.content'.",
                    f"{where}.content",
                    "missing_required_parameter",
                )
            _text(m["content"], f"{where}.content")
        if role == "tool" and not isinstance(m.get("tool_call_id"), str):
            raise bad(
                f"Missing required parameter: '{where}.tool_call_id'.",
                f"{where}.tool_call_id",
                "missing_required_parameter",
            )
    check_tool_sequence(messages)


def _check_calls(calls: Any, where: str) -> None:
    if not isinstance(calls, list):
        raise bad(f"Invalid type for '{where}': expected an array.", where, "invalid_type")
    seen: set[str] = set()
    for k, c in enumerate(calls):
        at = f"{where}[{k}]"
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(c, dict) or c.get("type") != "function" or not isinstance(fn, dict):
            raise bad(f"Invalid '{at}': expected {{'type': 'function', 'id', 'function'}}.", at)
        if not isinstance(c.get("id"), str) or not c["id"]:
            raise bad(f"Missing required parameter: '{at}.id'.", f"{at}.id", "missing_required_parameter")
        if c["id"] in seen:
            raise bad(f"Invalid '{at}.id': duplicate tool_call_id {c['id']!r}.", f"{at}.id")
        seen.add(c["id"])
        if not isinstance(fn.get("name"), str) or not isinstance(fn.get("arguments"), str):
            raise bad(f"Invalid '{at}.function': 'name' and 'arguments' must be strings.", f"{at}.function")


def check_tool_sequence(messages: list[Json]) -> None:
    """An assistant message with tool_calls is followed by one tool message per call id, before any
    other message; a tool message answers a call of the assistant message it follows."""
    open_at: int | None = None  # index of the assistant message whose calls are being answered
    waiting: list[str] = []
    answered: set[str] = set()

    def unanswered() -> WireError:
        missing = ", ".join(c for c in waiting if c not in answered)
        return bad(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to "
            f"each 'tool_call_id'. The following tool_call_ids did not have response messages: {missing}",
            f"messages.[{open_at}].role",
        )

    for i, m in enumerate(messages):
        if m["role"] == "tool":
            call = m["tool_call_id"]
            if open_at is None or call not in waiting or call in answered:
                raise bad(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceding "
                    f"message with 'tool_calls' (tool_call_id {call!r} answers no open call).",
                    f"messages.[{i}].role",
                )
            answered.add(call)
            continue
        if open_at is not None and set(waiting) - answered:
            raise unanswered()
        open_at, waiting, answered = None, [], set()
        if m["role"] == "assistant" and m.get("tool_calls"):
            open_at, waiting = i, [str(c["id"]) for c in m["tool_calls"]]
    if open_at is not None and set(waiting) - answered:
        raise unanswered()


def check_tools(tools: Any) -> list[Json]:
    if not isinstance(tools, list):
        raise bad("Invalid type for 'tools': expected an array.", "tools", "invalid_type")
    for k, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(fn, dict):
            raise unsupported(f"tools[{k}]: only function tools", f"tools[{k}]")
        name = fn.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            raise bad(
                f"Invalid 'tools[{k}].function.name': string does not match pattern '^[a-zA-Z0-9_-]{{1,64}}$'.",
                f"tools[{k}].function.name",
                "invalid_value",
            )
        params = fn.get("parameters")
        if params is not None and (not isinstance(params, dict) or params.get("type") != "object"):
            raise bad(
                f"Invalid schema for function '{name}': schema must be a JSON Schema of 'type: \"object\"'.",
                f"tools[{k}].function.parameters",
                "invalid_function_parameters",
            )
    return tools


def check_tool_choice(choice: Any, tools: list[Json] | None) -> Any:
    if not tools:
        raise bad(
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
            "tool_choice",
        )
    if choice in ("none", "auto", "required"):
        return choice
    fn = choice.get("function") if isinstance(choice, dict) else None
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(fn, dict):
        names = {t["function"]["name"] for t in tools}
        if fn.get("name") not in names:
            raise bad(f"Invalid 'tool_choice': function {fn.get('name')!r} is not in 'tools'.", "tool_choice")
        return choice
    raise bad(
        "Invalid value for 'tool_choice': expected 'none', 'auto', 'required' or a named function.",
        "tool_choice",
        "invalid_value",
    )


def strict_schema_problems(schema: Any, path: tuple[str, ...] = ()) -> list[str]:
    """What OpenAI's strict structured outputs reject: an object not closed, a property not required."""
    problems: list[str] = []
    if not isinstance(schema, dict):
        return problems
    context = f"context=({', '.join(repr(p) for p in path)})"
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        if schema.get("additionalProperties") is not False:
            problems.append(
                f"In {context}, 'additionalProperties' is required to be supplied and to be false."
            )
        missing = [p for p in props if p not in (schema.get("required") or [])]
        if missing:
            problems.append(
                f"In {context}, 'required' is required to be supplied and to be an array including every "
                f"key in properties. Missing {', '.join(repr(p) for p in missing)}."
            )
        for name, sub in props.items():
            problems += strict_schema_problems(sub, (*path, "properties", name))
    for key in ("items",):
        problems += strict_schema_problems(schema.get(key), (*path, key))
    for key in ("anyOf", "allOf"):
        for k, sub in enumerate(schema.get(key) or []):
            problems += strict_schema_problems(sub, (*path, key, str(k)))
    for key in ("$defs", "definitions"):
        for name, sub in (schema.get(key) or {}).items():
            problems += strict_schema_problems(sub, (*path, key, name))
    return problems


def check_response_format(fmt: Any, messages: list[Json]) -> Json:
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        raise bad(
            "Invalid 'response_format.type': expected 'text', 'json_object' or 'json_schema'.",
            "response_format.type",
            "invalid_value",
        )
    if fmt["type"] == "json_object":
        said = " ".join(_text(m.get("content") or "", "content") for m in messages).lower()
        if "json" not in said:
            raise bad(
                "'messages' must contain the word 'json' in some form, to use 'response_format' of type "
                "'json_object'.",
                "messages",
            )
    if fmt["type"] == "json_schema":
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict):
            raise bad(
                "Missing required parameter: 'response_format.json_schema'.",
                "response_format.json_schema",
                "missing_required_parameter",
            )
        name = spec.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            raise bad(
                "Invalid 'response_format.json_schema.name': expected a string matching '^[a-zA-Z0-9_-]{1,64}$'.",
                "response_format.json_schema.name",
                "invalid_value",
            )
        schema = spec.get("schema")
        if not isinstance(schema, dict):
            raise bad(f"Invalid schema for response_format '{name}': expected an object.", "response_format")
        if spec.get("strict"):
            problems = strict_schema_problems(schema)
            if problems:
                raise bad(f"Invalid schema for response_format '{name}': {problems[0]}", "response_format")
    return fmt


# --- answering -------------------------------------------------------------------------------------


def to_langchain(messages: list[Json]) -> list[BaseMessage]:
    """The wire messages as the LangChain messages the local logic reads (ids are not on the wire)."""
    out: list[BaseMessage] = []
    for i, m in enumerate(messages):
        text = _text(m.get("content") or "", f"messages[{i}].content")
        if m["role"] in ("system", "developer"):
            out.append(SystemMessage(content=text))
        elif m["role"] == "user":
            out.append(HumanMessage(content=text))
        elif m["role"] == "tool":
            out.append(ToolMessage(content=text, tool_call_id=m["tool_call_id"]))
        else:
            calls = []
            for k, c in enumerate(m.get("tool_calls") or []):
                try:
                    args = json.loads(c["function"]["arguments"] or "{}")
                except ValueError:
                    raise bad(
                        f"Invalid 'messages[{i}].tool_calls[{k}].function.arguments': not JSON.",
                        f"messages[{i}].tool_calls[{k}].function.arguments",
                    ) from None
                calls.append(
                    {"name": c["function"]["name"], "args": args, "id": c["id"], "type": "tool_call"}
                )
            out.append(AIMessage(content=text, tool_calls=calls))
    return out


def select_from_prompt(prompt: str) -> Json | None:
    """The compactor selector's answer ({ids, reason}) by the local rule, or None for another prompt."""
    if SELECTOR_LINES not in prompt:
        return None
    budget = SELECTOR_BUDGET.search(prompt)
    alert = SELECTOR_ALERT.search(prompt)
    if budget is None:
        return None
    candidates = []
    for line in prompt.split(SELECTOR_LINES, 1)[1].splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        candidates.append(
            Candidate(
                id=str(d["id"]),
                text=str(d.get("text", "")),
                n=int(d.get("n", 1)),
                level=str(d.get("level", "info")),
                pinned=bool(d.get("pinned")),
                tokens=int(d["tokens"]),
                first=d.get("first"),  # not in today's prompt: the rule's "earliest" tie-break cannot apply
                salience=float(d.get("salience", 0.0)),
            )
        )
    context = json.loads(alert.group(1)) if alert else {}
    selection = LocalDeterministicSelector().select(candidates, int(budget.group(1)), context)
    return {"ids": list(selection.ids), "reason": selection.reason}


def _matches(value: Any, schema: Json) -> bool:
    import jsonschema  # a dev dependency, as this tool is

    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError:
        return False
    return True


def answer(body: Json) -> tuple[AIMessage, str]:
    """(the answer, finish_reason) from the deterministic logic; raises `unsupported` rather than invent."""
    messages = to_langchain(body["messages"])
    fmt = body.get("response_format") or {"type": "text"}
    tools = body.get("tools") or []
    prompt = "\n".join(str(m.content) for m in messages)
    if fmt["type"] == "json_schema":
        schema = fmt["json_schema"]["schema"]
        chosen = select_from_prompt(prompt)
        if chosen is not None and _matches(chosen, schema):
            return AIMessage(content=json.dumps(chosen)), "stop"
    result = DeterministicStandInModel()._generate(messages, tools=tools)
    message = result.generations[0].message
    assert isinstance(message, AIMessage)
    if fmt["type"] in ("json_object", "json_schema"):
        try:
            value = json.loads(str(message.content))
        except ValueError:
            raise unsupported(
                f"the deterministic logic has no JSON answer for this {fmt['type']} request"
            ) from None
        if fmt["type"] == "json_schema" and not _matches(value, fmt["json_schema"]["schema"]):
            raise unsupported("the deterministic logic's answer does not fit this json_schema")
        message = AIMessage(content=message.content)
    choice = body.get("tool_choice", "auto")
    calls = list(message.tool_calls)
    if choice == "none":
        calls = []
    elif isinstance(choice, dict):
        calls = [c for c in calls if c["name"] == choice["function"]["name"]][:1]
    if body.get("parallel_tool_calls") is False:
        calls = calls[:1]
    if (choice == "required" or isinstance(choice, dict)) and not calls:
        raise unsupported("tool_choice forces a call the deterministic logic did not plan", "tool_choice")
    message = AIMessage(content=message.content, tool_calls=calls)
    return message, "tool_calls" if calls else "stop"


def completion(body: Json, message: AIMessage, finish: str) -> Json:
    """The response object, with a deterministic id and call ids derived from the request."""
    digest = hashlib.sha256(canonical_json(body).encode()).hexdigest()
    wire: Json = {
        "role": "assistant",
        "content": str(message.content) or None,
        "refusal": None,
        "annotations": [],
    }
    if message.tool_calls:
        wire["tool_calls"] = [
            {
                "id": f"call_standin_{digest[:12]}_{k}",
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
            }
            for k, c in enumerate(message.tool_calls)
        ]
    prompt_tokens = count_tokens(canonical_json([body["messages"], body.get("tools") or []]))
    completion_tokens = count_tokens(canonical_json({k: wire.get(k) for k in ("content", "tool_calls")}))
    return {
        "id": f"chatcmpl-standin-{digest[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL,
        "system_fingerprint": STANDIN,
        "service_tier": None,
        "choices": [{"index": 0, "message": wire, "logprobs": None, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


# --- the server ------------------------------------------------------------------------------------


@dataclass
class OpenAIStandin:
    """The stand-in's state: its API keys and every call it answered."""

    api_keys: tuple[str, ...] = (DEFAULT_API_KEY,)
    url: str = ""
    mode: ServerMode = "openai"  # structured-output support of the server played (model_roles.py)
    faults: Script = field(default_factory=Script)  # scripted misbehaviour (misbehave)
    _calls: list[WireCall] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _script: list[list[Json]] = field(default_factory=list)
    # `POST /v1/embeddings` misbehaving on its next requests: "status_500", or "slow" (answers after
    # `slow_s` seconds, past a client's timeout).
    embedding_faults: list[str] = field(default_factory=list)
    slow_s: float = 5.0

    def script_tool_calls(self, *turns: list[Json]) -> None:
        """Answer the next requests that offer tools with these calls (`{"name", "args"}` each), as a
        hostile or broken model would: names and arguments are sent as given, offered or not. Once
        the script is used up, the deterministic logic answers again."""
        with self._lock:
            self._script.extend(list(turn) for turn in turns)

    def _scripted(self, body: Json) -> tuple[AIMessage, str] | None:
        if not body.get("tools"):
            return None
        with self._lock:
            if not self._script:
                return None
            turn = self._script.pop(0)
        calls = [
            {"name": c["name"], "args": c["args"], "id": f"s{k}", "type": "tool_call"}
            for k, c in enumerate(turn)
        ]
        return AIMessage(content="", tool_calls=calls), "tool_calls" if calls else "stop"

    @property
    def base_url(self) -> str:
        """What OPENAI_BASE_URL is set to."""
        return f"{self.url}/v1"

    @property
    def api_key(self) -> str:
        return self.api_keys[0]

    def env(self) -> dict[str, str]:
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": self.api_key}

    def misbehave(self, fault: Fault, node: str | None = None, times: int = 1) -> None:
        """Play `fault` on the next `times` answers for `node` (investigate, hypothesis, judge)."""
        self.faults.add(fault, node, times)

    def calls(self) -> list[WireCall]:
        with self._lock:
            return list(self._calls)

    def authorize(self, header: str | None) -> None:
        scheme, _, token = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise WireError(
                401,
                "You didn't provide an API key. You need to provide your API key in an Authorization header "
                "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
            )
        if token.strip() not in self.api_keys:
            raise WireError(401, "Incorrect API key provided.", code="invalid_api_key")

    def complete(self, authorization: str | None, raw: bytes) -> tuple[int, Json]:
        """One POST /v1/chat/completions: (status, body), recorded."""
        status, out, _headers = self.complete_with_headers(authorization, raw)
        return status, out

    def complete_with_headers(
        self, authorization: str | None, raw: bytes
    ) -> tuple[int, Json, dict[str, str]]:
        body: Any = None
        headers: dict[str, str] = {}
        try:
            self.authorize(authorization)
            body = _body(raw)
            response = self._complete(body)
            status, out, error = 200, response, None
        except WireError as exc:
            status, out, error = exc.status, exc.body(), exc.body()["error"]
            response, headers = None, exc.headers
        with self._lock:
            self._calls.append(WireCall("/v1/chat/completions", status, body, error, response))
        return status, out, headers

    def embed(self, authorization: str | None, raw: bytes) -> tuple[int, Json, str | None]:
        """One POST /v1/embeddings: (status, body, the fault played), recorded."""
        body: Any = None
        with self._lock:
            fault = self.embedding_faults.pop(0) if self.embedding_faults else None
        try:
            self.authorize(authorization)
            body = _body(raw)
            response = self._embeddings(body)
            if fault == "status_500":
                raise _status_fault("status_500")
            status, out, error = 200, response, None
        except WireError as exc:
            status, out, error, response = exc.status, exc.body(), exc.body()["error"], None
        with self._lock:
            self._calls.append(WireCall("/v1/embeddings", status, body, error, response))
        return status, out, fault

    def _embeddings(self, body: Json) -> Json:
        try:
            openai_embeddings.check(body)
            if body["model"] != openai_embeddings.EMBEDDING_MODEL:
                raise WireError(
                    404,
                    f"The model `{body['model']}` does not exist or you do not have access to it. ({STANDIN} "
                    f"embeds only with `{openai_embeddings.EMBEDDING_MODEL}`: hashed words, not a model.)",
                    code="model_not_found",
                )
            return openai_embeddings.embeddings(body)
        except openai_embeddings.EmbeddingsRequestError as exc:
            raise bad(str(exc), exc.param, exc.code) from None

    def _complete(self, body: Json) -> Json:
        if "model" not in body or not isinstance(body["model"], str) or not body["model"]:
            raise bad("you must provide a model parameter")
        if "messages" not in body:
            raise bad("Missing required parameter: 'messages'.", "messages", "missing_required_parameter")
        unknown = sorted(set(body) - KNOWN_ARGS)
        if unknown:
            raise bad(f"Unrecognized request argument supplied: {unknown[0]}")
        if body["model"] != MODEL:
            raise WireError(
                404,
                f"The model `{body['model']}` does not exist or you do not have access to it. "
                f"({STANDIN} serves only `{MODEL}`: deterministic, not a model.)",
                code="model_not_found",
            )
        check_messages(body["messages"])
        tools = check_tools(body["tools"]) if body.get("tools") is not None else None
        if body.get("tool_choice") is not None:
            check_tool_choice(body["tool_choice"], tools)
        fmt = body.get("response_format")
        if fmt is not None:
            self._check_format(fmt, body["messages"])
        if body.get("stream"):
            raise unsupported("streaming is not implemented (our calls send stream=false)", "stream")
        if body.get("n") not in (None, 1):
            raise unsupported("n must be 1", "n")
        fault = self.faults.take(model_roles.node_of(body["messages"]))
        if fault in ("status_429", "status_500"):
            raise _status_fault(fault)
        message, finish = self._scripted(body) or answer(self._as_enforced(body))
        return _spoiled(completion(body, message, finish), fault, model_roles.enforced(self.mode, fmt))

    def _check_format(self, fmt: Any, messages: list[Json]) -> None:
        """The response_format as the played server takes it (model_roles.py)."""
        if self.mode == "openai":
            check_response_format(fmt, messages)
        elif self.mode == "llama-cpp" and (
            not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object")
        ):
            raise bad(model_roles.LLAMA_CPP_REFUSAL, "response_format.type", "literal_error")

    def _as_enforced(self, body: Json) -> Json:
        """What the deterministic logic must answer: llama-cpp enforces json_object's `schema`; `none` nothing."""
        fmt = body.get("response_format") or {}
        if self.mode == "none":
            return {k: v for k, v in body.items() if k != "response_format"}
        if (
            self.mode == "llama-cpp"
            and fmt.get("type") == "json_object"
            and isinstance(fmt.get("schema"), dict)
        ):
            schema = {"name": "schema", "schema": fmt["schema"]}
            return {**body, "response_format": {"type": "json_schema", "json_schema": schema}}
        return body


def _body(raw: bytes) -> Json:
    try:
        body = json.loads(raw)
    except ValueError:
        raise bad("We could not parse the JSON body of your request.") from None
    if not isinstance(body, dict):
        raise bad("The body of your request must be a JSON object.")
    return body


def _status_fault(fault: Fault) -> WireError:
    if fault == "status_429":
        return WireError(
            429,
            "Rate limit reached for requests. Please try again in 1s.",
            kind="requests",
            code="rate_limit_exceeded",
            headers={"retry-after": "1"},
        )
    return WireError(500, "The server had an error while processing your request.", kind="server_error")


def _spoiled(response: Json, fault: Fault | None, enforced: bool) -> Json:
    """The completion as a misbehaving model sends it; an enforced format keeps its content valid."""
    if fault is None:
        return response
    choice = response["choices"][0]
    message = dict(choice["message"])
    content = message.get("content") or ""
    if fault == "truncated":
        message["content"], choice = model_roles.truncate(content), {**choice, "finish_reason": "length"}
    elif fault in model_roles.CONTENT_FAULTS and not enforced and content:
        message["content"] = model_roles.spoil_content(fault, content)
    elif message.get("tool_calls"):
        calls, text = model_roles.spoil_calls(fault, message["tool_calls"])
        message["tool_calls"] = calls or None
        if text is not None:
            message["content"] = text
        if not calls:
            message.pop("tool_calls")
            choice = {**choice, "finish_reason": "stop"}
    return {**response, "choices": [{**choice, "message": message}]}


def _json(body: Json, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse(body, status_code=status, headers={LABEL_HEADER: LABEL, **(headers or {})})


def build_app(standin: OpenAIStandin) -> Starlette:
    async def chat(request: Request) -> Response:
        status, body, headers = standin.complete_with_headers(
            request.headers.get("authorization"), await request.body()
        )
        return _json(body, status, headers)

    async def embeddings(request: Request) -> Response:
        status, body, fault = standin.embed(request.headers.get("authorization"), await request.body())
        if fault == "slow":
            await asyncio.sleep(standin.slow_s)
        return _json(body, status)

    async def models(request: Request) -> Response:
        try:
            standin.authorize(request.headers.get("authorization"))
        except WireError as exc:
            return _json(exc.body(), exc.status)
        return _json(
            {
                "object": "list",
                "data": [
                    {"id": name, "object": "model", "created": 0, "owned_by": STANDIN}
                    for name in (MODEL, openai_embeddings.EMBEDDING_MODEL)
                ],
            }
        )

    async def health(request: Request) -> Response:
        return _json({"ok": True, "standin": STANDIN, "model": MODEL, "base_url": standin.base_url})

    async def unknown(request: Request) -> Response:
        error = WireError(404, f"Invalid URL ({request.method} {request.url.path})")
        return _json(error.body(), 404)

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/_standin/health", health, methods=["GET"]),
            Route("/{path:path}", unknown, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
        ]
    )


def _server(standin: OpenAIStandin) -> uvicorn.Server:
    return asgi_thread.server(build_app(standin), lifespan="off")


@contextlib.contextmanager
def running(
    api_keys: Iterable[str] = (DEFAULT_API_KEY,), *, host: str = "127.0.0.1", mode: ServerMode = "openai"
) -> Iterator[OpenAIStandin]:
    """Serve a stand-in on a free port of `host` in a background thread."""
    standin = OpenAIStandin(api_keys=tuple(api_keys), mode=mode)
    sock, standin.url = asgi_thread.listen(host)
    with asgi_thread.running(_server(standin), sock, STANDIN):
        yield standin


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m deploy.local.openai_standin", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--api-key", action="append", help=f"repeatable; default {DEFAULT_API_KEY}")
    parser.add_argument(
        "--mode", choices=model_roles.SERVER_MODES, default="openai", help="structured-output support played"
    )
    args = parser.parse_args(argv)
    standin = OpenAIStandin(api_keys=tuple(args.api_key or (DEFAULT_API_KEY,)), mode=args.mode)
    sock, standin.url = asgi_thread.listen(args.host, args.port)
    banner = (
        f"{STANDIN}: deterministic, NOT a model; serves only `{MODEL}`. "
        f"OPENAI_BASE_URL={standin.base_url} OPENAI_API_KEY={standin.api_key}"
    )
    asgi_thread.serve_cli(_server(standin), sock, standin.base_url, banner)
    return 0


if __name__ == "__main__":
    sys.exit(main())
