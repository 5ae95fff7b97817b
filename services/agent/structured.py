"""Structured answers for the hypothesis and judge nodes, enforced by the server where it can.

The chain, per endpoint (base URL + model name):
1. `response_format: {"type": "json_schema", "json_schema": {name, schema, strict: true}}`:
   OpenAI's structured outputs (what `with_structured_output(method="json_schema", strict=True)` sends);
2. on a 400 that refuses it, `{"type": "json_object", "schema": ...}`: llama-cpp-python's server
   enforces the schema by grammar; OpenAI's JSON mode ignores `schema` but still returns JSON;
3. on a 400 that refuses that too, the prompt alone.
The mode that worked is remembered per endpoint, so only the first call pays a refusal. Whatever
the mode, the answer is read tolerantly and validated by its pydantic model (services/agent/answers.py);
if it does not validate, ONE repair call quotes the error back. If that fails too, the caller gets a
`Failed` with the reason and the model's text, to record truthfully: never an empty answer.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

import openai
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel

from services.agent.answers import AnswerError, parse_answer, response_schema
from services.context_render.input_budget import response_format_tokens

Mode = Literal["json_schema", "json_object", "prompt"]
MODES: tuple[Mode, ...] = ("json_schema", "json_object", "prompt")
M = TypeVar("M", bound=BaseModel)
Ask = Callable[[Any, list[BaseMessage]], Awaitable[AIMessage]]

# What a refusal of `response_format` says: OpenAI names the param; llama-cpp-python's validation
# error says "Input should be 'text' or 'json_object'"; vLLM and others name the type.
_REFUSAL_WORDS = ("response_format", "json_schema", "json_object", "input should be 'text'")


@dataclass
class ModeMemory:
    """The structured-output mode each endpoint accepted (process-wide: endpoints do not change)."""

    _modes: dict[str, Mode] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, endpoint: str) -> Mode:
        with self._lock:
            return self._modes.get(endpoint, "json_schema")

    def remember(self, endpoint: str, mode: Mode) -> None:
        with self._lock:
            self._modes[endpoint] = mode


MEMORY = ModeMemory()


@dataclass(frozen=True)
class Parsed(Generic[M]):
    value: M
    text: str
    mode: Mode
    repaired: bool


@dataclass(frozen=True)
class Failed:
    reason: str
    text: str  # the model's last answer, verbatim: kept as the failure's raw
    mode: Mode


def endpoint_of(model: Any) -> str:
    """Where a model's calls go: base URL and model name for ChatOpenAI, the class name otherwise."""
    client = getattr(model, "root_async_client", None)  # OPENAI_BASE_URL as the client resolved it
    base = str(getattr(client, "base_url", None) or getattr(model, "openai_api_base", None) or "")
    name = getattr(model, "model_name", None) or type(model).__name__
    return f"{base}|{name}"


def request_format(mode: Mode, name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    return None


@functools.cache  # a constant of the answer's class: its schema is counted once, not on every turn
def format_reserve(shape: type[BaseModel]) -> int:
    """The most tokens a structured call's response_format can add to its input (the json_schema mode's):
    what the context policies hold back for it, so the call fits its input budget whichever mode is sent."""
    schema = response_schema(shape)
    return max(response_format_tokens(request_format(mode, shape.__name__, schema)) for mode in MODES)


def refuses_format(exc: openai.APIStatusError) -> bool:
    """A 400/422 about the response format (not about the messages or the model)."""
    if exc.status_code not in (400, 422):
        return False
    body = exc.body if isinstance(exc.body, dict) else {}
    if body.get("param") == "response_format":
        return True
    said = f"{exc.message} {body}".lower()
    return any(word in said for word in _REFUSAL_WORDS)


def _text(answer: AIMessage) -> str:
    content = answer.content
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)


async def _asked(ask: Ask, model: Any, messages: list[BaseMessage]) -> AIMessage:
    """The answer, also when it was cut at max_tokens: langchain-openai raises on finish_reason
    `length` when a response_format is sent; the cut text is still the model's answer to judge."""
    try:
        return await ask(model, messages)
    except openai.LengthFinishReasonError as exc:
        text = exc.completion.choices[0].message.content or ""
        return AIMessage(content=text, response_metadata={"finish_reason": "length"})


def _truncated(answer: AIMessage) -> bool:
    return (answer.response_metadata or {}).get("finish_reason") == "length"


async def _ask_in_mode(
    ask: Ask, model: Any, messages: list[BaseMessage], name: str, schema: dict[str, Any], memory: ModeMemory
) -> tuple[AIMessage, Mode, Any]:
    """The first answer, walking down the chain from the endpoint's remembered mode on refusals."""
    endpoint = endpoint_of(model)
    modes = MODES[MODES.index(memory.start(endpoint)) :]
    for k, mode in enumerate(modes):
        fmt = request_format(mode, name, schema)
        bound = model.bind(response_format=fmt) if fmt else model
        try:
            answer = await _asked(ask, bound, messages)
        except openai.APIStatusError as exc:
            if k + 1 < len(modes) and refuses_format(exc):
                continue
            raise
        memory.remember(endpoint, mode)
        return answer, mode, bound
    raise AssertionError("unreachable: the last mode sends no response_format")


def _check(answer: AIMessage, shape: type[M]) -> M:
    text = _text(answer)
    try:
        return parse_answer(text, shape)
    except AnswerError as exc:
        if _truncated(answer):
            raise AnswerError(f"the answer was cut off at max_tokens (finish_reason length); {exc}") from None
        raise


def repair_prompt(error: str, schema: dict[str, Any]) -> str:
    return (
        f"Your answer could not be used: {error}. Answer again with one JSON object only, no prose, "
        f"matching this JSON Schema: {schema}"
    )


async def ask_structured(
    ask: Ask,
    model: Any,
    messages: list[BaseMessage],
    shape: type[M],
    *,
    memory: ModeMemory = MEMORY,
) -> Parsed[M] | Failed:
    """One structured answer of `shape`, or a truthful failure (see the module's docstring)."""
    schema = response_schema(shape)
    name = shape.__name__
    answer, mode, bound = await _ask_in_mode(ask, model, messages, name, schema, memory)
    try:
        return Parsed(_check(answer, shape), _text(answer), mode, repaired=False)
    except AnswerError as exc:
        first_error = str(exc)
    retry = [
        *messages,
        AIMessage(content=_text(answer)),
        HumanMessage(content=repair_prompt(first_error, schema)),
    ]
    again = await _asked(ask, bound, retry)
    try:
        return Parsed(_check(again, shape), _text(again), mode, repaired=True)
    except AnswerError as exc:
        reason = f"{exc} (after one repair; first: {first_error})" if str(exc) != first_error else str(exc)
        return Failed(reason, _text(again), mode)
