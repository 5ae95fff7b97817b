"""The shapes of the hypothesis and judge answers, and the tolerant reading of a model's text.

The models are the contract: their JSON Schema is what the structured-output request sends
(OpenAI's strict `json_schema`, or llama-cpp-python's `json_object` + `schema`), and every answer,
however it was obtained, is validated by them. Reading is tolerant only where no meaning can
change: a code fence, prose around the object, HTML entities for quotes (`&#34;`), and JSON5's
relaxations (unquoted keys, single quotes, trailing commas). Anything else is a validation error
that the caller quotes back to the model once, then records as a failure.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any, TypeVar

import json5
from pydantic import BaseModel, ConfigDict, Field, ValidationError


class ClaimAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1)
    evidence_ids: list[str]


class HypothesisAnswer(BaseModel):
    """A hypothesis states at least one claim: a claim-less answer is a failure, not a hypothesis."""

    model_config = ConfigDict(extra="forbid")

    summary: str
    claims: list[ClaimAnswer] = Field(min_length=1)


class GradeAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    claim: int
    grounded: bool
    reason: str | None  # required but nullable: strict schemas require every property


class JudgeAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    grounded: bool
    graded_claims: list[GradeAnswer]
    questions: list[str]


M = TypeVar("M", bound=BaseModel)


class AnswerError(ValueError):
    """The text holds no answer of the expected shape; the message says why, for the repair prompt."""


_FENCE = re.compile(r"```(?:json5?|JSON)?\s*(.*?)```", re.S)


def _candidates(text: str) -> list[str]:
    """The object-shaped spans worth trying: inside a fence first, then the outermost braces."""
    out = []
    for source in (m.group(1) for m in _FENCE.finditer(text)):
        out.append(source)
    start, end = text.find("{"), text.rfind("}")
    if start >= 0 and end > start:
        out.append(text[start : end + 1])
    return out


def _load(candidate: str) -> Any:
    for source in dict.fromkeys((candidate, html.unescape(candidate))):
        try:
            return json.loads(source)
        except ValueError:
            pass
        try:
            return json5.loads(source)
        except ValueError:
            pass
    raise AnswerError("not valid JSON")


def extract_object(text: str) -> dict[str, Any]:
    """The JSON object of a model's answer, read tolerantly (see the module's docstring)."""
    spans = _candidates(text) or _candidates(html.unescape(text))
    if not spans:
        raise AnswerError(f"the answer holds no JSON object: {text[:120]!r}")
    last: AnswerError | None = None
    for span in spans:
        try:
            value = _load(span)
        except AnswerError as exc:
            last = exc
            continue
        if isinstance(value, dict):
            return value
        last = AnswerError("the answer's JSON is not an object")
    raise last or AnswerError("no JSON object")


def parse_answer(text: str, model: type[M]) -> M:
    """Read and validate; raise AnswerError with a short, quotable reason."""
    value = extract_object(text)
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()[:4]
        )
        raise AnswerError(f"the JSON does not match the schema: {problems}") from None


def response_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema sent with the request: closed objects, every property required (strict mode)."""
    return model.model_json_schema()
